package rangeread

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"sync"
	"testing"
)

// memBackend serves data, counting requests and bytes; multi, when set,
// fetches up to multi spans per request.
type memBackend struct {
	data     []byte
	multi    int
	mu       sync.Mutex
	requests int
	bytes    int64
	spans    [][2]int64
	fail     error
}

func (m *memBackend) Fetch(ctx context.Context, s Span) error {
	m.mu.Lock()
	m.requests++
	m.bytes += s.Len()
	m.spans = append(m.spans, [2]int64{s.Off, s.End})
	err := m.fail
	m.mu.Unlock()
	if err != nil {
		return err
	}
	if s.Off < 0 || s.End > int64(len(m.data)) || s.Off >= s.End {
		return errors.New("span outside the object")
	}
	return Fill(bytes.NewReader(m.data[s.Off:s.End]), s)
}

type multiBackend struct{ *memBackend }

func (m multiBackend) FetchMulti(ctx context.Context, spans []Span) ([]Span, error) {
	for len(spans) > 0 {
		k := min(m.multi, len(spans))
		m.mu.Lock()
		m.requests++
		m.mu.Unlock()
		for _, s := range spans[:k] {
			m.mu.Lock()
			m.bytes += s.Len()
			m.mu.Unlock()
			if err := Fill(bytes.NewReader(m.data[s.Off:s.End]), s); err != nil {
				return nil, err
			}
		}
		spans = spans[k:]
	}
	return nil, nil
}

func randData(n int, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, 2))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

func newTestReader(data []byte, prefix int, cfg Config) (*Reader, *memBackend) {
	be := &memBackend{data: data}
	cfg.Size = int64(len(data))
	cfg.Prefix = data[:min(prefix, len(data))]
	return New(be, cfg), be
}

// TestReadAtRandom compares random reads, in every configuration, with the
// object's bytes, across the prefix, the cache and the end.
func TestReadAtRandom(t *testing.T) {
	data := randData(1<<20, 1)
	for _, cfg := range []Config{
		{},
		{ReadAhead: 256 << 10, Cache: 1 << 20, Tail: 64 << 10},
		{ReadAhead: 4 << 10, Cache: 10 << 10, Tail: 1 << 20},
	} {
		r, _ := newTestReader(data, 1000, cfg)
		rng := rand.New(rand.NewPCG(3, 4))
		for i := 0; i < 3000; i++ {
			off := rng.Int64N(int64(len(data)) + 10)
			n := rng.IntN(70_000)
			if rng.IntN(4) == 0 {
				n = rng.IntN(100)
			}
			p := make([]byte, n)
			got, err := r.ReadAt(context.Background(), p, off)
			wantN := max(0, min(n, len(data)-int(min(off, int64(len(data))))))
			if got != wantN || !bytes.Equal(p[:got], data[min(off, int64(len(data))):min(off, int64(len(data)))+int64(got)]) {
				t.Fatalf("cfg %+v: read %d at %d: got %d bytes (%v), want %d", cfg, n, off, got, err, wantN)
			}
			if (wantN < n) != (err == io.EOF) && n > 0 {
				t.Fatalf("read %d at %d: err %v", n, off, err)
			}
		}
		if r.cache.used > max(cfg.Cache, 0) {
			t.Fatalf("cache holds %d bytes, budget %d", r.cache.used, cfg.Cache)
		}
	}
}

// TestSequentialReadAhead: a stream of 4 KiB reads over 8 MiB costs a
// number of requests logarithmic in the window, then one per ReadAhead.
func TestSequentialReadAhead(t *testing.T) {
	data := randData(8<<20, 5)
	r, be := newTestReader(data, 100_000, Config{ReadAhead: 1 << 20, Cache: 4 << 20})
	p := make([]byte, 4096)
	for off := int64(50_000); off < int64(len(data)); off += int64(len(p)) {
		n, err := r.ReadAt(context.Background(), p, off)
		if !bytes.Equal(p[:n], data[off:off+int64(n)]) || (err != nil && err != io.EOF) {
			t.Fatalf("at %d: %v", off, err)
		}
	}
	// 64K, 128K, 256K, 512K, then 1 MiB windows: about 12 requests.
	if be.requests > 14 || be.bytes > int64(len(data)) {
		t.Fatalf("%d requests, %d bytes for a sequential read of %d bytes", be.requests, be.bytes, len(data))
	}
	t.Logf("%d requests, %d bytes", be.requests, be.bytes)
}

