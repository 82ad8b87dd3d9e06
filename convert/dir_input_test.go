package convert

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestDirOutputIsAnotherInput: an output of a directory's conversion that
// is another of its inputs (a shard the index names under the name another
// shard converts to) is refused before anything is written, even with
// overwriting, and every input stays as it was.
func TestDirOutputIsAnotherInput(t *testing.T) {
	src := "../testdata/torch/sharded_bin"
	dir := t.TempDir()
	ents, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	// Shard 2 goes by the name shard 1 converts to.
	const from, to = "pytorch_model-00002-of-00005.bin", "model-00001-of-00005.safetensors"
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		name := e.Name()
		if name == from {
			name = to
		}
		if name == "pytorch_model.bin.index.json" {
			b = bytes.ReplaceAll(b, []byte(from), []byte(to))
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o666); err != nil {
			t.Fatal(err)
		}
	}
	before, _ := os.ReadFile(filepath.Join(dir, to))
	_, err = Dir(context.Background(), dir, dir, WithOverwrite(true))
	if !errors.Is(err, ErrOutputIsInput) || !strings.Contains(err.Error(), to) {
		t.Fatalf("err = %v, want ErrOutputIsInput naming %s", err, to)
	}
	after, _ := os.ReadFile(filepath.Join(dir, to))
	if !bytes.Equal(before, after) {
		t.Fatalf("the input %s was replaced", to)
	}
	if _, err := os.Stat(filepath.Join(dir, "model-00003-of-00005.safetensors")); err == nil {
		t.Fatal("an output was written")
	}
}
