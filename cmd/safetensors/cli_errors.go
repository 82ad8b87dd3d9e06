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
