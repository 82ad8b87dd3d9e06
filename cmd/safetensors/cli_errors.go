package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/gosafetensors/safetensors"
	"github.com/gosafetensors/safetensors/internal/sniff"
)

// hintError is an error followed by a plain-words explanation.
type hintError struct {
	err  error
	hint string
}

func (e *hintError) Error() string { return e.err.Error() + "\n  hint: " + e.hint }
func (e *hintError) Unwrap() error { return e.err }

// fileProblem turns an error from opening a safetensors file into an
// *exitError: exit 1 for an invalid file (with a hint from sniff when it can
// tell what the file really is), exit 2 for one that could not be read.
func fileProblem(path string, err error) error {
	var fe *safetensors.FormatError
	if !errors.As(err, &fe) {
		return &exitError{Code: exitNoCheck, Err: err}
	}
	if h := hintFor(path, err); h != "" {
		err = &hintError{err: err, hint: h}
	}
	return &exitError{Code: exitProblems, Err: err}
}

// hintFor explains why path is not a valid safetensors file, or returns "".
func hintFor(path string, err error) string {
	f, oerr := os.Open(path)
	if oerr != nil {
		return ""
	}
	defer f.Close()
	st, serr := f.Stat()
	if serr != nil {
		return ""
	}
	return sniff.Explain(f, st.Size(), err)
}

// usageError is a mistake on the command line: exit 2.
func usageError(format string, args ...any) error {
	return &exitError{Code: exitNoCheck, Err: fmt.Errorf(format, args...)}
}
