package torch

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/gosafetensors/safetensors/internal/redact"
)

// Sentinel errors; every *Error matches exactly one of them with errors.Is.
var (
	// ErrNotAllowed reports a global, opcode or construct that could run code
	// (or is simply not on the allowlist); the message names the module.name.
	ErrNotAllowed = errors.New("not allowed")
	// ErrUnsupported reports a well-formed input this package does not convert
	// (quantized or sparse tensors, TorchScript archives, big-endian data, ...).
	ErrUnsupported = errors.New("unsupported")
	// ErrCorrupt reports a malformed or inconsistent file.
	ErrCorrupt = errors.New("corrupt")
	// ErrLimit reports an input that exceeds one of the resource caps in Limits.
	ErrLimit = errors.New("limit exceeded")
)

// Error describes why a checkpoint was refused.
type Error struct {
	Path   string // file name given to Open/NewReader/Scan
	Entry  string // zip member ("archive/data.pkl") or legacy part ("pickle 4"); may be empty
	Offset int64  // byte offset inside Entry (or the file when Entry is empty); -1 if unknown
	Global string // module.name of the refused global, if the refusal is about one
	Kind   error  // ErrNotAllowed, ErrUnsupported, ErrCorrupt or ErrLimit
	Msg    string // human-readable reason
	Err    error  // underlying error (I/O), if any
}

// Error formats the error as "path: entry offset N: message".
func (e *Error) Error() string {
	var b strings.Builder
	if e.Path != "" {
		b.WriteString(e.Path)
		b.WriteString(": ")
	}
	if e.Entry != "" {
		b.WriteString(e.Entry)
		if e.Offset >= 0 {
			b.WriteString(" offset ")
			b.WriteString(strconv.FormatInt(e.Offset, 10))
		}
		b.WriteString(": ")
	} else if e.Offset >= 0 {
		b.WriteString("offset ")
		b.WriteString(strconv.FormatInt(e.Offset, 10))
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	if e.Err != nil {
		b.WriteString(": ")
		b.WriteString(redact.Unnamed(e.Err.Error(), e.Path)) // the path named once
	}
	return b.String()
}

// Unwrap returns the sentinel kind and the underlying error, if any.
func (e *Error) Unwrap() []error {
	errs := make([]error, 0, 2)
	if e.Kind != nil {
		errs = append(errs, e.Kind)
	}
	if e.Err != nil {
		errs = append(errs, e.Err)
	}
	return errs
}

// newError builds an *Error without a path; the caller at the API boundary
// fills in Path.
func newError(kind error, entry string, off int64, format string, args ...any) *Error {
	return &Error{Kind: kind, Entry: entry, Offset: off, Msg: fmt.Sprintf(format, args...)}
}

// withPath stamps the file name on err (if it is an *Error without one) or
// wraps a foreign error as ErrCorrupt so callers always get an *Error.
func withPath(err error, path string) error {
	if err == nil {
		return nil
	}
	var e *Error
	if errors.As(err, &e) {
		if e.Path == "" {
			e.Path = path
		}
		return err
	}
	return &Error{Path: path, Offset: -1, Kind: ErrCorrupt, Msg: "read failed", Err: err}
}

// isGlobalRefusal reports whether err refuses a global or a code-running
// construct; such errors take priority over structural problems so that the
// dangerous name is always what the user sees.
func isGlobalRefusal(err error) bool {
	var e *Error
	if !errors.As(err, &e) {
		return false
	}
	return e.Kind == ErrNotAllowed || (e.Kind == ErrUnsupported && e.Global != "")
}

// withEntry turns an error of the pickle stream into an *Error naming
// entry (see policy.fromPickle).
func withEntry(err error, entry string) error { return (&policy{entry: entry}).fromPickle(err) }

// truncate returns b for a message, cut at 80 bytes.
func truncate(b []byte) string {
	if len(b) > 80 {
		return string(b[:80]) + "..."
	}
	return string(b)
}
