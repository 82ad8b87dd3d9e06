//go:build unix

package sharded

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// checkSpace fails before anything is written when dir's file system has
// clearly too little free space for size bytes.
func checkSpace(dir string, size int64) error {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return nil // unknown: let the writes tell
	}
	free := int64(st.Bavail) * int64(st.Bsize)
	if free >= 0 && size > free {
		return fmt.Errorf("%s: need %d bytes, only %d free on its file system: %w", dir, size, free, &os.PathError{Op: "write", Path: dir, Err: unix.ENOSPC})
	}
	return nil
}
