// Package bug turns a panic recovered at one of the project's last lines
// of defence (a scan, a validation, an audit worker) into an error that
// says what it is: a bug in this program, not a finding about the file.
// A verdict is never made of a panic: the file was not judged.
//
// The fault of reading a memory-mapped file that shrank underneath
// (debug.SetPanicOnFault) is not a bug but a failed read: [Recovered]
// returns it as an I/O error (internal/fault).
package bug

import (
	"errors"
	"fmt"
	"runtime/debug"

	"github.com/gosafetensors/safetensors/internal/fault"
)

// ErrInternal is wrapped by every error made of a recovered panic
// (exported as safetensors.ErrInternal).
var ErrInternal = errors.New("internal error: this is a bug in gosafetensors, please report it")

// Error is a recovered panic: what was being done, the panic's value and
// the goroutine's stack where it was recovered.
type Error struct {
	Op    string // what was being done, naming the file: "scanning model.bin"
	Value any    // what panic was called with
	Stack []byte // debug.Stack() at the recovery
}

func (e *Error) Error() string {
	return fmt.Sprintf("%s: %v (%s)", e.Op, e.Value, ErrInternal)
}

// Is reports ErrInternal.
func (e *Error) Is(target error) bool { return target == ErrInternal }

// Recovered returns the error for p, a value recover returned while doing
// op (which names the file): a memory fault as fault.ErrFault (an I/O
// error), anything else as an [*Error] wrapping [ErrInternal].
func Recovered(op string, p any) error {
	if fe, ok := p.(interface{ Addr() uintptr }); ok {
		return fmt.Errorf("%s: %w", op, fault.Error(fe.Addr()))
	}
	return &Error{Op: op, Value: p, Stack: debug.Stack()}
}

// Catch is deferred by a function returning *err on a goroutine of its
// own (an errgroup's), where a panic would end the process: it recovers
// the panic and sets *err to [Recovered]'s error for op.
func Catch(err *error, op string) {
	if p := recover(); p != nil {
		*err = Recovered(op, p)
	}
}
