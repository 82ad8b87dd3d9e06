package load_test

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/gosafetensors/safetensors"
	"github.com/gosafetensors/safetensors/internal/pacedserver"
	"github.com/gosafetensors/safetensors/load"
	"github.com/gosafetensors/safetensors/source"
)

// small is a Llama-shaped model of a few MB whose rows are long enough
// (1 KiB and more) that a column split's runs are never coalesced.
var small = pacedserver.ModelSpec{Hidden: 512, Intermediate: 1024, Layers: 2, Vocab: 1000, Shards: 3}

// writeModel writes the spec's files into a new directory.
func writeModel(t testing.TB, spec pacedserver.ModelSpec) string {
	t.Helper()
	files, err := spec.Model()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for name, f := range files {
		out, err := os.Create(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.Copy(out, io.NewSectionReader(f.Content, 0, f.Size)); err != nil {
			t.Fatal(err)
		}
		if err := out.Close(); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// serve serves the spec's files with cfg; it returns the server and the
// index (or single file) URL.
func serve(t testing.TB, spec pacedserver.ModelSpec, cfg pacedserver.Config) (*pacedserver.Server, string, map[string]pacedserver.File) {
	t.Helper()
	files, err := spec.Model()
	if err != nil {
		t.Fatal(err)
	}
	s, err := pacedserver.Start(cfg, files)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	u := s.URL + "/model.safetensors"
	if spec.Shards > 1 {
		u += ".index.json"
	}
	return s, u, files
}

// reference returns every tensor of the model at loc, read plainly.
func reference(t testing.TB, loc string) map[string]*safetensors.Tensor {
	t.Helper()
	m, err := source.OpenModel(context.Background(), loc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	out := map[string]*safetensors.Tensor{}
	for _, name := range m.Names() {
		tt, err := m.Tensor(name)
		if err != nil {
			t.Fatal(err)
		}
		b, err := tt.Copy()
		if err != nil {
			t.Fatal(err)
		}
		out[name] = safetensors.NewTensorBytes(tt.TensorInfo, b, name)
	}
	return out
}

// collect loads everything l delivers, checking each name comes once.
func collect(t testing.TB, l *load.Loader) (map[string]*load.Tensor, load.Stats) {
	t.Helper()
	var mu sync.Mutex
	got := map[string]*load.Tensor{}
	st, err := l.Load(context.Background(), func(tt *load.Tensor) error {
		mu.Lock()
		defer mu.Unlock()
		if _, dup := got[tt.Name]; dup {
			t.Errorf("tensor %q delivered twice", tt.Name)
		}
		got[tt.Name] = tt
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return got, st
}

// expectPart checks a loaded part against the reference tensor sliced as
// the part says.
func expectPart(t testing.TB, ref map[string]*safetensors.Tensor, got *load.Tensor) {
	t.Helper()
	full, ok := ref[got.Name]
	if !ok {
		t.Fatalf("unexpected tensor %q", got.Name)
	}
	want := full
	if idx := got.Selectors(); idx != nil {
		var err error
		if want, err = full.Slice(idx...); err != nil {
			t.Fatalf("%s: Slice(%v): %v", got.Name, idx, err)
		}
	}
	wb, err := want.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(wb, got.Data) {
		t.Fatalf("%s (split %v %d:%d): %d bytes differ from the reference's %d", got.Name, got.Split, got.Start, got.Stop, len(got.Data), len(wb))
	}
	if !slicesEqual(want.Shape, got.Shape) {
		t.Fatalf("%s: shape %v, want %v", got.Name, got.Shape, want.Shape)
	}
}

func slicesEqual(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
