//go:build unix

package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// A directory whose index is a FIFO, or a symbolic link to /dev/zero, is
// not a valid model: validate used to skip the index in silence and pass
// the shards (red-team round 4, C2). It is reported as unreadable (exit
// 2), without blocking on the FIFO; a symlinked shard is validated.
func TestValidateDirWithSpecialIndex(t *testing.T) {
	for _, kind := range []string{"fifo", "devzero"} {
		t.Run(kind, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "model")
			if code, _, errOut := runCLI(t, "split", torchDir+"tiny_transformer.safetensors", dir, "--max-shard-size", "2KB"); code != 0 {
				t.Fatalf("split: exit %d %s", code, errOut)
			}
			index := filepath.Join(dir, "model.safetensors.index.json")
			os.Remove(index)
			var err error
			if kind == "fifo" {
				err = unix.Mkfifo(index, 0o644)
			} else {
				err = os.Symlink("/dev/zero", index)
			}
			if err != nil {
				t.Skip(err)
			}
			code, out, errOut := runCLI(t, "validate", dir)
			if code != 2 || !strings.Contains(out+errOut, "model.safetensors.index.json") {
				t.Fatalf("validate: exit %d, want 2 naming the index\n%s%s", code, out, errOut)
			}
		})
	}
	// a shard that is a symbolic link is followed and checked, not skipped
	dir := t.TempDir()
	if err := os.Symlink(mustAbs(t, torchDir+"tiny_transformer.safetensors"), filepath.Join(dir, "linked.safetensors")); err != nil {
		t.Skip(err)
	}
	code, out, errOut := runCLI(t, "validate", dir)
	if code != 0 || !strings.Contains(out, "linked.safetensors") {
		t.Fatalf("validate of a symlinked file: exit %d\n%s%s", code, out, errOut)
	}
}

func mustAbs(t *testing.T, p string) string {
	t.Helper()
	a, err := filepath.Abs(p)
	if err != nil {
		t.Fatal(err)
	}
	return a
}
