//go:build unix

package safetensors

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/gosafetensors/safetensors/internal/mmap"
)

// truncatedAfterOpen writes a file with one F32 tensor "w" of n elements,
// opens it (mapped) and truncates it to keep bytes.
func truncatedAfterOpen(t *testing.T, n int, keep int64) (*File, string) {
	t.Helper()
	f, path := openF32(t, n)
	if !f.Mapped() {
		t.Skip("not mapped here")
	}
	if err := os.Truncate(path, keep); err != nil {
		t.Fatal(err)
	}
	return f, path
}

// openF32 writes a file with one F32 tensor "w" of n elements 0, 1, 2...
// and opens it.
func openF32(tb testing.TB, n int) (*File, string) {
	tb.Helper()
	path := filepath.Join(tb.TempDir(), "m.safetensors")
	data := make([]float32, n)
	for i := range data {
		data[i] = float32(i)
	}
	w, err := FromSlice("w", []int64{int64(n)}, data)
	if err != nil {
		tb.Fatal(err)
	}
	if err := SaveFile(path, map[string]*Tensor{"w": w}, nil); err != nil {
		tb.Fatal(err)
	}
	f, err := Open(path)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { f.Close() })
	return f, path
}

// isFault requires err to be the error of a fault on the shrunken
// mapping, naming the file.
func isFault(t *testing.T, what string, err error, path string) {
	t.Helper()
	if !errors.Is(err, syscall.EIO) || !strings.Contains(err.Error(), path) {
		t.Errorf("%s: %v, want an error wrapping EIO naming %s", what, err, path)
	}
}

// TestTruncatedAfterOpen: a file truncated after Open mapped it gives an
// error, not a SIGBUS, from every method that reads the tensor's bytes
// itself: ReadAt, Reader, WriteTo, Slice, Float32Into, Float64Into (on
// all cores), Copy.
func TestTruncatedAfterOpen(t *testing.T) {
	const n = 1 << 20 // 4 MiB: decoded on several goroutines
	f, path := truncatedAfterOpen(t, n, 0)
	w, err := f.Tensor("w")
	if err != nil {
		t.Fatal(err)
	}
	p := make([]byte, 4096)
	_, err = w.ReadAt(p, 1<<20)
	isFault(t, "ReadAt", err, path)
	_, err = io.Copy(io.Discard, w.Reader())
	isFault(t, "Reader", err, path)
	_, err = w.WriteTo(&bytes.Buffer{})
	isFault(t, "WriteTo", err, path)
	_, err = w.Slice(Range(10, 20000))
	isFault(t, "Slice", err, path)
	isFault(t, "Float32Into", w.Float32Into(make([]float32, n)), path)
	isFault(t, "Float64Into", w.Float64Into(make([]float64, n)), path)
	if _, err := w.Copy(); err == nil || !strings.Contains(err.Error(), path) {
		t.Errorf("Copy: %v", err)
	}
}

// TestHeaderOfShrunkMapping: a file that shrinks between being mapped and
// its header being parsed (NewFile's window) gives an error.
func TestHeaderOfShrunkMapping(t *testing.T) {
	path := filepath.Join(t.TempDir(), "m.safetensors")
	hdr := `{"w":{"dtype":"U8","shape":[8],"data_offsets":[0,8]},"__metadata__":{"k":"` + strings.Repeat("v", 3*os.Getpagesize()) + `"}}`
	b := binary.LittleEndian.AppendUint64(nil, uint64(len(hdr)))
	b = append(b, hdr...)
	if err := os.WriteFile(path, append(b, make([]byte, 8)...), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, _ := f.Stat()
	m, err := mmap.Map(f, st.Size())
	if err != nil {
		t.Skip(err)
	}
	defer mmap.Unmap(m)
	if err := os.Truncate(path, int64(os.Getpagesize())); err != nil { // the header's end is gone
		t.Fatal(err)
	}
	o, _ := buildOptions(nil)
	if _, err := readHeaderAt(bytesReaderAt(m), st.Size(), o); !errors.Is(err, syscall.EIO) {
		t.Fatalf("header of a shrunk mapping: %v", err)
	}
	if _, err := bytesReaderAt(m).ReadAt(make([]byte, 8), int64(2*os.Getpagesize())); !errors.Is(err, syscall.EIO) {
		t.Fatalf("ReadAt past the new end: %v", err)
	}
}

// BenchmarkMappedReadAt: the cost of reading a mapped tensor under a
// fault guard (fault.Copy, two SetPanicOnFault calls and a deferred
// recover per read), against the plain copy it replaced.
func BenchmarkMappedReadAt(b *testing.B) {
	f, _ := openF32(b, 1<<20)
	t, _ := f.Tensor("w")
	for _, n := range []int{64, 4 << 10, 1 << 20} {
		p := make([]byte, n)
		b.Run(fmt.Sprintf("plain/%d", n), func(b *testing.B) {
			b.SetBytes(int64(n))
			for b.Loop() {
				copy(p, t.data)
			}
		})
		b.Run(fmt.Sprintf("guarded/%d", n), func(b *testing.B) {
			b.SetBytes(int64(n))
			for b.Loop() {
				if _, err := t.ReadAt(p, 0); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
