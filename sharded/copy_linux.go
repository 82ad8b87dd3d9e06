//go:build linux

package sharded

import (
	"errors"
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// copyRange appends n bytes of src, from offset off, to dst with
// copy_file_range: the data does not pass through user space (and is
// shared, not copied, on file systems with reflinks). The source offset is
// explicit, so src may be shared with concurrent readers. ok is false,
// with nothing copied, when the kernel or the file systems cannot do it;
// the caller then copies through a buffer.
func copyRange(dst, src *os.File, off, n int64) (copied int64, ok bool, err error) {
	sc, err := src.SyscallConn()
	if err != nil {
		return 0, false, nil
	}
	dc, err := dst.SyscallConn()
	if err != nil {
		return 0, false, nil
	}
	var cerr error
	rerr := sc.Control(func(sfd uintptr) {
		werr := dc.Control(func(dfd uintptr) {
			roff := off
			for copied < n {
				m, e := unix.CopyFileRange(int(sfd), &roff, int(dfd), nil, int(min(n-copied, 1<<30)), 0)
				if e == unix.EINTR {
					continue
				}
				if e != nil {
					if copied == 0 && unsupported(e) {
						ok = false
						return
					}
					cerr = &os.PathError{Op: "copy_file_range", Path: src.Name(), Err: e}
					return
				}
				if m == 0 {
					cerr = io.ErrUnexpectedEOF // the source is shorter than its header says
					return
				}
				copied += int64(m)
			}
		})
		if werr != nil && cerr == nil {
			cerr = werr
		}
	})
	if rerr != nil && cerr == nil {
		cerr = rerr
	}
	if cerr == nil && copied == 0 && n > 0 {
		return 0, false, nil
	}
	return copied, true, cerr
}

func unsupported(e error) bool {
	return errors.Is(e, unix.ENOSYS) || errors.Is(e, unix.EXDEV) || errors.Is(e, unix.EINVAL) ||
		errors.Is(e, unix.EOPNOTSUPP) || errors.Is(e, unix.EPERM) || errors.Is(e, unix.EBADF)
}
