package download

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// preallocate reserves size bytes for f, so that a full disk fails the
// download at its start rather than in its middle; where the file system
// cannot (EOPNOTSUPP), the file is only extended (sparse).
func preallocate(f *os.File, size int64) error {
	if size == 0 {
		return nil
	}
	err := unix.Fallocate(int(f.Fd()), 0, 0, size)
	if errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.ENOSYS) {
		return f.Truncate(size)
	}
	if err != nil {
		return &os.PathError{Op: "fallocate", Path: f.Name(), Err: err}
	}
	return nil
}

// datasync makes f's written bytes durable.
func datasync(f *os.File) error {
	if err := unix.Fdatasync(int(f.Fd())); err != nil {
		return &os.PathError{Op: "fdatasync", Path: f.Name(), Err: err}
	}
	return nil
}

// openDirect opens path a second time with O_DIRECT, for writes and reads
// that bypass the page cache; nil where the file system refuses it
// (tmpfs).
func openDirect(path string) *os.File {
	f, err := os.OpenFile(path, os.O_RDWR|unix.O_DIRECT, 0)
	if err != nil {
		return nil
	}
	return f
}

// dropCache asks the kernel to drop f's cached pages of [off, end) (the
// clean ones; dirty ones are queued for write-back).
func dropCache(f *os.File, off, end int64) {
	unix.Fadvise(int(f.Fd()), off, end-off, unix.FADV_DONTNEED)
}
