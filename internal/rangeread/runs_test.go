package rangeread

import (
	"bytes"
	"errors"
	"io"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
)

func TestPlan(t *testing.T) {
	b := func(n int) []byte { return make([]byte, n) }
	pieces := []Piece{{b(10), 0}, {b(5), 10}, {b(5), 20}, {b(5), 100}, {b(5), 106}}
	for _, c := range []struct {
		gap, max int64
		want     string
	}{
		{0, 0, "[0 15) [20 25) [100 105) [106 111)"},
		{1, 0, "[0 15) [20 25) [100 111)"},
		{5, 0, "[0 25) [100 111)"},
		{1000, 0, "[0 111)"},
		{1000, 30, "[0 25) [100 111)"},
	} {
		var got []string
		for _, s := range Plan(pieces, c.gap, c.max) {
			got = append(got, "["+strconv.FormatInt(s.Off, 10)+" "+strconv.FormatInt(s.End, 10)+")")
			if s.Pieces[0].Off != s.Off || s.Pieces[len(s.Pieces)-1].End() != s.End {
				t.Errorf("span %v does not start and end with its pieces", s)
			}
		}
		if strings.Join(got, " ") != c.want {
			t.Errorf("gap %d max %d: %v, want %s", c.gap, c.max, got, c.want)
		}
	}
}

func TestFill(t *testing.T) {
	data := []byte("0123456789abcdefghij")
	a, c := make([]byte, 3), make([]byte, 4)
	s := Span{Off: 2, End: 14, Pieces: []Piece{{a, 2}, {c, 8}}}
	if err := Fill(bytes.NewReader(data[2:14]), s); err != nil || string(a) != "234" || string(c) != "89ab" {
		t.Fatalf("%v %q %q", err, a, c)
	}
	for _, n := range []int{0, 2, 5, 9, 11} {
		if err := Fill(bytes.NewReader(data[2:2+n]), s); !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Errorf("short stream of %d: %v", n, err)
		}
	}
}

func TestCheck(t *testing.T) {
	b := func(n int) []byte { return make([]byte, n) }
	if p, err := Check([][]byte{b(1), b(0), b(2)}, []int64{0, 1, 1}, 3); err != nil || len(p) != 2 {
		t.Errorf("valid: %v %v", p, err)
	}
	for _, c := range []struct {
		bufs [][]byte
		offs []int64
	}{
		{[][]byte{b(1)}, []int64{}}, {[][]byte{b(1)}, []int64{-1}}, {[][]byte{b(4)}, []int64{0}},
		{[][]byte{b(1)}, []int64{1<<63 - 1}}, {[][]byte{b(2), b(1)}, []int64{0, 1}},
	} {
		if _, err := Check(c.bufs, c.offs, 3); err == nil {
			t.Errorf("%v %v accepted", len(c.bufs), c.offs)
		}
	}
}

func TestParallel(t *testing.T) {
	var inFlight, peak, calls atomic.Int64
	err := Parallel(100, 3, func(i int) error {
		calls.Add(1)
		n := inFlight.Add(1)
		for {
			p := peak.Load()
			if n <= p || peak.CompareAndSwap(p, n) {
				break
			}
		}
		defer inFlight.Add(-1)
		return nil
	})
	if err != nil || calls.Load() != 100 || peak.Load() > 3 {
		t.Fatalf("err %v calls %d peak %d", err, calls.Load(), peak.Load())
	}
	boom := errors.New("boom")
	calls.Store(0)
	err = Parallel(1000, 2, func(i int) error {
		calls.Add(1)
		if i == 5 {
			return boom
		}
		return nil
	})
	if !errors.Is(err, boom) || calls.Load() > 20 {
		t.Fatalf("err %v after %d calls", err, calls.Load())
	}
}
