//go:build linux

package load_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gosafetensors/safetensors/internal/pagecache"
	"github.com/gosafetensors/safetensors/load"
)

// coldModel writes the small model and drops its pages from the cache.
func coldModel(t *testing.T) (string, []string) {
	dir := writeModel(t, small)
	names, _ := filepath.Glob(filepath.Join(dir, "*.safetensors"))
	drop(t, names)
	if r := residency(t, names); r > 0.01 {
		t.Skipf("the page cache keeps %.0f%% of the files after POSIX_FADV_DONTNEED", 100*r)
	}
	return dir, names
}

func drop(t *testing.T, names []string) {
	t.Helper()
	if err := pagecache.Drop(names...); err != nil {
		t.Fatal(err)
	}
}

// residency is the fraction of the files' pages in the page cache.
func residency(t *testing.T, names []string) float64 {
	t.Helper()
	r, err := pagecache.Resident(names...)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestLoadColdDirect: a cold file is read with O_DIRECT (its pages stay
// out of the cache), a warm one through the cache, WithBufferedIO always
// through the cache; the bytes are the same every time, and tensor-parallel
// parts too.
func TestLoadColdDirect(t *testing.T) {
	dir, names := coldModel(t)
	ref := reference(t, dir) // reads through the cache: drop again
	drop(t, names)
	for _, tc := range []struct {
		name     string
		opts     []load.Option
		resident bool
	}{
		{"direct", nil, false},
		{"direct-tp", []load.Option{load.WithTensorParallel(1, 2)}, false},
		{"chunks-of-3-MiB", []load.Option{load.WithChunkSize(3 << 20), load.WithConcurrency(3)}, false},
		{"buffered", []load.Option{load.WithBufferedIO()}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			drop(t, names)
			l, err := load.Open(context.Background(), dir, tc.opts...)
			if err != nil {
				t.Fatal(err)
			}
			got, _ := collect(t, l)
			l.Close()
			for _, g := range got {
				expectPart(t, ref, g)
			}
			if len(got) != len(ref) {
				t.Fatalf("%d tensors", len(got))
			}
			r := residency(t, names)
			if tc.resident != (r > 0.5) {
				t.Fatalf("%.0f%% of the pages cached after the load", 100*r)
			}
		})
	}
	// Warm: read from the cache, not the disk (the pages stay).
	l, err := load.Open(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if _, err := l.Discard(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func TestLoadColdTruncated(t *testing.T) {
	dir, names := coldModel(t)
	l, err := load.Open(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	shard := filepath.Join(dir, "model-00002-of-00003.safetensors")
	st, _ := os.Stat(shard)
	if err := os.Truncate(shard, st.Size()-5000); err != nil {
		t.Fatal(err)
	}
	drop(t, names)
	_, err = l.Load(context.Background(), func(*load.Tensor) error { return nil })
	if err == nil || !strings.Contains(err.Error(), "short read") || !strings.Contains(err.Error(), shard) {
		t.Fatalf("err %v, want a short read naming %s", err, shard)
	}
}
