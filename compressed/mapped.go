package compressed

import (
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/debug"
)

// errMapFault is the I/O error of a read from a mapped file that faulted
// (the file shrank while mapped).
var errMapFault = errors.New("compressed: the mapped file faulted on read (was it truncated while open?)")

// mapSource maps src when it is an *os.File of size bytes, so frames are
// decoded straight from the page cache instead of being copied out first.
func mapSource(src io.ReaderAt, size int64) []byte {
	if f, ok := src.(*os.File); ok {
		return mapFile(f, size)
	}
	return nil
}

// mappedFrame returns frame bytes [off, off+n) of the mapping, if the
// ReaderAt has one that holds them.
func (r *ReaderAt) mappedFrame(off, n int64) ([]byte, bool) {
	if r.mapped == nil || off < 0 || n < 0 || off > int64(len(r.mapped))-n {
		return nil, false
	}
	return r.mapped[off : off+n : off+n], true
}

// catchFault runs f with memory faults turned into panics and recovers
// them as an I/O error: a mapped file that is truncated while it is read
// fails the read instead of crashing the process.
func catchFault(f func() error) (err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if e := recover(); e != nil {
			if fe, ok := e.(interface{ Addr() uintptr }); ok {
				err = fmt.Errorf("%w (address %#x)", errMapFault, fe.Addr())
				return
			}
			panic(e)
		}
	}()
	return f()
}
