package fetch

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"iter"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
)

// seq turns a slice into the iterator Run takes.
func seq(es []Extent) iter.Seq[Extent] { return slices.Values(es) }

func sum(es []Extent) int64 {
	var n int64
	for _, e := range es {
		n += e.Len
	}
	return n
}

// plan makes random extents over srcs: items of random runs, some
// strided, some touching, in source order.
func plan(r *rand.Rand, sizes []int) ([]Extent, []int64) {
	var es []Extent
	var itemSize []int64
	for s, size := range sizes {
		off := int64(0)
		for off < int64(size) {
			item := len(itemSize)
			var pos int64
			runs := 1 + r.IntN(4)
			for range runs {
				off += int64(r.IntN(3)) * int64(r.IntN(50)) // a gap, often none
				n := min(int64(1+r.IntN(3000)), int64(size)-off)
				if n <= 0 {
					break
				}
				es = append(es, Extent{Src: s, Off: off, Len: n, Item: item, Pos: pos})
				pos += n
				off += n
			}
			itemSize = append(itemSize, pos)
		}
	}
	return es, itemSize
}

func TestRunAssembles(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for trial := range 40 {
		sizes := []int{1 + r.IntN(20000), 1 + r.IntN(20000), r.IntN(5000) + 1}
		data := make([][]byte, len(sizes))
		var srcs []Source
		for i, n := range sizes {
			data[i] = make([]byte, n)
			for k := range data[i] {
				data[i][k] = byte(r.Uint32())
			}
			var ra io.ReaderAt = bytes.NewReader(data[i])
			if i == 1 {
				ra = &runsReader{ReaderAt: ra} // several pieces in one call
			}
			srcs = append(srcs, Source{R: ra, Name: fmt.Sprintf("src%d", i)})
		}
		es, itemSize := plan(r, sizes)
		items := make([][]byte, len(itemSize))
		for i, n := range itemSize {
			items[i] = make([]byte, n)
		}
		cfg := Config{
			Concurrency: 1 + r.IntN(8),
			MaxChunk:    int64(1 + r.IntN(5000)),
			MaxPieces:   1 + r.IntN(5),
		}
		cfg.MinChunk = 1 + r.Int64N(cfg.MaxChunk)
		var seqs []int
		cfg.Buffers = func(_ context.Context, c *Chunk) ([][]byte, error) {
			seqs = append(seqs, c.Seq)
			if c.Bytes > cfg.MaxChunk || len(c.Pieces) > cfg.MaxPieces {
				t.Fatalf("chunk of %d bytes, %d pieces", c.Bytes, len(c.Pieces))
			}
			bufs := make([][]byte, len(c.Pieces))
			for i, p := range c.Pieces {
				bufs[i] = items[p.Item][p.Pos : p.Pos+p.Len]
			}
			return bufs, nil
		}
		var done atomic.Int64
		cfg.Done = func(c *Chunk, bufs [][]byte) error { done.Add(c.Bytes); return nil }
		st, err := Run(context.Background(), srcs, seq(es), sum(es), cfg)
		if err != nil {
			t.Fatalf("trial %d: %v", trial, err)
		}
		if st.Bytes != sum(es) || done.Load() != sum(es) {
			t.Fatalf("trial %d: %d bytes read, %d done, want %d", trial, st.Bytes, done.Load(), sum(es))
		}
		for i, s := range seqs {
			if s != i {
				t.Fatalf("Buffers saw chunk %d as call %d", s, i)
			}
		}
		// Every item holds its runs' bytes, in order.
		for i := range items {
			var want []byte
			for _, e := range es {
				if e.Item == i {
					want = append(want, data[e.Src][e.Off:e.Off+e.Len]...)
				}
			}
			if !bytes.Equal(items[i], want) {
				t.Fatalf("trial %d: item %d differs", trial, i)
			}
		}
	}
}

// runsReader is a RunReader that counts its calls.
type runsReader struct {
	io.ReaderAt
	calls atomic.Int64
}

func (r *runsReader) ReadRunsContext(ctx context.Context, bufs [][]byte, offs []int64) error {
	r.calls.Add(1)
	for i, b := range bufs {
		if _, err := r.ReadAt(b, offs[i]); err != nil {
			return err
		}
	}
	return nil
}

