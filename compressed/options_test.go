package compressed

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/gosafetensors/safetensors"
)

// TestOptionKinds: an option of one kind is not an option of the other, so
// passing it where it does not apply does not compile; the options of both
// kinds are Options.
func TestOptionKinds(t *testing.T) {
	for _, o := range []WriteOption{WithCodec(Zstd), WithLevel(2), WithFrameSize(DefaultFrameSize)} {
		if _, ok := o.(ReadOption); ok {
			t.Errorf("%T is a ReadOption too", o)
		}
	}
	for _, o := range []ReadOption{WithMaxFrameSize(1 << 20), WithMaxFrames(8), WithMaxRatio(0), WithMaxSize(0), WithCacheFrames(0), WithCacheBytes(0)} {
		if _, ok := o.(WriteOption); ok {
			t.Errorf("%T is a WriteOption too", o)
		}
	}
	for _, o := range []any{WithName("x"), WithConcurrency(1), WithProgress(func(int64, int64) {}), WithOverwrite(true)} {
		_, w := o.(WriteOption)
		_, r := o.(ReadOption)
		if !w || !r {
			t.Errorf("%T: WriteOption %v, ReadOption %v; want both", o, w, r)
		}
	}
}

// TestOptionNotApplying: an Option given to a function it does not apply
// to is an ErrOption error, before anything is read or written, never
// silently ignored.
func TestOptionNotApplying(t *testing.T) {
	ctx := context.Background()
	orig := genModel(t, safetensors.BF16, 64<<10, 1)
	comp := compressBytes(t, orig)
	dir := t.TempDir()
	in := filepath.Join(dir, "m.safetensors")
	zst := filepath.Join(dir, "m.safetensors.zst")
	if err := os.WriteFile(in, orig, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(zst, comp, 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out")
	progress := WithProgress(func(int64, int64) {})
	src := func(b []byte) (io.ReaderAt, int64) { return bytes.NewReader(b), int64(len(b)) }
	for _, tc := range []struct {
		name string
		run  func() error
	}{
		{"Compress WithOverwrite", func() error {
			r, n := src(orig)
			_, err := Compress(ctx, io.Discard, r, n, WithOverwrite(true))
			return err
		}},
		{"Decompress WithOverwrite", func() error {
			r, n := src(comp)
			_, err := Decompress(ctx, io.Discard, r, n, WithOverwrite(true))
			return err
		}},
		{"Decompress WithCacheFrames", func() error {
			r, n := src(comp)
			_, err := Decompress(ctx, io.Discard, r, n, WithCacheFrames(3))
			return err
		}},
		{"DecompressFile WithCacheBytes", func() error {
			_, err := DecompressFile(ctx, zst, out, WithCacheBytes(1<<20))
			return err
		}},
		{"NewReaderAt WithProgress", func() error {
			r, n := src(comp)
			_, err := NewReaderAt(r, n, progress)
			return err
		}},
		{"NewReaderAt WithOverwrite", func() error {
			r, n := src(comp)
			_, err := NewReaderAt(r, n, WithOverwrite(false))
			return err
		}},
		{"Open WithProgress", func() error {
			_, err := Open(zst, progress)
			return err
		}},
		{"Compress nil Option", func() error {
			r, n := src(orig)
			_, err := Compress(ctx, io.Discard, r, n, Option(nil))
			return err
		}},
		{"Compress nil WriteOption", func() error {
			r, n := src(orig)
			_, err := Compress(ctx, io.Discard, r, n, nil)
			return err
		}},
		{"NewReaderAt nil ReadOption", func() error {
			r, n := src(comp)
			_, err := NewReaderAt(r, n, nil)
			return err
		}},
	} {
		if err := tc.run(); !errors.Is(err, ErrOption) {
			t.Errorf("%s: %v, want ErrOption", tc.name, err)
		}
	}
	if _, err := os.Stat(out); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a refused DecompressFile left %s: %v", out, err)
	}
	// and where they do apply they are taken
	if _, err := CompressFile(ctx, in, zst, WithOverwrite(true), progress); err != nil {
		t.Error(err)
	}
	if _, err := DecompressFile(ctx, zst, out, WithOverwrite(true), progress, WithMaxSize(int64(len(orig)))); err != nil {
		t.Error(err)
	}
	ra, err := Open(zst, WithCacheFrames(3), WithCacheBytes(1<<20), WithConcurrency(1))
	if err != nil {
		t.Fatal(err)
	}
	ra.Close()
}

// TestMaxSizeOpen: WithMaxSize applies to random access too: a ReaderAt
// over a file whose original is larger is refused when it is opened.
func TestMaxSizeOpen(t *testing.T) {
	orig := genModel(t, safetensors.BF16, 64<<10, 1)
	for _, codec := range allCodecs {
		comp := compressBytes(t, orig, WithCodec(codec))
		_, err := NewReaderAt(bytes.NewReader(comp), int64(len(comp)), WithMaxSize(int64(len(orig)-1)))
		if !errors.Is(err, ErrLimit) {
			t.Errorf("%s: %v, want ErrLimit", codec, err)
		}
		ra, err := NewReaderAt(bytes.NewReader(comp), int64(len(comp)), WithMaxSize(int64(len(orig))))
		if err != nil {
			t.Errorf("%s: %v at exactly the original's size", codec, err)
			continue
		}
		ra.Close()
	}
}
