// Package mmap maps files read-only into memory, the one way every package
// of the module does it. Where the platform has no mmap, or a file cannot
// be mapped, Map returns an error and callers read with pread instead.
package mmap

import (
	"errors"
	"math"
	"os"
)

// ErrUnsupported is returned where files are not mapped: on platforms
// without mmap, for an empty file, or for one too large for the address
// space.
var ErrUnsupported = errors.New("mmap: cannot map this file")

// Map maps the first size bytes of f read-only and shared; size 0 maps the
// file as long as it is now. Reading the mapping past the end of the file
// (it shrank, or is still being written) faults, so callers map only what
// they know is there. Release it with [Unmap].
func Map(f *os.File, size int64) ([]byte, error) {
	if size == 0 {
		st, err := f.Stat()
		if err != nil {
			return nil, err
		}
		size = st.Size()
	}
	if size <= 0 || size > math.MaxInt {
		return nil, ErrUnsupported
	}
	return mapFile(f, int(size))
}

// Unmap releases a mapping made by Map; nil is a no-op.
func Unmap(b []byte) error {
	if b == nil {
		return nil
	}
	return unmap(b)
}
