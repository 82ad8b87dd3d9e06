package pickle

import (
	"errors"
	"fmt"
	"strconv"
)

// Sentinel errors; every *Error the machine returns matches one of them.
var (
	// ErrNotAllowed reports an opcode that would run code in a real
	// unpickler (INST, OBJ, NEWOBJ, EXT codes, APPEND or SETITEM onto
	// something that is not a list or dict).
	ErrNotAllowed = errors.New("not allowed")
	// ErrUnsupported reports a well-formed construct the machine does not
	// model as data (text persistent ids, out-of-band buffers, sets).
	ErrUnsupported = errors.New("unsupported")
	// ErrCorrupt reports a malformed pickle: an unknown opcode, a stack
	// underflow, a length past the end, a bad literal.
	ErrCorrupt = errors.New("corrupt")
	// ErrLimit reports a pickle past one of the caps in Limits.
	ErrLimit = errors.New("limit exceeded")
	// ErrRaises reports, in an exact audit (Walks.SetExact), where
	// CPython's unpickler raises having imported and called nothing: a
	// call of a value the pickle built (None, an int, a str, a list...),
	// which is not callable, APPEND onto a tuple, out-of-band buffers
	// torch.load never passes. A Policy may return it too (a persistent
	// id without a persistent_load). CPython reads nothing after it, so
	// no walker goes on from there.
	ErrRaises = errors.New("CPython's unpickler raises")
)

// Error describes why the machine stopped.
type Error struct {
	Kind   error  // ErrNotAllowed, ErrUnsupported, ErrCorrupt, ErrLimit or ErrRaises
	Offset int64  // of the opcode (or byte) inside the stream, -1 if unknown
	Global string // module.name of the refused callable, if the refusal names one
	Msg    string
	Err    error // an underlying I/O error, if any
}

// Error formats the error as "offset N: message".
func (e *Error) Error() string {
	s := e.Msg
	if e.Offset >= 0 {
		s = "offset " + strconv.FormatInt(e.Offset, 10) + ": " + s
	}
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

// Unwrap returns the kind and the underlying error, if any.
func (e *Error) Unwrap() []error {
	if e.Err != nil {
		return []error{e.Kind, e.Err}
	}
	return []error{e.Kind}
}

func errorf(kind error, off int64, format string, args ...any) *Error {
	return &Error{Kind: kind, Offset: off, Msg: fmt.Sprintf(format, args...)}
}
