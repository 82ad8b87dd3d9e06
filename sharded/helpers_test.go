package sharded

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/gosafetensors/safetensors"
)

// tensorsOf makes U8 tensors named names, tensor i holding sizes[i] bytes
// derived from its name, so that any mix-up shows.
func tensorsOf(names []string, sizes []int) []safetensors.TensorData {
	out := make([]safetensors.TensorData, len(names))
	for i, n := range names {
		b := make([]byte, sizes[i])
		for j := range b {
			b[j] = byte(len(n)*31 + j*7 + int(n[len(n)-1]))
		}
		out[i] = safetensors.TensorData{Name: n, DType: safetensors.U8, Shape: []int64{int64(sizes[i])}, Data: b}
	}
	return out
}

func writeShard(t testing.TB, path string, meta map[string]string, names ...string) {
	t.Helper()
	sizes := make([]int, len(names))
	for i := range sizes {
		sizes[i] = 8 + i
	}
	if err := safetensors.WriteFile(path, tensorsOf(names, sizes), meta); err != nil {
		t.Fatal(err)
	}
}

// writeIndexJSON writes an index mapping tensor -> shard, as given.
func writeIndexJSON(t testing.TB, path string, wmap map[string]string) {
	t.Helper()
	var parts []string
	for k, v := range wmap {
		parts = append(parts, fmt.Sprintf("%q: %q", k, v))
	}
	sort.Strings(parts)
	body := `{"metadata": {"total_size": 0}, "weight_map": {` + strings.Join(parts, ", ") + "}}\n"
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}

// twoShardDir writes a valid two-shard model into a new directory.
func twoShardDir(t testing.TB) string {
	dir := t.TempDir()
	meta := map[string]string{"format": "pt"}
	writeShard(t, filepath.Join(dir, "model-00001-of-00002.safetensors"), meta, "a.weight", "b.weight")
	writeShard(t, filepath.Join(dir, "model-00002-of-00002.safetensors"), meta, "c.weight")
	writeIndexJSON(t, filepath.Join(dir, IndexName), map[string]string{
		"a.weight": "model-00001-of-00002.safetensors",
		"b.weight": "model-00001-of-00002.safetensors",
		"c.weight": "model-00002-of-00002.safetensors",
	})
	return dir
}

// listDir returns the names in dir, sorted, temporary files included.
func listDir(t testing.TB, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	slices.Sort(out)
	return out
}

// countingOpener counts OpenShard calls and opens from a DirOpener.
type countingOpener struct {
	d     *DirOpener
	calls atomic.Int32
}

func (c *countingOpener) OpenShard(ctx context.Context, name string) (safetensors.Source, error) {
	c.calls.Add(1)
	return c.d.OpenShard(ctx, name)
}

var errInjected = errors.New("injected disk failure")

// failingFile reads like the file it wraps until failAt, then fails with
// errInjected, like a disk with a bad sector.
type failingFile struct {
	f      *os.File
	failAt int64
}

func (r *failingFile) ReadAt(p []byte, off int64) (int, error) {
	if off+int64(len(p)) > r.failAt {
		n := max(r.failAt-off, 0)
		if n > 0 {
			m, _ := r.f.ReadAt(p[:n], off)
			return m, errInjected
		}
		return 0, errInjected
	}
	return r.f.ReadAt(p, off)
}

func (r *failingFile) Close() error { return r.f.Close() }

// failingOpener opens shards from dir; the shard named bad fails at byte
// failAt of its file (failAt 0: the header cannot be read).
func failingOpener(dir, bad string, failAt int64) ReaderAtOpener {
	return func(ctx context.Context, name string) (io.ReaderAt, int64, error) {
		f, err := os.Open(filepath.Join(dir, name))
		if err != nil {
			return nil, 0, err
		}
		st, err := f.Stat()
		if err != nil {
			f.Close()
			return nil, 0, err
		}
		if name != bad {
			return f, st.Size(), nil
		}
		return &failingFile{f: f, failAt: failAt}, st.Size(), nil
	}
}
