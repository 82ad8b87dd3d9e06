package source

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/gosafetensors/safetensors"
	"github.com/gosafetensors/safetensors/internal/rangeread"
	"github.com/gosafetensors/safetensors/internal/redact"
	"github.com/gosafetensors/safetensors/sharded"
)

// Object is one opened file or remote object: its bytes at offsets, its
// size, and its format, detected once from its content.
type Object struct {
	Name   string // the location as given (URLs without credentials)
	Size   int64
	Format Format
	Hint   string // plain words on what unrecognised content looks like
	Prefix []byte // the first bytes (up to PrefixSize), as read at open

	r      io.ReaderAt
	file   *os.File           // a local file, for mapping
	dir    *sharded.DirOpener // the directory a local file was opened through, if any
	closer io.Closer
	// container reads a Compressed object: the decompressor registered
	// with the root package that recognised it
	container *safetensors.Decompressor
	sibling   func(ctx context.Context, rel string) (*Object, error)
	ioErr     ioErrBox
}

// ReadAt reads from the object. The first failure is remembered, so that
// a decoder's complaint about a short read is reported as the I/O error it
// was. Only a read that reaches the size the object had when it was opened
// may end in io.EOF: an end before it (a file truncated underneath, a
// connection closed early, whose error wraps io.EOF too) is a failure to
// read, returned as an *IOError.
func (o *Object) ReadAt(p []byte, off int64) (int, error) {
	n, err := o.r.ReadAt(p, off)
	if err == nil {
		return n, nil
	}
	if err == io.EOF && (off < 0 || off+int64(n) >= o.Size) {
		return n, err
	}
	if errors.Is(err, io.EOF) && !IsIOError(err) {
		err = &IOError{Location: o.Name, Op: "read", Err: fmt.Errorf("%s: it ended at byte %d, but it had %d bytes when it was opened: %w",
			o.Name, off+int64(n), o.Size, errShrank)}
	}
	o.ioErr.record(err)
	return n, err
}

// errShrank is wrapped by the error of a read that found an object
// shorter than it was when it was opened (a file truncated or replaced
// while it was being read).
var errShrank = errors.New("it changed while it was being read")

// Err returns the first read error the object has seen (io.EOF aside), or
// nil: a decoder that stopped part-way may have stopped because of it.
func (o *Object) Err() error {
	if p := o.ioErr.Load(); p != nil {
		return *p
	}
	return nil
}

// ReadRuns reads many byte runs; see safetensors.RunReader.
func (o *Object) ReadRuns(bufs [][]byte, offs []int64) error {
	if rr, ok := o.r.(interface {
		ReadRuns([][]byte, []int64) error
	}); ok {
		err := rr.ReadRuns(bufs, offs)
		if err != nil {
			o.ioErr.record(err)
		}
		return err
	}
	for i, b := range bufs {
		n, err := o.ReadAt(b, offs[i])
		if err != nil && !(errors.Is(err, io.EOF) && n == len(b)) {
			return err
		}
	}
	return nil
}

// Prefetch announces byte ranges about to be read to a remote reader,
// which fetches them together (see rangeread.Prefetcher); for a local
// file it does nothing.
func (o *Object) Prefetch(offs, lens []int64) error {
	if p, ok := o.r.(rangeread.Prefetcher); ok {
		return p.Prefetch(offs, lens)
	}
	return nil
}

// ReaderAt returns the object's underlying reader (an *os.File, an HTTP
// range reader, a bucket object), which may implement
// safetensors.RunReader.
func (o *Object) ReaderAt() io.ReaderAt { return o.r }

// Local reports whether the object is a local file.
func (o *Object) Local() bool { return o.file != nil }

// Close releases the object.
func (o *Object) Close() error {
	if o.closer == nil {
		return nil
	}
	err := o.closer.Close()
	o.closer = nil
	return err
}