// TestRandomReadsNoReadAhead: scattered reads fetch what they ask for.
func TestRandomReadsNoReadAhead(t *testing.T) {
	data := randData(4<<20, 6)
	r, be := newTestReader(data, 1000, Config{ReadAhead: 1 << 20, Cache: 4 << 20})
	p := make([]byte, 100)
	for i := int64(1); i <= 20; i++ {
		if _, err := r.ReadAt(context.Background(), p, i*150_000); err != nil {
			t.Fatal(err)
		}
	}
	if be.requests != 20 || be.bytes != 2000 {
		t.Fatalf("%d requests, %d bytes", be.requests, be.bytes)
	}
}

// TestTailPrefetch: a zip reader's reads of the end records and of a
// central directory inside the tail cost one request.
func TestTailPrefetch(t *testing.T) {
	data := randData(10<<20, 7)
	size := int64(len(data))
	r, be := newTestReader(data, 100_000, Config{Tail: 256 << 10, Cache: 1 << 20})
	for _, rd := range [][2]int64{{size - 65557, 65557}, {size - 42, 20}, {size - 98, 56}, {size - 200_000, 130_000}, {size - 22, 22}} {
		p := make([]byte, rd[1])
		if _, err := r.ReadAt(context.Background(), p, rd[0]); err != nil || !bytes.Equal(p, data[rd[0]:rd[0]+rd[1]]) {
			t.Fatalf("%v: %v", rd, err)
		}
	}
	if be.requests != 1 || be.bytes != 256<<10 {
		t.Fatalf("%d requests, %d bytes: %v", be.requests, be.bytes, be.spans)
	}
}

// TestReadRuns: runs are served from the prefix and the cache, coalesced,
// and batched where the backend can.
func TestReadRuns(t *testing.T) {
	data := randData(1<<20, 8)
	check := func(r *Reader, offs []int64, n int) {
		t.Helper()
		bufs := make([][]byte, len(offs))
		for i := range bufs {
			bufs[i] = make([]byte, n)
		}
		if err := r.ReadRuns(context.Background(), bufs, offs); err != nil {
			t.Fatal(err)
		}
		for i, b := range bufs {
			if !bytes.Equal(b, data[offs[i]:offs[i]+int64(n)]) {
				t.Fatalf("run %d at %d differs", i, offs[i])
			}
		}
	}
	var offs []int64
	for i := int64(0); i < 1000; i++ {
		offs = append(offs, 500+i*1000)
	}
	r, be := newTestReader(data, 10_000, Config{Concurrency: 4})
	check(r, offs, 100)
	if be.requests != 990 { // 10 runs inside the prefix
		t.Fatalf("%d requests", be.requests)
	}
	r, be = newTestReader(data, 10_000, Config{Concurrency: 4, Gap: 1000})
	check(r, offs, 100)
	if be.requests != 1 {
		t.Fatalf("gap: %d requests", be.requests)
	}
	mb := &memBackend{data: data, multi: 100}
	r = New(multiBackend{mb}, Config{Size: int64(len(data)), Prefix: data[:10_000], Concurrency: 4})
	check(r, offs, 100)
	if mb.requests != 10 || mb.bytes != 990*100 {
		t.Fatalf("multi: %d requests, %d bytes", mb.requests, mb.bytes)
	}
	if err := r.ReadRuns(context.Background(), [][]byte{make([]byte, 10)}, []int64{int64(len(data)) - 5}); err == nil {
		t.Fatal("run past the end accepted")
	}
}

