package main

import (
	"fmt"
)

// usageError is a mistake on the command line: exit 2.
func usageError(format string, args ...any) error {
	return &exitError{Code: exitNoCheck, Err: fmt.Errorf(format, args...)}
}

// hintError is an error followed by a plain-words explanation.
type hintError struct {
	err  error
	hint string
}

func (e *hintError) Error() string { return e.err.Error() + "\n  hint: " + e.hint }
func (e *hintError) Unwrap() error { return e.err }
