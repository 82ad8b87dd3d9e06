package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gosafetensors/safetensors/sharded"
)

// snapshot returns every file of dir and its bytes.
func snapshot(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		out[e.Name()] = b
	}
	return out
}

// TestOutputNeverAnInput: every command that writes refuses, even with
// --force, an output that is any file it reads — the index of a sharded
// model too (F3 of redteam2: split IDX DIR -f replaced the index), and a
// compressed shard — exit 2, leaving the inputs as they were.
func TestOutputNeverAnInput(t *testing.T) {
	src := torchDir + "tiny_transformer.materialized.safetensors"
	plain := filepath.Join(t.TempDir(), "m")
	if code, _, errs := runCLI(t, "split", src, plain, "--max-shard-size", "1KiB"); code != 0 {
		t.Fatalf("split: %d %s", code, errs)
	}
	// The same model with compressed shards, under the shards' names.
	comp := filepath.Join(t.TempDir(), "c")
	os.Mkdir(comp, 0o777)
	for name, b := range snapshot(t, plain) {
		p := filepath.Join(comp, name)
		if !strings.HasSuffix(name, ".safetensors") {
			os.WriteFile(p, b, 0o666)
			continue
		}
		os.WriteFile(p+".tmp", b, 0o666)
		if code, _, errs := runCLI(t, "compress", p+".tmp", p); code != 0 {
			t.Fatalf("compress: %d %s", code, errs)
		}
		os.Remove(p + ".tmp")
	}
	for _, dir := range []string{plain, comp} {
		idx := filepath.Join(dir, sharded.IndexName)
		for _, args := range [][]string{
			{"split", idx, dir, "--max-shard-size", "1KiB", "-f"},
			{"split", dir, dir, "--max-shard-size", "1KiB", "-f"},
			{"split", idx, dir, "--max-shard-size", "2KiB", "-f"},
			{"merge", idx, idx, "-f"},
			{"merge", dir, idx, "-f"},
		} {
			before := snapshot(t, dir)
			code, out, errs := runCLI(t, args...)
			if code != 2 || !strings.Contains(errs, "output is one of the inputs") {
				t.Errorf("%q: exit %d, want 2 (output is an input)\n%s%s", args, code, out, errs)
			}
			after := snapshot(t, dir)
			if len(after) != len(before) {
				t.Errorf("%q: files %d -> %d", args, len(before), len(after))
			}
			for name, b := range before {
				if !bytes.Equal(after[name], b) {
					t.Errorf("%q: %s changed", args, name)
				}
			}
		}
	}
}