// TestFetchError: a failed request fails the read and caches nothing.
func TestFetchError(t *testing.T) {
	data := randData(1<<20, 9)
	r, be := newTestReader(data, 1000, Config{ReadAhead: 1 << 20, Cache: 1 << 20, Tail: 1 << 10})
	be.fail = errors.New("boom")
	p := make([]byte, 100)
	if _, err := r.ReadAt(context.Background(), p, 5000); err == nil {
		t.Fatal("no error")
	}
	be.fail = nil
	if _, err := r.ReadAt(context.Background(), p, 5000); err != nil || !bytes.Equal(p, data[5000:5100]) {
		t.Fatal(err)
	}
}

// TestCache checks the cache against a map of cached bytes under random
// puts and gets, and its budget.
func TestCache(t *testing.T) {
	c := cache{budget: 50_000}
	data := randData(200_000, 10)
	rng := rand.New(rand.NewPCG(11, 12))
	for i := 0; i < 5000; i++ {
		off := rng.Int64N(190_000)
		n := rng.Int64N(5000) + 1
		if rng.IntN(2) == 0 {
			b := append([]byte(nil), data[off:off+n]...)
			c.put(b, off, rng.IntN(2) == 0)
		} else {
			p := make([]byte, n)
			k := c.get(p, off)
			if !bytes.Equal(p[:k], data[off:off+int64(k)]) || int64(k) != c.covered(off, n) {
				t.Fatalf("get %d at %d: %d bytes, covered says %d", n, off, k, c.covered(off, n))
			}
			q := make([]byte, n)
			k = c.getBack(q, off+n)
			if !bytes.Equal(q[n-int64(k):], data[off+n-int64(k):off+n]) {
				t.Fatalf("getBack %d ending at %d: %d bytes differ", n, off+n, k)
			}
			if k > 0 && c.find(off+n-1) < 0 || int64(k) < n && c.find(off+n-int64(k)-1) >= 0 {
				t.Fatalf("getBack %d ending at %d: stopped after %d bytes", n, off+n, k)
			}
		}
		if c.used > c.budget {
			t.Fatalf("used %d over budget", c.used)
		}
		for j := 1; j < len(c.ext); j++ {
			if c.ext[j-1].end() > c.ext[j].off {
				t.Fatalf("extents overlap: %d+%d > %d", c.ext[j-1].off, len(c.ext[j-1].b), c.ext[j].off)
			}
		}
	}
}

// TestPrefetch: many small ranges announced at once cost a few batched
// requests, and reading them afterwards none.
func TestPrefetch(t *testing.T) {
	data := randData(4<<20, 13)
	mb := &memBackend{data: data, multi: 1000}
	r := New(multiBackend{mb}, Config{Size: int64(len(data)), Prefix: data[:1000], Concurrency: 4, MultiGap: 256, Cache: 8 << 20})
	var offs, lens []int64
	for i := int64(0); i < 10_000; i++ {
		offs = append(offs, 500+i*400)
		lens = append(lens, 46)
	}
	offs = append(offs, 501, int64(len(data))-10) // an overlap, one clipped at the end
	lens = append(lens, 100, 100)
	if err := r.Prefetch(context.Background(), offs, lens); err != nil {
		t.Fatal(err)
	}
	if mb.requests != 10 {
		t.Fatalf("prefetch: %d requests", mb.requests)
	}
	p := make([]byte, 46)
	for _, off := range offs[:10_000] {
		if _, err := r.ReadAt(context.Background(), p, off); err != nil || !bytes.Equal(p, data[off:off+46]) {
			t.Fatalf("at %d: %v", off, err)
		}
	}
	if mb.requests != 10 {
		t.Fatalf("reads after the prefetch: %d requests", mb.requests-10)
	}
	Prefetch(bytes.NewReader(data), offs, lens) // not a Prefetcher: nothing
}
