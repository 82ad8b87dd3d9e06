//go:build linux

package sharded

import (
	"errors"
	"io"
	"os"
	"sync/atomic"

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

// flusher starts the writeback of a file being appended to while the
// appending goes on (sync_file_range SYNC_FILE_RANGE_WRITE, from its own
// goroutine), so that the disk writes overlap the copy instead of all
// waiting for the final fsync. It only starts writes early: durability
// still comes from that fsync. A nil *flusher does nothing.
type flusher struct {
	f      *os.File
	target atomic.Int64
	wake   chan struct{}
	done   chan struct{}
}

// flushStep is how far the written end must move before writeback of the
// new bytes is started.
const flushStep = 8 << 20

func startFlusher(f *os.File) *flusher {
	fl := &flusher{f: f, wake: make(chan struct{}, 1), done: make(chan struct{})}
	go fl.run()
	return fl
}

func (fl *flusher) run() {
	defer close(fl.done)
	var flushed int64
	for range fl.wake {
		end := fl.target.Load()
		if end <= flushed {
			continue
		}
		c, err := fl.f.SyscallConn()
		if err != nil {
			return
		}
		var serr error
		if err := c.Control(func(fd uintptr) {
			serr = unix.SyncFileRange(int(fd), flushed, end-flushed, unix.SYNC_FILE_RANGE_WRITE)
		}); err != nil || serr != nil {
			// Not supported here: the final fsync does it all. Drain.
			for range fl.wake {
			}
			return
		}
		flushed = end
	}
}

// advance says that the file now holds end bytes. Whole flushSteps are
// handed to the writeback goroutine; it never blocks.
func (fl *flusher) advance(end int64) {
	if fl == nil {
		return
	}
	end &^= flushStep - 1
	if end-fl.target.Load() < flushStep {
		return
	}
	fl.target.Store(end)
	select {
	case fl.wake <- struct{}{}:
	default: // the goroutine has a wake-up pending and will see target
	}
}

// stop waits for the writeback goroutine to finish starting writes; the
// file may be closed after it returns.
func (fl *flusher) stop() {
	if fl == nil {
		return
	}
	close(fl.wake)
	<-fl.done
}
