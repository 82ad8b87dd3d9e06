package sharded

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/gosafetensors/safetensors"
)

// countingFile is a shard read as a remote one is: an io.ReaderAt that is
// not an *os.File (so not FileBacked), counting the bytes read from it.
type countingFile struct {
	f *os.File
	n *atomic.Int64
}

func (c countingFile) ReadAt(p []byte, off int64) (int, error) {
	n, err := c.f.ReadAt(p, off)
	c.n.Add(int64(n))
	return n, err
}

// remoteLike opens the sharded model in dir through readers that count
// what they read.
func remoteLike(t *testing.T, dir string, n *atomic.Int64) *Model {
	t.Helper()
	idx, err := ReadIndex(filepath.Join(dir, IndexName))
	if err != nil {
		t.Fatal(err)
	}
	op := ReaderAtOpener(func(ctx context.Context, name string) (io.ReaderAt, int64, error) {
		f, err := os.Open(filepath.Join(dir, name))
		if err != nil {
			return nil, 0, err
		}
		t.Cleanup(func() { f.Close() })
		st, err := f.Stat()
		if err != nil {
			return nil, 0, err
		}
		return countingFile{f, n}, st.Size(), nil
	})
	m, err := OpenIndex(context.Background(), idx, filepath.Join(dir, IndexName), op)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestVerifiedCopyReadsOnce: merging and splitting a model whose shards
// are not local files (remote, compressed) reads each tensor byte from the
// source once, verification included: it hashes the bytes as they pass
// instead of reading the source again (which moved every byte twice). A
// byte changed in the output after it was written is still caught.
func TestVerifiedCopyReadsOnce(t *testing.T) {
	// tensors across verification blocks (4 MiB) and shards
	names := []string{"a", "b", "c", "d", "e"}
	sizes := []int{9<<20 + 3, 5, 4 << 20, 1, 6<<20 + 1}
	in := filepath.Join(t.TempDir(), "in.safetensors")
	if err := safetensors.WriteFile(in, tensorsOf(names, sizes), nil); err != nil {
		t.Fatal(err)
	}
	data := int64(0)
	for _, s := range sizes {
		data += int64(s)
	}
	local, err := Open(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	defer local.Close()
	dir := t.TempDir()
	if _, err := Split(context.Background(), local, dir, WithMaxShardSize(10<<20)); err != nil {
		t.Fatal(err)
	}
	var read atomic.Int64
	m := remoteLike(t, dir, &read)
	headers := read.Load()
	out := filepath.Join(t.TempDir(), "merged.safetensors")
	if _, err := Merge(context.Background(), m, out); err != nil {
		t.Fatal(err)
	}
	if got := read.Load() - headers; got != data {
		t.Fatalf("a verified merge of %d tensor bytes read %d from the source", data, got)
	}
	want, _ := os.ReadFile(in)
	got, _ := os.ReadFile(out)
	if string(got) != string(want) {
		t.Fatal("merged file differs from the original")
	}
	read.Store(0)
	if _, err := Split(context.Background(), m, t.TempDir(), WithMaxShardSize(7<<20)); err != nil {
		t.Fatal(err)
	}
	if got := read.Load(); got != data {
		t.Fatalf("a verified split of %d tensor bytes read %d from the source", data, got)
	}

	// A byte of the second block of "a" changed once written.
	for _, at := range []int64{0, 5<<20 + 7, 9<<20 + 2} {
		path := filepath.Join(t.TempDir(), "x.safetensors")
		f, err := os.Create(path)
		if err != nil {
			t.Fatal(err)
		}
		c := &copier{ctx: context.Background(), src: m, opt: writeOptions{verify: true}}
		var dataStart int64 = -1
		c.afterWrite = func(written int64) {
			switch {
			case dataStart == -1:
				dataStart = written
			case dataStart >= 0 && written > dataStart+at:
				b := []byte{0}
				f.ReadAt(b, dataStart+at)
				b[0] ^= 0x10
				f.WriteAt(b, dataStart+at)
				dataStart = -2
			}
		}
		_, ck, err := c.writeFile(f, path, []string{"a"}, nil, true, true)
		if err == nil {
			err = ck.finish()
		}
		if !errors.Is(err, ErrVerify) || !strings.Contains(err.Error(), `tensor "a" differs from its source in bytes`) {
			t.Errorf("byte %d changed: %v", at, err)
		}
		f.Close()
	}
}