// Sibling opens the object at rel, a plain name relative to this object's
// folder (a shard beside its index). rel must already have been checked to
// be a plain relative name.
func (o *Object) Sibling(ctx context.Context, rel string) (*Object, error) {
	if o.sibling == nil {
		return nil, fmt.Errorf("%s: cannot open %q beside it", o.Name, rel)
	}
	return o.sibling(ctx, rel)
}

// NewObject makes an Object of r (size bytes), its format detected from
// its content as [Open] does, for bytes the caller opened itself: a file
// opened inside an [os.Root], an upload spooled to disk. name is how
// errors and reports name it. Closing the Object closes closer, if not
// nil; sibling, if not nil, opens a file beside it (the shards of an
// index), else the Object has no siblings. The Object is read through
// ReadAt only (never mapped), and an index's shards only through sibling.
func NewObject(name string, r io.ReaderAt, size int64, closer io.Closer, sibling func(ctx context.Context, rel string) (*Object, error)) (*Object, error) {
	if size < 0 {
		return nil, fmt.Errorf("source: NewObject %s: negative size %d", name, size)
	}
	o, err := newObject(name, r, size, closer)
	if err != nil {
		return nil, err
	}
	o.sibling = sibling
	return o, nil
}

// newObject reads the prefix of r and detects its format.
func newObject(name string, r io.ReaderAt, size int64, closer io.Closer) (*Object, error) {
	o := &Object{Name: name, Size: size, r: r, closer: closer}
	buf := make([]byte, min(size, PrefixSize))
	n, err := r.ReadAt(buf, 0)
	if err != nil && !(errors.Is(err, io.EOF) && n == len(buf)) {
		return nil, &IOError{Location: name, Op: "read", Err: err}
	}
	o.Prefix = buf[:n]
	if o.Format, o.Hint, o.container, err = detectPrefix(r, o.Prefix, size); err != nil {
		return nil, &IOError{Location: name, Op: "read", Err: err}
	}
	return o, nil
}

// IOError is a failure to read a location: the disk, the network, a
// timeout, a refusal to authenticate, a missing object. It says nothing
// about the content. Err is the cause (errors.Is and errors.As see it).
type IOError struct {
	Location string
	Op       string // "open", "read", "list"
	Err      error
}

func (e *IOError) Error() string {
	msg := e.Err.Error()
	if strings.Contains(msg, e.Location) || strings.Contains(msg, redact.Location(e.Location)) {
		return msg // the cause names it (as messages show it)
	}
	return e.Location + ": " + msg
}

func (e *IOError) Unwrap() error { return e.Err }

// ContentError says a location holds something that is not what was asked
// for: a page, a pointer, an archive, an unreadable checkpoint. It is about
// the bytes, so the CLI reports it as a problem found (exit 1).
type ContentError struct {
	Location string
	Format   Format
	Msg      string
	Hint     string
	Err      error // a format error from the decoder, if any
}

// Error leads with the diagnosis when there is one (what the bytes
// really are: a page, a pointer, an incomplete download), then the
// decoder's complaint as details:
//
//	page.safetensors: this is an HTML page, not a model: …
//	  details: not a safetensors file, a sharded model index or a PyTorch checkpoint
func (e *ContentError) Error() string {
	if e.Hint == "" {
		return e.Detail()
	}
	return e.Location + ": " + e.Hint + "\n  details: " + strings.TrimPrefix(e.Detail(), e.Location+": ")
}

// Detail is the error without the diagnosis: what was asked of the bytes
// and how they failed it.
func (e *ContentError) Detail() string {
	if e.Msg == "" && e.Err != nil {
		return e.Err.Error()
	}
	return e.Location + ": " + e.Msg
}

func (e *ContentError) Unwrap() error { return e.Err }

// ErrNotRegular is returned for a local path that is a FIFO, a device or a
// socket: reading it could block forever or never end.
var ErrNotRegular = errors.New("not a regular file")
