package torch

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

// CPython's C unpickler reads an argument or text line that crosses the end
// of a FRAME read with read(n) from the frame end: the strict machine
// refuses every such pickle, and accepts arguments that end exactly at the
// frame end and frames nested inside the current one.
func TestFrameCross(t *testing.T) {
	for _, c := range []struct {
		name  string
		p     []byte
		cross bool
	}{
		{"binunicode ends at frame end", cat(0x80, 4, frame(cat("X", le32(2), "ab")), "."), false},
		{"binunicode payload crosses", cat(0x80, 4, frame(cat("X", le32(2), "a")), "b."), true},
		{"binunicode length crosses", cat(0x80, 4, frame(cat("X", 2, 0)), cat(0, 0, "ab.")), true},
		{"binint crosses", cat(0x80, 4, frame(cat("J", 1, 0)), cat(0, 0, ".")), true},
		{"long1 crosses", cat(0x80, 4, frame(cat(0x8a, 2, 1)), cat(0, ".")), true},
		{"int line ends at frame end", cat(0x80, 4, frame([]byte("I12\n")), "."), false},
		{"int line crosses", cat(0x80, 4, frame([]byte("I1")), "2\n."), true},
		{"global second line crosses", cat(0x80, 4, frame([]byte("ccollections\nOrdered")), "Dict\n)R."), true},
		{"frame length crosses", cat(0x80, 4, frame(cat("N0", 0x95, 1, 0)), cat(0, 0, 0, 0, 0, 0, "N.")), true},
		{"nested frame inside", cat(0x80, 4, frame(cat("N0", frame([]byte("N")), "0")), "N."), false},
		{"nested frame crosses", cat(0x80, 4, frame(cat("N0", 0x95, le64(2), "N")), "0N."), true},
		{"frame after frame end", cat(0x80, 4, frame([]byte("N0")), frame([]byte("I1\n")), "."), false},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := decode(t, c.p, nil)
			crossed := err != nil && strings.Contains(err.Error(), "crosses a frame end")
			if crossed != c.cross {
				t.Fatalf("crossed=%v, want %v (err %v)", crossed, c.cross, err)
			}
			if c.cross && !errors.Is(err, ErrCorrupt) {
				t.Fatalf("err %v is not ErrCorrupt", err)
			}
			if !c.cross && err != nil {
				t.Fatalf("refused: %v", err)
			}
			// the scan never says clean where the strict machine refuses
			rep, err := Scan(bytes.NewReader(c.p), int64(len(c.p)), "test.pkl")
			if err != nil {
				t.Fatal(err)
			}
			hasProblem := false
			for _, p := range rep.Problems {
				hasProblem = hasProblem || strings.Contains(p, "crosses a frame end")
			}
			if hasProblem != c.cross {
				t.Fatalf("scan problem=%v, want %v: %v", hasProblem, c.cross, rep.Problems)
			}
		})
	}
}

func le64(n uint64) []byte { return cat(le32(uint32(n)), le32(uint32(n>>32))) }

// The opcode walker (here after decoding failed at once) also walks from a
// frame end an argument crossed.
func TestFrameCrossWalker(t *testing.T) {
	for _, build := range []func() []byte{
		func() []byte { p, _ := crossBinary(hPickle("N")[2:]); return cat(0xff, p) },
		func() []byte {
			p, _ := crossText(hTensor(hPid("FloatStorage", "0", 4), 0, []int64{4}, []int64{1}))
			return cat(0xff, p)
		},
	} {
		p := build()
		rep, err := Scan(bytes.NewReader(p), int64(len(p)), "test.pkl")
		if err != nil {
			t.Fatal(err)
		}
		named := false
		for _, g := range rep.Globals {
			named = named || (g.String() == "posix.system" && strings.HasSuffix(g.Entry, "(from a frame end)"))
		}
		if !named || rep.Verdict() != VerdictDangerous {
			t.Errorf("%s: posix.system not named from a frame end: %v %v", rep.Verdict(), rep.NotAllowed(), rep.Problems)
		}
	}
}
