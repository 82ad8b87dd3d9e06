package download

import (
	"context"
	"testing"
	"time"

	"github.com/gosafetensors/safetensors/internal/pacedserver"
)

// TestLinkChunk: ranges sized to the link keep a request's latency at
// most 3% of its time, in whole MiB, between the default and 64 MiB;
// an unmeasured or latency-free link keeps the default.
func TestLinkChunk(t *testing.T) {
	const base = DefaultChunkSize
	for _, c := range []struct {
		lat, rate float64
		want      int64
	}{
		{0, 0, base},
		{0.020, 0, base},
		{0, 40e6, base},
		{200e-6, 100e6, base},       // loopback: 0.65 MB wanted
		{0.001, 400e6, base},        // a LAN: 12.9 MB wanted
		{0.020, 40e6, 25 << 20},     // the paced benchmark: 25.9 MB wanted
		{0.030, 40e6, 38 << 20},     // 38.8 MB: 37.003 MiB
		{0.100, 100e6, 64 << 20},    // 323 MB wanted: the bound
		{10, 1e9, 64 << 20},         // far beyond it
		{0.020, 1e12, 64 << 20},     // no overflow
		{1e-9, 1, base},             // nothing wanted
		{0.0405, 40e6, 50 << 20},    // 52.4 MB wanted, 50 MiB = 52.43 MB
		{0.05, 10e6, base},          // 16.2 MB: under 16 MiB (16.8 MB)
		{0.052, 10e6, base + 1<<20}, // 16.8 MB: just over
	} {
		if got := linkChunk(base, c.lat, c.rate); got != c.want {
			t.Errorf("linkChunk(%v s, %v B/s) = %d MiB + %d, want %d MiB + %d", c.lat, c.rate, got>>20, got&(1<<20-1), c.want>>20, c.want&(1<<20-1))
		}
	}
	for lat := 1e-4; lat < 1; lat *= 1.7 {
		for rate := 1e5; rate < 1e10; rate *= 2.3 {
			c := linkChunk(base, lat, rate)
			if c < base || c > maxLinkChunk || c%(1<<20) != 0 {
				t.Fatalf("linkChunk(%v, %v) = %d: outside [16 MiB, 64 MiB] or not whole MiB", lat, rate, c)
			}
			if share := lat / (lat + float64(c)/rate); c < maxLinkChunk && share > latencyShare+1e-9 {
				t.Fatalf("linkChunk(%v, %v) = %d: latency %.4f of a request's time", lat, rate, c, share)
			}
			if c > base && c < maxLinkChunk {
				if smaller := c - 1<<20; lat/(lat+float64(smaller)/rate) <= latencyShare {
					t.Fatalf("linkChunk(%v, %v) = %d: a MiB less would do", lat, rate, c)
				}
			}
		}
	}
	if got := linkChunk(128<<20, 0.1, 100e6); got != 128<<20 {
		t.Fatalf("a base above the bound: %d, want the base", got)
	}
}

// TestSizerObserve: the sizer follows the requests it is told of: the
// least latency, the latest rates; a short body tells the latency only.
func TestSizerObserve(t *testing.T) {
	s := newSizer(DefaultChunkSize)
	if got := s.chunk.Load(); got != DefaultChunkSize {
		t.Fatalf("unmeasured: %d", got)
	}
	s.observe(20*time.Millisecond, 1<<10, 100*time.Millisecond) // latency only
	if got := s.chunk.Load(); got != DefaultChunkSize {
		t.Fatalf("no rate yet: %d", got)
	}
	s.observe(20*time.Millisecond, 16<<20, 419430*time.Microsecond) // 40 MB/s
	if got := s.chunk.Load(); got != 25<<20 {
		t.Fatalf("20 ms at 40 MB/s: %d MiB, want 25", got>>20)
	}
	s.observe(60*time.Millisecond, 16<<20, 419430*time.Microsecond) // queueing: not the link's
	if got := s.chunk.Load(); got != 25<<20 {
		t.Fatalf("a request waiting 60 ms: %d MiB, want 25 (the least latency seen)", got>>20)
	}
	for range 40 { // the link becomes a loopback
		s.observe(100*time.Microsecond, 16<<20, 160*time.Millisecond)
	}
	if got := s.chunk.Load(); got != DefaultChunkSize {
		t.Fatalf("loopback: %d MiB, want 16", got>>20)
	}
}

// TestRangeSize: the end's shrinking, ceil(unplanned/n) within [c/8, c].
func TestRangeSize(t *testing.T) {
	const M = 1 << 20
	for _, c := range []struct {
		c, unplanned int64
		n            int
		want         int64
	}{
		{16 * M, 1 << 30, 16, 16 * M},
		{16 * M, 128 * M, 16, 8 * M},
		{16 * M, 16 * M, 16, 2 * M},
		{16 * M, 100, 16, 2 * M},
		{32 * M, 256 * M, 16, 16 * M},
		{32 * M, 16 * M, 16, 4 * M},
		{16 * M, 100*M + 1, 16, 100*M/16 + 1},
		{64 << 10, 1, 1, 8 << 10},
		{8, 1, 1, 1},
	} {
		if got := rangeSize(c.c, c.unplanned, c.n); got != c.want {
			t.Errorf("rangeSize(%d, %d, %d) = %d, want %d", c.c, c.unplanned, c.n, got, c.want)
		}
	}
}

// TestLinkChunkPaced: on a link with 20 ms per request, ranges sized to
// it take fewer requests than ranges of a fixed chunk, and the files
// check. (The default chunk is made 256 KiB so that a small model shows
// it: the link asks for about 10 MiB.)
func TestLinkChunkPaced(t *testing.T) {
	if testing.Short() {
		t.Skip("paced: about 2 s")
	}
	spec := pacedserver.ModelSpec{Hidden: 512, Intermediate: 1024, Layers: 2, Vocab: 4096, Shards: 1}
	files, err := spec.Model()
	if err != nil {
		t.Fatal(err)
	}
	h := startHub(t, files, pacedserver.Config{Rate: 16e6, Latency: 20 * time.Millisecond})
	base := func(c *config) error { c.chunk = 256 << 10; return nil }
	run := func(opts ...Option) *Result {
		t.Helper()
		res, err := Download(context.Background(), "hf://"+testRepo, append([]Option{WithHub(h.hub(t, 2)), WithCacheDir(t.TempDir()), WithConcurrency(2)}, opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	fixed := run(WithChunkSize(256 << 10))
	sized := run(base)
	t.Logf("%d bytes: fixed 256 KiB chunks %d requests in %v, sized to the link %d requests in %v", fixed.Moved, fixed.Requests, fixed.Duration, sized.Requests, sized.Duration)
	if sized.Moved != fixed.Moved || sized.Requests*3 > fixed.Requests {
		t.Fatalf("sized to the link: %d requests for %d bytes, against %d fixed: want under a third", sized.Requests, sized.Moved, fixed.Requests)
	}
}
