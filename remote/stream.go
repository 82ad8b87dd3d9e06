package remote

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/gosafetensors/safetensors/internal/rangeread"
)

// LinkedETag returns the X-Linked-Etag the Hub reported when the file was
// opened (quoted, as sent: for an LFS file, its SHA-256), or "".
func (f *File) LinkedETag() string { return f.linked }

// ReadRangeFunc reads the n bytes at off with one range request and hands
// them to fn in order, as they arrive, in pieces of at most len(buf) bytes
// read into buf: fn(p, pos) gets the bytes at pos (p is buf's, valid
// until fn returns). Memory is buf, whatever n is: a download streams a
// range of gigabytes to disk through it. It bypasses the read-ahead cache
// and the prefix kept from the first request.
//
// The rules of every read hold: nothing of a response is handed over
// before its status, Content-Range and validators are checked, and a body
// longer than the range is an error. A transient failure (a reset, a
// stall, a 5xx) is retried, within the retry budget, by a request for the
// bytes not yet handed over, so a retry moves only what is missing. An
// error from fn stops the read and is returned (wrapped in an [*Error]).
func (f *File) ReadRangeFunc(ctx context.Context, off, n int64, buf []byte, fn func(p []byte, pos int64) error) error {
	bad := func(err error) error { return &Error{Name: f.name, Op: "read", Off: off, Len: n, Err: err} }
	switch {
	case f.closed.Load():
		return bad(ErrClosed)
	case off < 0 || n < 0 || off > f.size-n:
		return bad(fmt.Errorf("range outside the %d-byte object", f.size))
	case len(buf) == 0:
		return bad(errors.New("empty buffer"))
	case n == 0:
		return nil
	}
	pos, end := off, off+n
	r := &request{f: f, op: "read", off: off, n: n, rng: fmt.Sprintf("bytes=%d-%d", off, end-1)}
	r.consume = func(resp *http.Response, body io.Reader) error {
		if err := f.checkRangeStatus(resp, r.rng); err != nil {
			return err
		}
		if err := f.checkPartRange(resp.Header.Get("Content-Range"), rangeread.Span{Off: pos, End: end}); err != nil {
			return err
		}
		if resp.ContentLength >= 0 && resp.ContentLength != end-pos {
			return protocolf("Content-Length %d for a %d-byte range", resp.ContentLength, end-pos)
		}
		for pos < end {
			k, err := io.ReadFull(body, buf[:min(int64(len(buf)), end-pos)])
			if k > 0 {
				if ferr := fn(buf[:k], pos); ferr != nil {
					return permanent{ferr}
				}
				pos += int64(k)
				// A retry asks only for what was not handed over.
				r.rng = fmt.Sprintf("bytes=%d-%d", pos, end-1)
			}
			if err != nil {
				if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
					return fmt.Errorf("body ended %d bytes short of the range: %w", end-pos, io.ErrUnexpectedEOF)
				}
				return err
			}
		}
		var one [1]byte
		if m, _ := body.Read(one[:]); m > 0 {
			return protocolf("body longer than the %d-byte range %d-%d", n, off, end-1)
		}
		return nil
	}
	return f.conn.do(ctx, r)
}

// LastModified returns the Last-Modified pinned at open ("" if none).
func (f *File) LastModified() string { return f.lastMod }
