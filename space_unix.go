//go:build unix

package safetensors

import (
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// checkSpace fails early when the destination's file system has clearly
// too little free space for size bytes, before anything is written. It is
// cheaper than fallocate, which slowed 1 GiB writes by about a third here
// (unwritten extents are converted as the data lands).
func checkSpace(f *os.File, size int64) error {
	var st unix.Statfs_t
	if err := unix.Fstatfs(int(f.Fd()), &st); err != nil {
		return nil // unknown: let the writes tell
	}
	free := int64(st.Bavail) * int64(st.Bsize)
	if free >= 0 && size > free {
		return fmt.Errorf("safetensors: %s: need %d bytes, only %d free on its file system", filepath.Dir(f.Name()), size, free)
	}
	return nil
}
