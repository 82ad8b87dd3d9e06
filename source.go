package safetensors

import (
	"io"
	"iter"
	"maps"
)

// Source is a set of named tensors, whatever holds them: a safetensors file
// ([Reader], [File]), a sharded model, a PyTorch checkpoint, a compressed or
// remote file. Commands and tools that only read tensors take a Source, so
// they work on all of these alike.
//
// Names are sorted bytewise, like Python's keys(); All iterates in the
// source's own order (file order for one file, shard then file order for a
// sharded model). Tensor reads bytes lazily: a Source costs its header, not
// its data. I/O failures are returned as they are (wrapped with %w), never
// as a [*FormatError].
type Source interface {
	// Names returns every tensor name, sorted.
	Names() []string
	// Info describes the named tensor. DataOffsets are relative to the
	// data section of the file that holds it; sources that are not
	// safetensors files set them to [0, size).
	Info(name string) (TensorInfo, bool)
	// Tensor returns the named tensor; a missing name is a *FormatError
	// wrapping ErrTensorNotFound.
	Tensor(name string) (*Tensor, error)
	// All iterates over every tensor in the source's order.
	All() iter.Seq2[*Tensor, error]
	// Meta returns the string metadata (__metadata__); never nil.
	Meta() map[string]string
	// Close releases what the source holds; tensors from it are invalid
	// afterwards (unless copied).
	Close() error
}

var (
	_ Source = (*Reader)(nil)
	_ Source = (*File)(nil)
)

// Meta returns a copy of the file's __metadata__ (empty, not nil, when the
// file has none).
func (r *Reader) Meta() map[string]string {
	m := make(map[string]string, len(r.Metadata))
	maps.Copy(m, r.Metadata)
	return m
}

// Close does nothing for a Reader: the io.ReaderAt belongs to the caller. A
// [File] unmaps and closes its file.
func (r *Reader) Close() error { return nil }

// NewTensor returns a tensor described by info whose C-contiguous
// little-endian bytes are read from r at offsets [0, info.Size()). file
// names the source in error messages. It lets sources that are not
// safetensors files (a checkpoint's strided view, a decompressing reader, a
// range of a remote object) serve tensors that slice, copy and stream like
// any other: Slice reads only the byte runs it needs through r.ReadAt.
func NewTensor(info TensorInfo, r io.ReaderAt, file string) *Tensor {
	return &Tensor{TensorInfo: info, file: file, src: r}
}

// NewTensorBytes returns a tensor described by info over b, which must hold
// exactly info.Size() bytes; b is not copied.
func NewTensorBytes(info TensorInfo, b []byte, file string) *Tensor {
	return &Tensor{TensorInfo: info, file: file, data: b}
}

// RunReader is an io.ReaderAt that reads many byte ranges together more
// cheaply than one by one: an HTTP reader that asks for them in one
// multi-range request, a decompressing reader that shares frames. Slicing a
// tensor whose source implements it hands over the runs the slice needs in
// batches. The runs are sorted and do not overlap; ReadRuns fills bufs[i]
// with the len(bufs[i]) bytes at offset offs[i], or returns an error.
type RunReader interface {
	io.ReaderAt
	ReadRuns(bufs [][]byte, offs []int64) error
}

// Streamer is an io.ReaderAt that can also write all of its bytes in order
// faster than ReadAt calls would (a strided view gathered through a
// buffer). A tensor made by [NewTensor] over a Streamer uses it for WriteTo,
// Reader and Copy.
type Streamer interface {
	io.ReaderAt
	Stream(w io.Writer) (int64, error)
}

// MissingTensor returns the error a Source gives for a name it does not
// hold: a *FormatError naming file and tensor that wraps ErrTensorNotFound.
func MissingTensor(file, name string) error {
	e := tensorError(ErrTensorNotFound, name, -1, "no such tensor")
	e.File = file
	return e
}
