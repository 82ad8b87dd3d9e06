package safetensors

import (
	"fmt"
	"io"
	"os"

	"github.com/gosafetensors/safetensors/internal/fault"
	"github.com/gosafetensors/safetensors/internal/mmap"
)

// File is a safetensors file opened with [Open]: a [Reader] whose tensors
// are zero-copy views of a read-only memory mapping where the platform
// supports it (unix), or read with pread elsewhere.
type File struct {
	Reader
	f       *os.File
	mapping []byte
}

// Open opens and validates the named file. Only the header is read: opening
// costs the same for a 1 MiB file and a 100 GiB one. Close the File when done;
// tensor views obtained from it are invalid afterwards.
func Open(path string, opts ...Option) (*File, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	file, err := NewFile(f, append([]Option{WithName(path)}, opts...)...)
	if err != nil {
		f.Close()
		return nil, err
	}
	return file, nil
}

// NewFile is Open on a file that is already open: it maps f and validates
// its header. The File takes ownership of f on success (Close closes it); on
// error f is left open. The name in errors is f.Name() unless WithName says
// otherwise.
func NewFile(f *os.File, opts ...Option) (*File, error) {
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	opts = append([]Option{WithName(f.Name())}, opts...)
	o, err := buildOptions(opts)
	if err != nil {
		return nil, err
	}
	size := st.Size()
	var src interface {
		ReadAt([]byte, int64) (int, error)
	} = f
	// A file that cannot be mapped (empty, or mmap refused) is read with
	// pread.
	mapping, err := mmap.Map(f, size)
	if err == nil {
		src = bytesReaderAt(mapping)
	}
	// A compressed container: tensors come from the decompressing reader
	// (over the mapping), not from the mapping itself.
	ra, usize, isCompressed, err := decompressed(src, size, o)
	if err != nil {
		mmap.Unmap(mapping)
		return nil, withFile(err, o.name)
	}
	if isCompressed {
		h, err := readHeaderAt(ra, usize, o)
		if err != nil {
			mmap.Unmap(mapping)
			return nil, withFile(err, o.name)
		}
		return &File{Reader: Reader{Header: *h, name: o.name, src: ra, size: usize}, f: f, mapping: mapping}, nil
	}
	h, err := readHeaderAt(src, size, o)
	if err != nil {
		mmap.Unmap(mapping)
		return nil, withFile(err, o.name)
	}
	file := &File{Reader: Reader{Header: *h, name: o.name, src: f, size: size, mem: mapping}, f: f, mapping: mapping}
	return file, nil
}

// Close unmaps and closes the file. Views returned by Bytes before Close must
// not be used afterwards.
func (f *File) Close() error {
	if f.f == nil {
		return ErrClosed
	}
	err := mmap.Unmap(f.mapping)
	if cerr := f.f.Close(); err == nil {
		err = cerr
	}
	f.mapping, f.mem, f.src, f.f = nil, nil, nil, nil
	return err
}

// Mapped reports whether the file's data is memory-mapped.
func (f *File) Mapped() bool { return f.mapping != nil }

// bytesReaderAt reads a mapping without copying more than asked. A page
// the file no longer has (it shrank after it was mapped) is an error
// wrapping syscall.EIO, not a SIGBUS: the header and a compressed
// container's frames are read through it.
type bytesReaderAt []byte

func (b bytesReaderAt) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 || off > int64(len(b)) {
		return 0, os.ErrInvalid
	}
	n, err := fault.Copy(p, b[off:])
	if err != nil {
		return 0, fmt.Errorf("reading %d bytes at byte %d of the mapping: %w", len(p), off, err)
	}
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}
