package compressed

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"

	"github.com/gosafetensors/safetensors"
)

// A compressed file that lost its end — a seekable file cut at a frame
// boundary has lost its seek table and looks like a plain stream — still
// decompresses without a decoder error, to a prefix of the original. The
// original's own header says how long it is: everything this package
// restores is checked against it, so a short (or long) result is an error,
// never a file.

// originalSize parses the safetensors header at the start of the original
// bytes (read through r) and returns the size of the file it describes.
func originalSize(r io.Reader, opts ...safetensors.Option) (int64, error) {
	h, err := safetensors.ReadHeader(r, opts...)
	if err != nil {
		return 0, &Error{Frame: -1, Offset: -1, Msg: "the decompressed bytes do not start with a valid safetensors header", Err: ErrCorrupt, Cause: err}
	}
	return h.FileSize(), nil
}

// incomplete is the error for an original of got bytes whose header says want.
func incomplete(f Format, got, want int64) error {
	if got < want {
		return newErr(ErrCorrupt, -1, -1, "%s holds %d bytes of the original, but its safetensors header describes %d: the file is incomplete (truncated? a seekable file cut at a frame boundary loses its seek table)", f, got, want)
	}
	return newErr(ErrCorrupt, -1, -1, "%s holds %d bytes of the original, more than the %d its safetensors header describes", f, got, want)
}

// checkedWriter passes a stream's decompressed bytes on to w while checking
// them against the safetensors header they start with: the header is kept
// (growing only as its bytes arrive, at most the header size limit) until it
// can be parsed, then the count is held against the size it describes.
type checkedWriter struct {
	w      io.Writer
	format Format
	n      int64
	head   []byte
	want   int64 // -1 until the header is parsed
}

func (c *checkedWriter) Write(p []byte) (int, error) {
	for rest := p; c.want < 0 && len(rest) > 0; {
		need := int64(8)
		if len(c.head) >= 8 {
			need += int64(binary.LittleEndian.Uint64(c.head)) // at most the limit, checked below
		}
		take := min(int64(len(rest)), need-int64(len(c.head)))
		c.head = append(c.head, rest[:take]...)
		rest = rest[take:]
		if len(c.head) < 8 {
			continue
		}
		hl := binary.LittleEndian.Uint64(c.head)
		if hl > safetensors.DefaultMaxHeaderSize || uint64(len(c.head)) == 8+hl {
			want, err := originalSize(bytes.NewReader(c.head)) // names the problem if any
			if err != nil {
				return 0, err
			}
			c.want, c.head = want, nil
		}
	}
	if c.want >= 0 && c.n+int64(len(p)) > c.want {
		return 0, incomplete(c.format, c.n+int64(len(p)), c.want)
	}
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// finish reports whether the stream ended where its header says.
func (c *checkedWriter) finish() error {
	if c.want < 0 {
		_, err := originalSize(bytes.NewReader(c.head))
		if err == nil {
			err = fmt.Errorf("compressed: internal error: a complete header was not parsed")
		}
		return err
	}
	if c.n != c.want {
		return incomplete(c.format, c.n, c.want)
	}
	return nil
}
