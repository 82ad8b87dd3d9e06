package compressed

import (
	"io"
	"os"

	"github.com/gosafetensors/safetensors/internal/mmap"
)

// mapSource maps src when it is an *os.File of size bytes, so frames are
// decoded straight from the page cache instead of being copied out first.
func mapSource(src io.ReaderAt, size int64) []byte {
	if f, ok := src.(*os.File); ok {
		if b, err := mmap.Map(f, size); err == nil {
			return b
		}
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