func TestRunReadRunsOneCall(t *testing.T) {
	data := make([]byte, 1000)
	rr := &runsReader{ReaderAt: bytes.NewReader(data)}
	var es []Extent
	for i := range 10 {
		es = append(es, Extent{Off: int64(i * 100), Len: 50, Item: 0, Pos: int64(i * 50)})
	}
	pool, _ := NewPool(2, 500)
	st, err := Run(context.Background(), []Source{{R: rr}}, seq(es), 500, Config{
		Concurrency: 1, MaxChunk: 500, Buffers: pool.Buffers,
		Done: func(c *Chunk, bufs [][]byte) error { pool.PutChunk(bufs); return nil },
	})
	if err != nil {
		t.Fatal(err)
	}
	if rr.calls.Load() != 1 || st.Reads != 1 || st.Chunks != 1 {
		t.Fatalf("%d ReadRuns calls, stats %+v: want one read of ten runs", rr.calls.Load(), st)
	}
}

// TestGuidedChunks: chunks are MaxChunk while much remains, then shrink,
// never below MinChunk but for the last.
func TestGuidedChunks(t *testing.T) {
	const total = 100 << 20
	var sizes []int64
	_, err := Run(context.Background(), []Source{{R: zeros{}}}, seq([]Extent{{Len: total}}), total, Config{
		Concurrency: 4, MaxChunk: 8 << 20, MinChunk: 1 << 20,
		Buffers: func(_ context.Context, c *Chunk) ([][]byte, error) {
			sizes = append(sizes, c.Bytes)
			return [][]byte{make([]byte, c.Bytes)}, nil
		},
		Done: func(*Chunk, [][]byte) error { return nil },
	})
	if err != nil {
		t.Fatal(err)
	}
	if sizes[0] != 8<<20 {
		t.Fatalf("first chunk %d bytes", sizes[0])
	}
	for i := 1; i < len(sizes); i++ {
		if sizes[i] > sizes[i-1] || (i < len(sizes)-1 && sizes[i] < 1<<20) {
			t.Fatalf("chunk sizes %v", sizes)
		}
	}
	if sizes[len(sizes)-2] != 1<<20 {
		t.Fatalf("chunks do not shrink to the minimum: %v", sizes)
	}
}

type zeros struct{}

func (zeros) ReadAt(p []byte, off int64) (int, error) { clear(p); return len(p), nil }

func TestRunShortRead(t *testing.T) {
	src := Source{R: bytes.NewReader(make([]byte, 100)), Name: "short.bin"}
	_, err := Run(context.Background(), []Source{src}, seq([]Extent{{Off: 50, Len: 60}}), 60, Config{
		Concurrency: 2, MaxChunk: 1000,
		Buffers: func(_ context.Context, c *Chunk) ([][]byte, error) { return [][]byte{make([]byte, c.Bytes)}, nil },
		Done:    func(*Chunk, [][]byte) error { t.Error("Done called for a short read"); return nil },
	})
	var re *ReadError
	if !errors.Is(err, ErrShortRead) || !errors.As(err, &re) || re.Source != "short.bin" {
		t.Fatalf("err %v, want ErrShortRead in a ReadError naming the source", err)
	}
}

func TestRunRejects(t *testing.T) {
	src := []Source{{R: zeros{}, Name: "z"}}
	ok := Config{Concurrency: 1, MaxChunk: 10,
		Buffers: func(_ context.Context, c *Chunk) ([][]byte, error) { return [][]byte{make([]byte, c.Bytes)}, nil },
		Done:    func(*Chunk, [][]byte) error { return nil }}
	for name, tc := range map[string]struct {
		es    []Extent
		total int64
		cfg   func(Config) Config
	}{
		"overlap":     {[]Extent{{Off: 0, Len: 10}, {Off: 5, Len: 10}}, 20, nil},
		"unsorted":    {[]Extent{{Off: 20, Len: 10}, {Off: 0, Len: 10}}, 20, nil},
		"more":        {[]Extent{{Off: 0, Len: 10}}, 5, nil},
		"fewer":       {[]Extent{{Off: 0, Len: 10}}, 15, nil},
		"source":      {[]Extent{{Src: 1, Len: 10}}, 10, nil},
		"negative":    {[]Extent{{Off: -1, Len: 10}}, 10, nil},
		"overflow":    {[]Extent{{Off: 1<<63 - 5, Len: 10}}, 10, nil},
		"concurrency": {nil, 0, func(c Config) Config { c.Concurrency = 0; return c }},
		"min":         {nil, 0, func(c Config) Config { c.MinChunk = 11; return c }},
		"buffers":     {[]Extent{{Len: 10}}, 10, func(c Config) Config { c.Buffers = nil; return c }},
		"badbuffers": {[]Extent{{Len: 10}}, 10, func(c Config) Config {
			c.Buffers = func(context.Context, *Chunk) ([][]byte, error) { return [][]byte{make([]byte, 3)}, nil }
			return c
		}},
	} {
		cfg := ok
		if tc.cfg != nil {
			cfg = tc.cfg(cfg)
		}
		if _, err := Run(context.Background(), src, seq(tc.es), tc.total, cfg); !errors.Is(err, ErrConfig) {
			t.Errorf("%s: %v, want ErrConfig", name, err)
		}
	}
}

