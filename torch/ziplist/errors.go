package ziplist

import (
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// Sentinel errors; every *Error and every Problem matches one of them.
var (
	// ErrFormat reports a malformed or inconsistent archive.
	ErrFormat = errors.New("ziplist: malformed zip archive")
	// ErrUnsupported reports what miniz reads but a torch checkpoint never
	// holds and this package does not interpret: multi-disk archives,
	// encrypted or compressed entries.
	ErrUnsupported = errors.New("ziplist: unsupported zip feature")
	// ErrLimit reports an archive with more entries than the caller allows.
	ErrLimit = errors.New("ziplist: too many entries")
)

// Error describes why an archive or entry cannot be read.
type Error struct {
	Kind   error  // ErrFormat, ErrUnsupported or ErrLimit
	Entry  string // the entry's name, "" for the archive
	Offset int64  // byte offset in the file, -1 if unknown
	Msg    string
	Err    error // an underlying I/O error, if any
}

// Error formats the error as "entry offset N: message".
func (e *Error) Error() string {
	var b strings.Builder
	if e.Entry != "" {
		b.WriteString(e.Entry)
		b.WriteString(" ")
	}
	if e.Offset >= 0 {
		b.WriteString("offset ")
		b.WriteString(strconv.FormatInt(e.Offset, 10))
	}
	if b.Len() > 0 {
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	if e.Err != nil {
		b.WriteString(": ")
		b.WriteString(e.Err.Error())
	}
	return b.String()
}

// Unwrap returns the kind and the underlying error, if any.
func (e *Error) Unwrap() []error {
	if e.Err != nil {
		return []error{e.Kind, e.Err}
	}
	return []error{e.Kind}
}

func newError(kind error, entry string, off int64, format string, args ...any) *Error {
	return &Error{Kind: kind, Entry: entry, Offset: off, Msg: fmt.Sprintf(format, args...)}
}

// readFull reads len(p) bytes at off: a short read is an ErrFormat *Error,
// another failure one that wraps the I/O error.
func readFull(r io.ReaderAt, p []byte, off int64) error {
	n, err := r.ReadAt(p, off)
	if n == len(p) {
		return nil
	}
	if err == nil || err == io.EOF || err == io.ErrUnexpectedEOF {
		return newError(ErrFormat, "", off+int64(n), "unexpected end of file")
	}
	return &Error{Kind: ErrFormat, Offset: off + int64(n), Msg: "read failed", Err: err}
}

// quote returns b for a message, cut at 80 bytes.
func quote(b []byte) string {
	if len(b) > 80 {
		return string(b[:80]) + "..."
	}
	return string(b)
}
