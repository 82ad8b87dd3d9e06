//go:build unix

package sharded

import (
	"errors"
	"math"
	"os"

	"golang.org/x/sys/unix"
)

// mapping is a read-only mapping of a whole file.
type mapping struct{ b []byte }

// mapFile maps the first size bytes of f read-only; size 0 means as long
// as f is now. Reading the mapping past the end of the file (it shrank, or
// is still being written) faults: see [firstDiff].
func mapFile(f *os.File, size int64) (mapping, error) {
	if size == 0 {
		st, err := f.Stat()
		if err != nil {
			return mapping{}, err
		}
		size = st.Size()
	}
	if size <= 0 || size > math.MaxInt {
		return mapping{}, errors.New("cannot map this file")
	}
	c, err := f.SyscallConn()
	if err != nil {
		return mapping{}, err
	}
	var b []byte
	var merr error
	if err := c.Control(func(fd uintptr) {
		b, merr = unix.Mmap(int(fd), 0, int(size), unix.PROT_READ, unix.MAP_SHARED)
	}); err != nil {
		return mapping{}, err
	}
	if merr != nil {
		return mapping{}, merr
	}
	return mapping{b: b}, nil
}

func (m mapping) unmap() {
	if m.b != nil {
		unix.Munmap(m.b)
	}
}