// TestPoolBoundsMemory: with a pool of n buffers and a consumer that
// holds chunks, no more than n buffers are ever out.
func TestPoolBoundsMemory(t *testing.T) {
	pool, err := NewPool(3, 1000)
	if err != nil {
		t.Fatal(err)
	}
	var out, peak atomic.Int64
	var mu sync.Mutex
	var held [][][]byte
	_, err = Run(context.Background(), []Source{{R: zeros{}}}, seq([]Extent{{Len: 50000}}), 50000, Config{
		Concurrency: 8, MaxChunk: 1000,
		Buffers: func(ctx context.Context, c *Chunk) ([][]byte, error) {
			b, err := pool.Buffers(ctx, c)
			if err == nil {
				n := out.Add(1)
				for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
				}
			}
			return b, err
		},
		Done: func(c *Chunk, bufs [][]byte) error {
			// Hold every other chunk until the next one arrives.
			mu.Lock()
			defer mu.Unlock()
			held = append(held, bufs)
			if len(held) >= 2 {
				for _, h := range held {
					out.Add(-1)
					pool.PutChunk(h)
				}
				held = held[:0]
			}
			return nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if peak.Load() > 3 {
		t.Fatalf("%d buffers out at once from a pool of 3", peak.Load())
	}
}

func TestRunCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	var n atomic.Int64
	_, err := Run(ctx, []Source{{R: zeros{}}}, seq([]Extent{{Len: 1 << 30}}), 1<<30, Config{
		Concurrency: 2, MaxChunk: 1 << 10,
		Buffers: func(_ context.Context, c *Chunk) ([][]byte, error) { return [][]byte{make([]byte, c.Bytes)}, nil },
		Done: func(*Chunk, [][]byte) error {
			if n.Add(1) == 10 {
				cancel()
			}
			return nil
		},
	})
	if !errors.Is(err, context.Canceled) || n.Load() > 100 {
		t.Fatalf("err %v after %d chunks", err, n.Load())
	}
}

func TestRunDoneError(t *testing.T) {
	boom := errors.New("boom")
	_, err := Run(context.Background(), []Source{{R: zeros{}}}, seq([]Extent{{Len: 1 << 20}}), 1<<20, Config{
		Concurrency: 3, MaxChunk: 1 << 10,
		Buffers: func(_ context.Context, c *Chunk) ([][]byte, error) { return [][]byte{make([]byte, c.Bytes)}, nil },
		Done:    func(*Chunk, [][]byte) error { return boom },
	})
	if !errors.Is(err, boom) {
		t.Fatalf("err %v", err)
	}
}

// TestRunStream: with Stream, each chunk goes to a worker that reads it
// itself; every byte of the extents is covered once, at most Concurrency
// chunks at a time, and an error stops the run.
func TestRunStream(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	es, _ := plan(r, []int{50_000, 70_000})
	var mu sync.Mutex
	covered := map[[2]int64]int{}
	var inFlight, most atomic.Int64
	st, err := Run(context.Background(), []Source{{R: zeros{}}, {R: zeros{}}}, seq(es), sum(es), Config{
		Concurrency: 3, MaxChunk: 4000, MaxPieces: 1,
		Stream: func(ctx context.Context, c *Chunk) error {
			n := inFlight.Add(1)
			defer inFlight.Add(-1)
			for {
				m := most.Load()
				if n <= m || most.CompareAndSwap(m, n) {
					break
				}
			}
			if len(c.Pieces) != 1 {
				return fmt.Errorf("chunk of %d pieces", len(c.Pieces))
			}
			p := c.Pieces[0]
			mu.Lock()
			for b := p.Off; b < p.Off+p.Len; b++ {
				covered[[2]int64{int64(p.Src), b}]++
			}
			mu.Unlock()
			return nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if int64(len(covered)) != sum(es) || st.Bytes != sum(es) {
		t.Fatalf("covered %d bytes (stats %d), want %d", len(covered), st.Bytes, sum(es))
	}
	for k, n := range covered {
		if n != 1 {
			t.Fatalf("byte %v streamed %d times", k, n)
		}
	}
	if most.Load() > 3 {
		t.Fatalf("%d chunks at once", most.Load())
	}
	stop := errors.New("stop")
	_, err = Run(context.Background(), []Source{{R: zeros{}}}, seq([]Extent{{Len: 100_000}}), 100_000, Config{
		Concurrency: 2, MaxChunk: 1000,
		Stream: func(ctx context.Context, c *Chunk) error { return stop },
	})
	if !errors.Is(err, stop) {
		t.Fatalf("err %v, want the Stream error", err)
	}
}
