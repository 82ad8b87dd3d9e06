//go:build linux

package load

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"syscall"
	"unsafe"

	"github.com/gosafetensors/safetensors/internal/fetch"
	"golang.org/x/sys/unix"
)

// directAlign is the alignment O_DIRECT reads need (offset, length and
// memory): the largest logical block size of common devices.
const directAlign = 4096

// directMin: reads shorter than this go through the page cache (a column
// split's short runs), where O_DIRECT would read whole blocks for a few
// bytes.
const directMin = 64 << 10

// localFile reads a local file with pread where its pages are in the page
// cache, and with O_DIRECT reads (through an aligned bounce buffer) where
// they are not: a cold read then costs the device's time and one copy,
// not the page cache's bookkeeping, which on a busy machine halves what a
// disk delivers (see docs/loading.md). It is opened for one load.
type localFile struct {
	f       *os.File // the file the model was opened with
	direct  *os.File // the same file opened with O_DIRECT, or nil
	mapping []byte   // the file mapped (never touched): mincore says what is cached
	bounce  *sync.Pool
	size    int // of a bounce buffer
}

// openLocal prepares f for a load. Without O_DIRECT (a filesystem that
// refuses it, a file that cannot be mapped) every read is a pread.
func openLocal(f *os.File, chunk int64) *localFile {
	l := &localFile{f: f}
	st, err := f.Stat()
	if err != nil || st.Size() == 0 || st.Size() > 1<<46 {
		return l
	}
	// Reopen the very file through its descriptor (no path to race on),
	// and check it is the same inode.
	d, err := os.OpenFile(fmt.Sprintf("/proc/self/fd/%d", f.Fd()), os.O_RDONLY|syscall.O_DIRECT, 0)
	if err != nil {
		return l
	}
	dst, err := d.Stat()
	if err != nil || !os.SameFile(st, dst) {
		d.Close()
		return l
	}
	m, err := unix.Mmap(int(f.Fd()), 0, int(st.Size()), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		d.Close()
		return l
	}
	size := 2*int(chunk) + 2*directAlign // ReadRuns reads spans up to twice the runs
	l.direct, l.mapping, l.size = d, m, size
	l.bounce = &sync.Pool{New: func() any {
		b := make([]byte, size+directAlign)
		a := int(uintptr(unsafe.Pointer(&b[0])) & (directAlign - 1))
		b = b[(directAlign-a)%directAlign:][:size]
		return &b
	}}
	return l
}

func (l *localFile) Close() error {
	var err error
	if l.mapping != nil {
		err = unix.Munmap(l.mapping)
		l.mapping = nil
	}
	if l.direct != nil {
		if cerr := l.direct.Close(); err == nil {
			err = cerr
		}
		l.direct = nil
	}
	return err
}

func (l *localFile) Name() string { return l.f.Name() }

// ReadAt reads p at off: from the page cache when all of it is there (or
// it is short), else with one O_DIRECT read. Fewer bytes than asked come
// with io.EOF, as from pread at the end of the file.
func (l *localFile) ReadAt(p []byte, off int64) (int, error) {
	if l.direct == nil || len(p) < directMin || int64(len(p))+2*directAlign > int64(l.size) || l.cached(off, int64(len(p))) {
		return l.f.ReadAt(p, off)
	}
	n, err := l.readDirect([][]byte{p}, []int64{off}, off, off+int64(len(p)))
	if err == nil && n < len(p) {
		err = io.EOF
	}
	return n, err
}

// ReadRuns reads runs that lie close together (a chunk spanning tensors)
// with one O_DIRECT read when they are not cached, else one pread each.
func (l *localFile) ReadRuns(bufs [][]byte, offs []int64) error {
	var n int64
	for _, b := range bufs {
		n += int64(len(b))
	}
	if len(bufs) == 0 {
		return nil
	}
	lo, hi := offs[0], offs[len(offs)-1]+int64(len(bufs[len(bufs)-1]))
	span := hi - lo
	if l.direct == nil || n < directMin || span > 2*n || span+2*directAlign > int64(l.size) || l.cached(lo, span) {
		for i, b := range bufs {
			m, err := l.f.ReadAt(b, offs[i])
			if m == len(b) && (err == nil || errors.Is(err, io.EOF)) {
				continue
			}
			if err == nil || errors.Is(err, io.EOF) {
				err = fmt.Errorf("%w: %d of %d bytes at %d (the file ends early: truncated since it was opened?)", fetch.ErrShortRead, m, len(b), offs[i])
			}
			return err
		}
		return nil
	}
	got, err := l.readDirect(bufs, offs, lo, hi)
	if err == nil && got < int(n) {
		err = fmt.Errorf("%w: %d of %d bytes in %d-%d (the file ends early: truncated since it was opened?)", fetch.ErrShortRead, got, n, lo, hi-1)
	}
	return err
}

// readDirect reads [lo, hi) of the file with one aligned O_DIRECT read and
// copies the runs out of it; it returns how many bytes of the runs it
// filled (fewer at the end of the file).
func (l *localFile) readDirect(bufs [][]byte, offs []int64, lo, hi int64) (int, error) {
	a := lo &^ (directAlign - 1)
	e := (hi + directAlign - 1) &^ (directAlign - 1)
	bp := l.bounce.Get().(*[]byte)
	defer l.bounce.Put(bp)
	if e-a > int64(len(*bp)) {
		return 0, fmt.Errorf("direct read of %d bytes exceeds the %d-byte bounce buffer", e-a, len(*bp))
	}
	b := (*bp)[:e-a]
	got := 0
	for int64(got) < hi-a {
		// Reads past the end of the file stop there (the last block).
		m, err := l.direct.ReadAt(b[got:], a+int64(got))
		got += m
		if err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			return 0, err
		}
		if m == 0 {
			break
		}
		if got%directAlign != 0 && int64(got) < hi-a {
			break // a short read not at a block boundary: the end of the file
		}
	}
	total := 0
	for i, p := range bufs {
		start := offs[i] - a
		if start+int64(len(p)) > int64(got) {
			n := max(0, min(len(p), got-int(start)))
			copy(p, b[start:start+int64(n)])
			return total + n, nil
		}
		total += copy(p, b[start:start+int64(len(p))])
	}
	return total, nil
}

// cached reports whether every page of [off, off+n) is in the page cache.
func (l *localFile) cached(off, n int64) bool {
	page := int64(os.Getpagesize())
	a := off &^ (page - 1)
	e := min(off+n, int64(len(l.mapping)))
	if e <= a {
		return true
	}
	vec := make([]byte, (e-a+page-1)/page)
	_, _, errno := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&l.mapping[a])), uintptr(e-a), uintptr(unsafe.Pointer(&vec[0])))
	if errno != 0 {
		return true
	}
	for _, v := range vec {
		if v&1 == 0 {
			return false
		}
	}
	return true
}
