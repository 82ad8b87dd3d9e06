package compressed

import (
	"errors"
	"fmt"
	"strings"

	"github.com/gosafetensors/safetensors"
)

// Sentinel errors, usable with errors.Is. A *Error wraps one of them.
var (
	// ErrNotCompressed: the input is not one of the compressed formats.
	ErrNotCompressed = errors.New("not a compressed safetensors file")
	// ErrNotSeekable: a plain zstd or lz4 stream without a seek table;
	// it can be decompressed as a whole but not read at random.
	ErrNotSeekable = errors.New("compressed stream has no seek table")
	// ErrCorrupt: the compressed data, seek table or chunk index is invalid.
	ErrCorrupt = errors.New("corrupt compressed data")
	// ErrChecksum: a frame or chunk decompressed to bytes whose checksum
	// does not match the one stored.
	ErrChecksum = errors.New("checksum mismatch")
	// ErrLimit: a frame, chunk or table claims more than the configured caps.
	ErrLimit = errors.New("compressed data exceeds a limit")
	// ErrMaxSize: the original is larger than [WithMaxSize] allows. It
	// wraps ErrLimit.
	ErrMaxSize = fmt.Errorf("%w: original larger than the maximum size", ErrLimit)
	// ErrExists: the output file exists and WithOverwrite was not given.
	// It is safetensors.ErrExists, shared by every package that writes.
	ErrExists = safetensors.ErrExists
	// ErrOption: an option was given an invalid value (a nil Option
	// included). It is safetensors.ErrOption, the sentinel every package
	// of the module wraps.
	ErrOption = safetensors.ErrOption
)

// Error describes a problem in a compressed file: which file, which frame
// or chunk (or -1) and which byte offset of the compressed file (or -1).
type Error struct {
	File   string
	Frame  int   // frame or chunk index, -1 if none
	Offset int64 // byte offset in the compressed file, -1 if unknown
	Msg    string
	Err    error // one of the sentinels above
	Cause  error // what was found wrong underneath (e.g. a *safetensors.FormatError), or nil
}

func (e *Error) Error() string {
	var b strings.Builder
	if e.File != "" {
		b.WriteString(e.File)
		b.WriteString(": ")
	}
	if e.Frame >= 0 {
		fmt.Fprintf(&b, "frame %d: ", e.Frame)
	}
	b.WriteString(e.Msg)
	if e.Cause != nil {
		b.WriteString(": ")
		b.WriteString(e.Cause.Error())
	}
	if e.Offset >= 0 {
		fmt.Fprintf(&b, " (at byte %d)", e.Offset)
	}
	return b.String()
}

// Unwrap returns the sentinel and the cause, for errors.Is and errors.As.
func (e *Error) Unwrap() []error {
	if e.Cause == nil {
		return []error{e.Err}
	}
	return []error{e.Err, e.Cause}
}

func newErr(sentinel error, frame int, off int64, format string, args ...any) *Error {
	return &Error{Frame: frame, Offset: off, Msg: fmt.Sprintf(format, args...), Err: sentinel}
}

// withFile sets the file name on a *Error (if err is one and has none).
func withFile(err error, name string) error {
	var e *Error
	if name != "" && errors.As(err, &e) && e.File == "" {
		e.File = name
	}
	return err
}
