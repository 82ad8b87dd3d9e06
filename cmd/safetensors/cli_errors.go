package main

import (
	"errors"
	"fmt"

	"github.com/gosafetensors/safetensors"
	"github.com/gosafetensors/safetensors/compressed"
	"github.com/gosafetensors/safetensors/convert"
	"github.com/gosafetensors/safetensors/sharded"
	"github.com/gosafetensors/safetensors/source"
	"github.com/gosafetensors/safetensors/torch"
)

// exitRule is the one exit-status rule every command follows, as the root
// --help states it (and docs/cli-conventions.md).
const exitRule = `Exit status, the same for every command:
  0  ok
  1  problems found in the content: an invalid safetensors file or index,
     a checkpoint refused (dangerous, unsupported, corrupt), something that
     is not a model where one was named (an HTML page, an LFS pointer);
     for diff, the models differ; for scan, a file is not clean
  2  could not check: a location that cannot be read or does not exist, a
     folder with no model, a tensor or --filter that names nothing, a usage
     mistake, an output that exists (without --force) or is an input, a
     write or verification that failed; 130 when interrupted`

// usageError is a mistake on the command line: exit 2.
func usageError(format string, args ...any) error {
	return &exitError{Code: exitNoCheck, Err: fmt.Errorf(format, args...)}
}

// exitFor applies the exit-status rule to an error: exit 2 when the input
// could not be checked (read, found, or asked for sensibly), 1 when it was
// read and is wrong. An *exitError keeps its status.
func exitFor(err error) error {
	if err == nil {
		return nil
	}
	var ee *exitError
	if errors.As(err, &ee) {
		return err
	}
	return &exitError{Code: exitCode(err), Err: withViewHint(err)}
}

// withViewHint leads the refusal to materialise an expanded or
// overlapping view of a PyTorch checkpoint (torch.ErrExpandedView) with
// what the user can do.
func withViewHint(err error) error {
	if !errors.Is(err, torch.ErrExpandedView) {
		return err
	}
	return &hintError{err: err, hint: "a tensor of this checkpoint is an expanded view, or one of many overlapping views of one storage (a few stored bytes standing for many), beyond what the file holds; " +
		"--expand-views reads up to 64x the checkpoint's size or 64MiB beyond its stored bytes, --expand-views=SIZE up to SIZE"}
}

// exitCode is the status exitFor gives err.
func exitCode(err error) int {
	if source.IsIOError(err) {
		return exitNoCheck
	}
	for _, noCheck := range []error{
		safetensors.ErrTensorNotFound, // a name the user gave
		safetensors.ErrSliceOutOfRange, safetensors.ErrInvalidSlice, safetensors.ErrDTypeMismatch,
		source.ErrNoModel,
		safetensors.ErrExists, safetensors.ErrOutputIsInput,
		safetensors.ErrVerify, // the disk wrote what it did not read back
		safetensors.ErrOption,
	} {
		if errors.Is(err, noCheck) {
			return exitNoCheck
		}
	}
	var (
		fe *safetensors.FormatError
		ie *sharded.IndexError
		ce *source.ContentError
		te *torch.Error
		xe *compressed.Error
	)
	if errors.As(err, &fe) || errors.As(err, &ie) || errors.As(err, &ce) || errors.As(err, &te) || errors.As(err, &xe) {
		return exitProblems
	}
	for _, problem := range []error{
		torch.ErrNotAllowed, torch.ErrUnsupported, torch.ErrCorrupt, torch.ErrLimit,
		convert.ErrInput,
		sharded.ErrInvalidIndex, sharded.ErrUnsafeName, sharded.ErrMismatch,
		compressed.ErrNotCompressed, compressed.ErrNotSeekable, compressed.ErrCorrupt, compressed.ErrChecksum, compressed.ErrLimit,
		safetensors.ErrWrite, // a source whose tensors do not match its own header
	} {
		if errors.Is(err, problem) {
			return exitProblems
		}
	}
	return exitNoCheck
}

// hintError is an error led by a plain-words diagnosis, as
// source.ContentError prints: the diagnosis first, the error as details.
type hintError struct {
	err  error
	hint string
}

func (e *hintError) Error() string { return e.hint + "\n  details: " + e.err.Error() }
func (e *hintError) Unwrap() error { return e.err }
