package rangeread

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"sync"
	"testing"
)

// strictBackend serves data and records any span that is not well formed
// (outside the object, pieces unsorted, overlapping or outside the span):
// the Reader must never ask for one.
type strictBackend struct {
	data []byte
	mu   sync.Mutex
	bad  error
}

func (b *strictBackend) Fetch(ctx context.Context, s Span) error {
	if err := s.check(); err != nil || s.End > int64(len(b.data)) || s.Off >= s.End {
		b.mu.Lock()
		b.bad = fmt.Errorf("bad span [%d, %d) with %d pieces: %v", s.Off, s.End, len(s.Pieces), err)
		b.mu.Unlock()
		return b.bad
	}
	return Fill(bytes.NewReader(b.data[s.Off:s.End]), s)
}

type strictMulti struct{ *strictBackend }

// FetchMulti fills every other span and leaves the rest to Fetch.
func (b strictMulti) FetchMulti(ctx context.Context, spans []Span) ([]Span, error) {
	var left []Span
	for i, s := range spans {
		if i%2 == 1 {
			left = append(left, s)
			continue
		}
		if err := b.Fetch(ctx, s); err != nil {
			return nil, err
		}
	}
	return left, nil
}

// fuzzOps decodes a fuzz input into a Reader's configuration and a list
// of operations on it.
type fuzzOps struct{ b []byte }

func (f *fuzzOps) u16() int64 {
	if len(f.b) < 2 {
		f.b = nil
		return 0
	}
	v := binary.LittleEndian.Uint16(f.b)
	f.b = f.b[2:]
	return int64(v)
}

// FuzzReader drives a Reader over a 4 KiB object with random prefix,
// cache, gap, read-ahead and tail sizes through random Prefetch (any
// order, overlaps, out of range), ReadAt and ReadRuns calls, and compares
// every byte read with the object's: a panic, a malformed span sent to the
// backend or a wrong byte fails. The prefetch-then-read sequences of the
// zip lister (overlapping local headers) are in the seeds.
func FuzzReader(f *testing.F) {
	le := func(vs ...uint16) []byte {
		b := make([]byte, 2*len(vs))
		for i, v := range vs {
			binary.LittleEndian.PutUint16(b[2*i:], v)
		}
		return b
	}
	// prefix, cache, gap, multigap, readahead, tail, multi; ops: kind, args
	f.Add(le(1, 4096, 64, 16, 256, 512, 0, 0, 3, 100, 50, 120, 200, 0, 100, 178))
	f.Add(le(150, 8192, 0, 0, 0, 0, 1, 0, 4, 200, 30, 220, 90, 210, 5, 400, 10, 1, 200, 100))
	f.Add(le(0, 100, 4096, 4096, 4096, 4096, 1, 2, 4, 0, 4096, 100, 10, 50, 10, 1, 0, 4096))
	const size = 4096
	data := randData(size, 77)
	f.Fuzz(func(t *testing.T, in []byte) {
		in = in[:min(len(in), 2048)] // bounded work per input
		ops := &fuzzOps{b: in}
		prefix := ops.u16() % (size + 1)
		cfg := Config{
			Size: size, Prefix: data[:prefix], Concurrency: 3,
			Cache: ops.u16() % 16384, Gap: ops.u16() % 1024, MultiGap: ops.u16() % 1024,
			ReadAhead: ops.u16() % 8192, Tail: ops.u16() % 8192,
		}
		sb := &strictBackend{data: data}
		var be Backend = sb
		if ops.u16()%2 == 1 {
			be = strictMulti{sb}
		}
		r := New(be, cfg)
		ctx := context.Background()
		for len(ops.b) > 0 {
			switch ops.u16() % 3 {
			case 0: // ReadAt
				off, n := ops.u16()%(size+64), ops.u16()%2048
				p := make([]byte, n)
				got, err := r.ReadAt(ctx, p, off)
				want := max(0, min(n, size-off))
				if got != int(want) || !bytes.Equal(p[:got], data[min(off, size):min(off, size)+want]) {
					t.Fatalf("ReadAt(%d, %d) = %d, %v: wrong bytes", n, off, got, err)
				}
				if (err == io.EOF) != (want < n) || (err != nil && err != io.EOF) {
					t.Fatalf("ReadAt(%d, %d) = %d, %v", n, off, got, err)
				}
			case 1: // Prefetch of k ranges, any order, overlapping
				k := ops.u16() % 16
				offs, lens := make([]int64, k), make([]int64, k)
				for i := range offs {
					offs[i], lens[i] = ops.u16()%(size+64)-32, ops.u16()%1024-16
				}
				if err := r.Prefetch(ctx, offs, lens); err != nil {
					t.Fatalf("Prefetch(%v, %v): %v", offs, lens, err)
				}
			case 2: // ReadRuns of k sorted, disjoint runs
				k := ops.u16() % 16
				var bufs [][]byte
				var offs []int64
				pos := int64(0)
				for range k {
					off := pos + ops.u16()%512
					n := min(ops.u16()%512, size-off)
					if n < 0 {
						break
					}
					bufs, offs = append(bufs, make([]byte, n)), append(offs, off)
					pos = off + n
				}
				if err := r.ReadRuns(ctx, bufs, offs); err != nil {
					t.Fatalf("ReadRuns(%v): %v", offs, err)
				}
				for i, b := range bufs {
					if !bytes.Equal(b, data[offs[i]:offs[i]+int64(len(b))]) {
						t.Fatalf("ReadRuns: run %d at %d: wrong bytes", i, offs[i])
					}
				}
			}
		}
		if sb.bad != nil {
			t.Fatal(sb.bad)
		}
	})
}

// TestPrefetchOverlapPastFirst: ranges that overlap the one before and
// reach past its end, beyond the prefix (the zip lister's local headers
// when names run into the next header), are merged and read, not
// resliced past a buffer's capacity.
func TestPrefetchOverlapPastFirst(t *testing.T) {
	data := randData(4096, 5)
	r, _ := newTestReader(data, 1, Config{Cache: 1 << 20})
	offs := []int64{120, 2000, 100, 4000, 3000}
	lens := []int64{200, 10, 50, 1 << 62, 1<<63 - 1} // the last two clipped at the end
	if err := r.Prefetch(context.Background(), offs, lens); err != nil {
		t.Fatal(err)
	}
	for i, off := range offs {
		n := min(lens[i], int64(len(data))-off)
		p := make([]byte, n)
		if _, err := r.ReadAt(context.Background(), p, off); err != nil || !bytes.Equal(p, data[off:off+n]) {
			t.Fatalf("at %d: %v", off, err)
		}
	}
}

// TestFillRefusesMalformedSpan: pieces outside the span or out of order
// are an error, never bytes written to the wrong place.
func TestFillRefusesMalformedSpan(t *testing.T) {
	src := bytes.Repeat([]byte{1}, 100)
	for _, s := range []Span{
		{Off: 10, End: 20, Pieces: []Piece{{Buf: make([]byte, 5), Off: 5}}},
		{Off: 10, End: 20, Pieces: []Piece{{Buf: make([]byte, 15), Off: 10}}},
		{Off: 10, End: 20, Pieces: []Piece{{Buf: make([]byte, 5), Off: 14}, {Buf: make([]byte, 2), Off: 12}}},
		{Off: 20, End: 10},
	} {
		if err := Fill(bytes.NewReader(src), s); err == nil {
			t.Errorf("Fill(%+v) = nil", s)
		}
	}
}
