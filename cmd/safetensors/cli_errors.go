package main

import (
	"fmt"
)

// fileProblem is locationProblem, for commands written before the opener.
func fileProblem(path string, err error) error { return locationProblem(path, err) }

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
