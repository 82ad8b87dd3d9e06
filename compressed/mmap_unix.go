//go:build unix

package compressed

import (
	"os"

	"golang.org/x/sys/unix"
)

// mapFile maps the whole file read-only, or returns nil when it cannot
// (empty, too large for this platform, or mmap refused): the caller then
// reads with pread.
func mapFile(f *os.File, size int64) []byte {
	if size <= 0 || int64(int(size)) != size {
		return nil
	}
	b, err := unix.Mmap(int(f.Fd()), 0, int(size), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return nil
	}
	return b
}

func unmapFile(b []byte) {
	if b != nil {
		unix.Munmap(b)
	}
}
