package safetensors

import (
	"errors"
	"fmt"
	"strings"

	"github.com/gosafetensors/safetensors/internal/bug"
)

// Sentinel errors, one per error variant of the reference implementation.
// Every error returned while parsing or validating a file wraps one of them
// and is a [*FormatError]; test with errors.Is and errors.As.
var (
	// ErrHeaderTooSmall: the file is shorter than the 8-byte length prefix.
	ErrHeaderTooSmall = errors.New("HeaderTooSmall")
	// ErrHeaderTooLarge: the header length exceeds the limit (100,000,000 by default).
	ErrHeaderTooLarge = errors.New("HeaderTooLarge")
	// ErrInvalidHeaderLength: the header runs past the end of the file.
	ErrInvalidHeaderLength = errors.New("InvalidHeaderLength")
	// ErrInvalidHeader: the header is not valid UTF-8.
	ErrInvalidHeader = errors.New("InvalidHeader")
	// ErrInvalidHeaderDeserialization: the header is not the JSON the format requires.
	ErrInvalidHeaderDeserialization = errors.New("InvalidHeaderDeserialization")
	// ErrInvalidOffset: data_offsets leave a gap, overlap or run backwards.
	ErrInvalidOffset = errors.New("InvalidOffset")
	// ErrValidationOverflow: a size computed from the header overflows 64 bits.
	ErrValidationOverflow = errors.New("ValidationOverflow")
	// ErrMisalignedSlice: a tensor or slice does not cover whole bytes.
	ErrMisalignedSlice = errors.New("MisalignedSlice")
	// ErrTensorInvalidInfo: data_offsets disagree with dtype and shape.
	ErrTensorInvalidInfo = errors.New("TensorInvalidInfo")
	// ErrMetadataIncompleteBuffer: the data section is not exactly covered by the tensors.
	ErrMetadataIncompleteBuffer = errors.New("MetadataIncompleteBuffer")
	// ErrTensorNotFound: no tensor has the requested name.
	ErrTensorNotFound = errors.New("TensorNotFound")
	// ErrSliceOutOfRange: a slice index lies outside the tensor.
	ErrSliceOutOfRange = errors.New("SliceOutOfRange")
	// ErrInvalidSlice: a slice specification is malformed.
	ErrInvalidSlice = errors.New("InvalidSlice")
	// ErrDTypeMismatch: typed access asked for a Go type that does not match the tensor's dtype.
	ErrDTypeMismatch = errors.New("DTypeMismatch")
	// ErrOption: an invalid option value was passed.
	ErrOption = errors.New("invalid option")
	// ErrClosed: the file was closed.
	ErrClosed = errors.New("file already closed")
)

// Sentinels for writing, shared by every package of the module that writes
// files (convert, sharded, compressed), as ErrOption is shared for options:
// errors.Is(err, safetensors.ErrExists) holds whichever package wrote.
var (
	// ErrExists: an output file exists and overwriting was not asked for;
	// nothing was written.
	ErrExists = errors.New("output exists")
	// ErrOutputIsInput: an output would replace a file being read (even
	// with overwriting allowed); nothing was written.
	ErrOutputIsInput = errors.New("output is one of the inputs")
	// ErrVerify: a written file did not read back as what was written (a
	// disk or file-system problem); the output was removed.
	ErrVerify = errors.New("verification failed")
)

// ErrInternal is wrapped by the error of an operation that stopped on a
// bug in this module (a panic recovered by a scan, a validation, torch's
// Open or an audit worker): the file was not judged, and the error is no
// verdict on it (audit reports verdict "error", scan and validate exit 2).
var ErrInternal = bug.ErrInternal

// FormatError describes a problem with a file or with a request made of it.
// Offset is the absolute byte offset in the file where the problem was found,
// or -1 when unknown.
type FormatError struct {
	File   string // file name, if known
	Tensor string // tensor name, if the problem concerns one tensor
	Offset int64  // absolute byte offset in the file, or -1
	Msg    string // what is wrong, in plain words
	Err    error  // the sentinel for the variant, e.g. ErrInvalidOffset

	named bool // Tensor is meaningful even when empty ("" is a valid name)
}

func (e *FormatError) Error() string {
	var b strings.Builder
	if e.File != "" {
		b.WriteString(e.File)
		b.WriteString(": ")
	}
	if e.Tensor != "" || e.named {
		fmt.Fprintf(&b, "tensor %q: ", e.Tensor)
	}
	b.WriteString(e.Msg)
	switch {
	case e.Err != nil && e.Offset >= 0:
		fmt.Fprintf(&b, " (%s at byte %d)", e.Err.Error(), e.Offset)
	case e.Err != nil:
		fmt.Fprintf(&b, " (%s)", e.Err.Error())
	case e.Offset >= 0:
		fmt.Fprintf(&b, " (at byte %d)", e.Offset)
	}
	return b.String()
}

// Unwrap returns the variant's sentinel.
func (e *FormatError) Unwrap() error { return e.Err }

// Variant returns the reference implementation's name for the error, such as
// "InvalidOffset".
func (e *FormatError) Variant() string {
	if e.Err == nil {
		return ""
	}
	return e.Err.Error()
}

func newError(sentinel error, offset int64, format string, args ...any) *FormatError {
	return &FormatError{Offset: offset, Msg: fmt.Sprintf(format, args...), Err: sentinel}
}

func tensorError(sentinel error, tensor string, offset int64, format string, args ...any) *FormatError {
	e := newError(sentinel, offset, format, args...)
	e.Tensor, e.named = tensor, true
	return e
}

// withFile sets the file name of a *FormatError, leaving other errors alone.
func withFile(err error, name string) error {
	var fe *FormatError
	if name != "" && errors.As(err, &fe) && fe.File == "" {
		fe.File = name
	}
	return err
}
