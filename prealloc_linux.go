package safetensors

import (
	"os"

	"golang.org/x/sys/unix"
)

// preallocate reserves disk space so that a full disk is found before any
// data is written; failure is not an error (some filesystems lack it).
func preallocate(f *os.File, size int64) {
	_ = unix.Fallocate(int(f.Fd()), 0, 0, size)
}
