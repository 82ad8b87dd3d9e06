package source

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"testing"
)

// FuzzModel feeds arbitrary bytes through format detection and every
// reader the opener may choose (safetensors, index, checkpoint, compressed):
// no panic, and whatever opens reads every tensor or fails with an error.
func FuzzModel(f *testing.F) {
	for _, pattern := range []string{"../testdata/torch/tiny_transformer*", "../testdata/safetensors/files/*.safetensors", "../testdata/malicious/*.pkl", "../testdata/crafted/*"} {
		files, _ := filepath.Glob(pattern)
		for i, p := range files {
			if i >= 6 {
				break
			}
			if b, err := os.ReadFile(p); err == nil && len(b) < 1<<20 {
				f.Add(b)
			}
		}
	}
	f.Add([]byte(`{"metadata": {"total_size": 8}, "weight_map": {"a": "x.safetensors"}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		o, err := newObject("fuzz", bytes.NewReader(b), int64(len(b)), io.NopCloser(nil))
		if err != nil {
			t.Fatalf("an in-memory object failed to open: %v", err)
		}
		m, err := o.Model(context.Background())
		if err != nil {
			return
		}
		defer m.Close()
		for tt, err := range m.All() {
			if err != nil {
				return
			}
			if tt.Size() > 1<<24 {
				continue
			}
			tt.Copy()
		}
	})
}
