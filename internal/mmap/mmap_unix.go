//go:build unix

package mmap

import (
	"os"

	"golang.org/x/sys/unix"
)

func mapFile(f *os.File, size int) ([]byte, error) {
	// Through the raw descriptor: f.Fd() would put f in blocking mode.
	c, err := f.SyscallConn()
	if err != nil {
		return nil, err
	}
	var b []byte
	var merr error
	if err := c.Control(func(fd uintptr) {
		b, merr = unix.Mmap(int(fd), 0, size, unix.PROT_READ, unix.MAP_SHARED)
	}); err != nil {
		return nil, err
	}
	return b, merr
}

func unmap(b []byte) error { return unix.Munmap(b) }
