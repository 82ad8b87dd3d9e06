package safetensors

import (
	"bytes"
	"fmt"
	"io"

	"github.com/gosafetensors/safetensors/internal/fault"
)

// Tensor is one tensor of a file: its description and access to its bytes.
//
// For a file opened with [Open], Bytes returns a zero-copy view of the
// memory mapping. The view is valid only until the file is closed: using it
// after Close faults and crashes the program, so call Copy for data that
// must outlive the file. If another process truncates the file while it is
// mapped, touching the lost pages raises SIGBUS, which also crashes (for
// the views Bytes, ChunkAt and As return, the caller's reads are the
// caller's: run them under debug.SetPanicOnFault to recover). Every method
// that reads the bytes itself — Copy and ReadAt, Reader, WriteTo, Slice,
// Float32Into and Float64Into — returns an error naming the file and the
// tensor instead (wrapping syscall.EIO).
type Tensor struct {
	TensorInfo

	file   string
	src    io.ReaderAt
	off    int64  // absolute offset of the tensor's first byte in src
	data   []byte // the bytes, when already in memory (mapped or sliced)
	mapped bool   // data is a view of a mapping
}

// Offset returns the absolute file offset of the tensor's first byte, or -1
// for a tensor made by slicing.
func (t *Tensor) Offset() int64 {
	if t.src == nil && !t.mapped {
		return -1
	}
	return t.off
}

// Bytes returns the tensor's little-endian bytes: a zero-copy view for a
// mapped file or a sliced tensor, otherwise a fresh buffer read from the
// source.
func (t *Tensor) Bytes() ([]byte, error) {
	if t.data != nil || t.src == nil {
		return t.data, nil
	}
	return t.readFresh()
}

// Copy returns the tensor's bytes in a newly allocated slice that the caller
// owns and that stays valid after the file is closed. For an open file it
// reads with pread rather than through the mapping: as fast, and a file
// truncated underneath gives an error instead of a fault.
func (t *Tensor) Copy() ([]byte, error) {
	if st, ok := t.streamer(); ok {
		var b bytes.Buffer
		b.Grow(int(t.Size()))
		if _, err := st.Stream(&b); err != nil {
			return nil, t.errorf("%w", err)
		}
		return b.Bytes(), nil
	}
	if t.src != nil {
		return t.readFresh()
	}
	return append([]byte(nil), t.data...), nil
}

// Reader returns a reader over the tensor's bytes.
func (t *Tensor) Reader() io.Reader {
	if t.data != nil || t.src == nil {
		return &sliceReader{b: t.data, t: t}
	}

	return io.NewSectionReader(t.src, t.off, t.Size())
}

// WriteTo writes the tensor's bytes to w.
func (t *Tensor) WriteTo(w io.Writer) (int64, error) {
	if t.data != nil || t.src == nil {
		if !t.mapped {
			n, err := w.Write(t.data)
			return int64(n), err
		}
		var n int
		var werr error
		if err := fault.CatchIn(t.data, func() error { n, werr = w.Write(t.data); return nil }); err != nil {
			return 0, t.mappedErr(err)
		}
		return int64(n), werr
	}
	if st, ok := t.streamer(); ok {
		return st.Stream(w)
	}
	return io.Copy(w, io.NewSectionReader(t.src, t.off, t.Size()))
}

// ReadAt reads the tensor's bytes starting at offset off within the tensor.
func (t *Tensor) ReadAt(p []byte, off int64) (int, error) {
	size := t.Size()
	if off < 0 || off > size {
		return 0, t.errorf("read at offset %d outside the tensor's %d bytes", off, size)
	}
	want := p
	if int64(len(p)) > size-off {
		want = p[:size-off]
	}
	var n int
	var err error
	if t.data != nil || t.src == nil {
		if n, err = t.copyData(want, off); err != nil {
			return 0, err
		}
	} else {
		n, err = t.src.ReadAt(want, t.off+off)
		if err == io.EOF && n == len(want) {
			err = nil
		}
	}
	if err == nil && n < len(p) {
		err = io.EOF
	}
	return n, err
}

// File returns the name of the file that holds the tensor, as its errors
// give it ("" when it has none).
func (t *Tensor) File() string { return t.file }

// Backing returns the reader the tensor's bytes are read from and the
// offset of its first byte there, so that a loader can schedule the reads
// itself (in parallel, in chunks, with its own context). For a mapped file
// it is the *os.File under the mapping. ok is false for a tensor whose
// bytes are only in memory (made by slicing or by NewTensorBytes): use
// Bytes.
func (t *Tensor) Backing() (r io.ReaderAt, off int64, ok bool) {
	if t.src == nil {
		return nil, 0, false
	}
	return t.src, t.off, true
}

// streamer returns the tensor's source as a Streamer when the tensor is
// the whole of it (made by NewTensor).
func (t *Tensor) streamer() (Streamer, bool) {
	if t.data != nil || t.off != 0 {
		return nil, false
	}
	st, ok := t.src.(Streamer)
	return st, ok
}

func (t *Tensor) readFresh() ([]byte, error) {
	buf := make([]byte, t.Size())
	n, err := t.src.ReadAt(buf, t.off)
	if err != nil && !(err == io.EOF && n == len(buf)) {
		return nil, t.errorf("reading %d bytes at byte %d: %w", len(buf), t.off, err)
	}
	return buf, nil
}

// errorf formats an error about the tensor; %w in format wraps as usual, so
// I/O errors stay detectable with errors.Is.
func (t *Tensor) errorf(format string, args ...any) error {
	return fmt.Errorf("%s: tensor %q: "+format, append([]any{t.fileName(), t.Name}, args...)...)
}

func (t *Tensor) fileName() string {
	if t.file == "" {
		return "safetensors"
	}
	return t.file
}

// copyData copies t.data from off into p, turning a fault on a mapping
// into an error (see [Tensor]).
func (t *Tensor) copyData(p []byte, off int64) (int, error) {
	if !t.mapped {
		return copy(p, t.data[off:]), nil
	}
	n, err := fault.Copy(p, t.data[off:])
	if err != nil {
		return 0, t.mappedErr(err)
	}
	return n, nil
}

// mappedErr names the file and the tensor in a fault's error.
func (t *Tensor) mappedErr(err error) error {
	return t.errorf("reading its bytes through the mapping (was the file truncated or replaced while open?): %w", err)
}

// sliceReader is a bytes.Reader without the seek and unread methods, over
// t's data.
type sliceReader struct {
	b []byte
	t *Tensor
}

func (r *sliceReader) Read(p []byte) (int, error) {
	if len(r.b) == 0 {
		return 0, io.EOF
	}
	n, err := r.t.copyData(p, int64(len(r.t.data)-len(r.b)))
	if err != nil {
		return 0, err
	}
	r.b = r.b[n:]
	return n, nil
}
