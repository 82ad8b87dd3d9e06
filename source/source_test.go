package source

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/gosafetensors/safetensors"
	"github.com/gosafetensors/safetensors/compressed"
)

var ctx = context.Background()

func TestDetectByContent(t *testing.T) {
	dir := t.TempDir()
	copyTo := func(src, name string) string {
		b, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	write := func(name, s string) string {
		p := filepath.Join(dir, name)
		os.WriteFile(p, []byte(s), 0o644)
		return p
	}
	cases := []struct {
		path   string
		format Format
	}{
		// names lie; content decides
		{copyTo("../testdata/torch/tiny_transformer.safetensors", "model.bin"), Safetensors},
		{copyTo("../testdata/torch/tiny_transformer.bin", "model.safetensors"), TorchZip},
		{copyTo("../testdata/torch/tiny_transformer_legacy.bin", "legacy.safetensors"), TorchPickle},
		// a protocol 0 pickle has no magic: torch.load reads it as one
		{copyTo("../testdata/malicious/raw_pickle_p0.bin", "p0.safetensors"), TorchPickle},
		{write("page.safetensors", "<!DOCTYPE html><html><title>Sign in</title></html>"), Unknown},
		{write("model.safetensors.index.json", `{"metadata": {"total_size": 8}, "weight_map": {"a": "model-00001-of-00001.safetensors"}}`), Index},
		{dir, Directory},
	}
	for _, c := range cases {
		o, err := Open(ctx, c.path)
		if err != nil {
			t.Fatalf("%s: %v", c.path, err)
		}
		if o.Format != c.format {
			t.Errorf("%s: format %v, want %v", c.path, o.Format, c.format)
		}
		o.Close()
	}
	// an HTML page is a content problem with a hint, not an I/O error
	_, err := OpenModel(ctx, filepath.Join(dir, "page.safetensors"))
	var ce *ContentError
	if !errors.As(err, &ce) || ce.Hint == "" || IsIOError(err) {
		t.Fatalf("HTML page: %v", err)
	}
	// a dangerous pickle is refused by content, naming its global
	_, err = OpenModel(ctx, filepath.Join(dir, "p0.safetensors"))
	if err == nil || IsIOError(err) {
		t.Fatalf("pickle named .safetensors: %v", err)
	}
}

func TestOpenModelKinds(t *testing.T) {
	for _, p := range []string{
		"../testdata/torch/tiny_transformer.safetensors",
		"../testdata/torch/tiny_transformer.bin",
		"../testdata/torch/tiny_transformer_legacy.bin",
	} {
		m, err := OpenModel(ctx, p)
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		ref, err := safetensors.Open("../testdata/torch/tiny_transformer.safetensors")
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range ref.Names() {
			a, err := m.Tensor(name)
			if err != nil {
				t.Fatalf("%s: %v", p, err)
			}
			ab, err := a.Copy()
			if err != nil {
				t.Fatal(err)
			}
			b, _ := ref.Tensor(name)
			bb, _ := b.Bytes()
			if string(ab) != string(bb) {
				t.Fatalf("%s: %s differs", p, name)
			}
		}
		ref.Close()
		if err := m.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

func TestFIFORefusedWithoutBlocking(t *testing.T) {
	p := filepath.Join(t.TempDir(), "pipe.safetensors")
	if err := syscall.Mkfifo(p, 0o600); err != nil {
		t.Skip(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := Open(ctx, p)
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, ErrNotRegular) || !IsIOError(err) {
			t.Fatalf("FIFO: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("opening a FIFO blocked")
	}
	if _, err := Open(ctx, "/dev/zero"); !errors.Is(err, ErrNotRegular) {
		t.Fatalf("/dev/zero: %v", err)
	}
}

// failingReader fails every read past the first n bytes with a disk error.
type failingReader struct {
	r io.ReaderAt
	n int64
}

func (f failingReader) ReadAt(p []byte, off int64) (int, error) {
	if off+int64(len(p)) > f.n {
		return 0, syscall.EIO
	}
	return f.r.ReadAt(p, off)
}

// A disk error under a decoder is an I/O error, whatever the decoder made
// of the short read.
func TestReadErrorIsIOError(t *testing.T) {
	for _, p := range []string{"../testdata/torch/tiny_transformer.bin", "../testdata/torch/tiny_transformer_legacy.bin", "../testdata/torch/tiny_transformer.safetensors"} {
		f, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		st, _ := f.Stat()
		o, err := newObject(p, failingReader{f, max(st.Size()/2, PrefixSize+8+4096)}, st.Size(), f)
		if err != nil {
			t.Fatal(err)
		}
		m, err := o.Model(ctx)
		if err == nil {
			// the header was readable: reading every tensor must fail
			// with the disk's error
			for tt, err2 := range m.All() {
				if err2 == nil {
					_, err2 = tt.Copy()
				}
				if err2 != nil {
					err = err2
					break
				}
			}
		}
		if err == nil {
			t.Fatalf("%s: no error", p)
		}
		if !IsIOError(err) || !errors.Is(err, syscall.EIO) {
			t.Fatalf("%s: %v is not an I/O error wrapping EIO", p, err)
		}
		o.Close()
	}
}

// A header length of 0x380 begins with 0x80 0x03, the bytes of a pickle's
// PROTO 3 opcode: still safetensors.
func TestDetectSafetensorsThatStartsLikeAPickle(t *testing.T) {
	p := make([]byte, 8+0x380)
	p[0], p[1] = 0x80, 0x03
	p[8] = '{'
	if f, _, err := Detect(bytes.NewReader(p), int64(len(p))); err != nil || f != Safetensors {
		t.Fatalf("format %v", f)
	}
}

// Detection is one path: a tar is what Python's tarfile accepts (the
// check torch.load makes, torch/tarlist), not any file with "ustar" at
// byte 257; a compressed container is what the decompressors registered
// with the root package recognise.
func TestDetectOnePath(t *testing.T) {
	var tarBuf bytes.Buffer
	tw := tar.NewWriter(&tarBuf)
	tw.WriteHeader(&tar.Header{Name: "pickle", Mode: 0o644, Size: 3, Format: tar.FormatUSTAR})
	tw.Write([]byte("abc"))
	tw.Close()
	fake := make([]byte, 1024)
	copy(fake[257:], "ustar")
	copy(fake, "hello world, this is a text file, not an archive")

	src, err := os.ReadFile("../testdata/torch/tiny_transformer.safetensors")
	if err != nil {
		t.Fatal(err)
	}
	var zst bytes.Buffer
	if _, err := compressed.Compress(ctx, &zst, bytes.NewReader(src), int64(len(src))); err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]struct {
		b    []byte
		want Format
	}{
		"tar":         {tarBuf.Bytes(), TorchPickle},
		"ustar text":  {fake, Unknown},
		"zeros":       {make([]byte, 2048), Unknown},
		"zstd":        {zst.Bytes(), Compressed},
		"safetensors": {src, Safetensors},
		"empty":       {nil, Unknown},
	} {
		f, _, err := Detect(bytes.NewReader(c.b), int64(len(c.b)))
		if err != nil || f != c.want {
			t.Errorf("%s: %v, %v; want %v", name, f, err, c.want)
		}
	}
}
