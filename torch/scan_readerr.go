package torch

import (
	"io"
	"sync/atomic"

	"github.com/gosafetensors/safetensors/internal/rangeread"
	"github.com/gosafetensors/safetensors/internal/redact"
)

// readRecorder remembers the first read of a scanned file that failed, so
// that Scan reports it as the failure to read it is instead of a finding
// about the bytes: an error, or an end before the file's size (a file
// truncated underneath, a connection closed early). A read past the end,
// which a hostile offset may ask for, is not a failure.
type readRecorder struct {
	r    io.ReaderAt
	size int64
	err  atomic.Pointer[error]
}

func (rr *readRecorder) ReadAt(p []byte, off int64) (int, error) {
	n, err := rr.r.ReadAt(p, off)
	if err != nil && !(err == io.EOF && off+int64(n) >= rr.size) {
		rr.err.CompareAndSwap(nil, &err)
	}
	return n, err
}

// Prefetch passes announcements on to a remote reader.
func (rr *readRecorder) Prefetch(offs, lens []int64) error {
	rangeread.Prefetch(rr.r, offs, lens)
	return nil
}

// failure returns the error Scan returns for the first failed read, or nil.
func (rr *readRecorder) failure(name string) error {
	p := rr.err.Load()
	if p == nil {
		return nil
	}
	err := *p
	if err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	return redact.Wrap(name, "reading failed part-way, not every byte was checked", err)
}
