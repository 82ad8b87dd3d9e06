package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gosafetensors/safetensors"
	"github.com/gosafetensors/safetensors/sharded"
	"github.com/spf13/cobra"
)

func TestSplitMergeCLI(t *testing.T) {
	in := torchDir + "tiny_transformer.materialized.safetensors" // metadata in canonical order
	out := filepath.Join(t.TempDir(), "shards")
	code, stdout, stderr := runCLI(t, "split", in, out, "--max-shard-size", "1KiB")
	if code != 0 {
		t.Fatalf("split: exit %d: %s", code, stderr)
	}
	if !strings.Contains(stdout, sharded.IndexName) || !strings.Contains(stdout, "-of-") {
		t.Errorf("split printed %q", stdout)
	}
	if code, _, stderr := runCLI(t, "split", in, out, "--max-shard-size", "1KiB"); code != 2 || !strings.Contains(stderr, "--force") {
		t.Errorf("split over existing output: exit %d, %s", code, stderr)
	}
	if code, _, stderr := runCLI(t, "split", in, out, "--max-shard-size", "1KiB", "-f"); code != 0 {
		t.Errorf("split -f: exit %d, %s", code, stderr)
	}
	merged := filepath.Join(t.TempDir(), "merged.safetensors")
	if code, _, stderr := runCLI(t, "merge", out, merged); code != 0 {
		t.Fatalf("merge: exit %d: %s", code, stderr)
	}
	want, _ := os.ReadFile(in)
	got, _ := os.ReadFile(merged)
	if !bytes.Equal(got, want) {
		t.Error("split then merge did not reproduce the input byte for byte")
	}
	if code, _, _ := runCLI(t, "merge", filepath.Join(out, sharded.IndexName), merged); code != 2 {
		t.Errorf("merge over existing output: exit %d", code)
	}
}

func TestSplitMergeCLIErrors(t *testing.T) {
	dir := t.TempDir()
	if code, _, stderr := runCLI(t, "split", torchDir+"tiny_transformer.safetensors", dir, "--max-shard-size", "5XB"); code != 2 || !strings.Contains(stderr, "max-shard-size") {
		t.Errorf("bad size: exit %d, %s", code, stderr)
	}
	bad := filepath.Join(dir, "bad")
	os.Mkdir(bad, 0o755)
	os.WriteFile(filepath.Join(bad, sharded.IndexName), []byte(`{"weight_map": {"a": "../x.safetensors"}}`), 0o644)
	if code, _, stderr := runCLI(t, "merge", bad, filepath.Join(dir, "o.safetensors")); code != 1 || !strings.Contains(stderr, "../x.safetensors") {
		t.Errorf("unsafe index: exit %d, %s", code, stderr)
	}
	link := filepath.Join(dir, "link")
	os.Mkdir(link, 0o755)
	if code, _, stderr := runCLI(t, "split", torchDir+"tiny_transformer.materialized.safetensors", filepath.Join(dir, "outside"), "--max-shard-size", "1KiB"); code != 0 {
		t.Fatal(stderr)
	}
	shards, _ := filepath.Glob(filepath.Join(dir, "outside", "model-*.safetensors"))
	for _, s := range shards {
		os.Symlink(s, filepath.Join(link, filepath.Base(s)))
	}
	os.Rename(filepath.Join(dir, "outside", sharded.IndexName), filepath.Join(link, sharded.IndexName))
	if code, _, stderr := runCLI(t, "merge", link, filepath.Join(dir, "o.safetensors")); code != 1 || !strings.Contains(stderr, "outside") {
		t.Errorf("symlink out of the directory: exit %d, %s", code, stderr)
	}
	if code, _, _ := runCLI(t, "merge", filepath.Join(dir, "missing"), filepath.Join(dir, "o.safetensors")); code != 2 {
		t.Errorf("missing input: exit %d", code)
	}
	if _, err := os.Stat(filepath.Join(dir, "o.safetensors")); err == nil {
		t.Error("output written despite errors")
	}
}

var errDisk = errors.New("injected: input/output error")

// brokenDisk serves a file whose bytes after failAt cannot be read.
type brokenDisk struct {
	r      io.ReaderAt
	failAt int64
}

func (b brokenDisk) ReadAt(p []byte, off int64) (int, error) {
	if off+int64(len(p)) > b.failAt {
		return 0, errDisk
	}
	return b.r.ReadAt(p, off)
}

// A read error from the disk, injected through the sharded Opener, makes
// merge exit 2 (could not check), not 1 (invalid input).
func TestMergeReadErrorExits2(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "shards")
	if code, _, stderr := runCLI(t, "split", torchDir+"tiny_transformer.safetensors", dir, "--max-shard-size", "1KiB"); code != 0 {
		t.Fatalf("split: %s", stderr)
	}
	saved := openModel
	defer func() { openModel = saved }()
	openModel = func(cmd *cobra.Command, location string) (safetensors.Source, error) {
		ctx := cmdContext(cmd)
		idx, err := sharded.ReadIndex(filepath.Join(location, sharded.IndexName))
		if err != nil {
			return nil, err
		}
		op := sharded.ReaderAtOpener(func(ctx context.Context, name string) (io.ReaderAt, int64, error) {
			b, err := os.ReadFile(filepath.Join(location, name))
			if err != nil {
				return nil, 0, err
			}
			return brokenDisk{r: bytes.NewReader(b), failAt: int64(len(b)) - 1}, int64(len(b)), nil
		})
		return sharded.OpenIndex(ctx, idx, location, op)
	}
	out := filepath.Join(t.TempDir(), "m.safetensors")
	code, _, stderr := runCLI(t, "merge", dir, out)
	if code != 2 || !strings.Contains(stderr, "input/output error") {
		t.Errorf("exit %d, %s", code, stderr)
	}
	if _, err := os.Stat(out); err == nil {
		t.Error("output written despite the read error")
	}
}
