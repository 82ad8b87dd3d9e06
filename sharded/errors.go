package sharded

import (
	"errors"
	"fmt"
	"strings"

	"github.com/gosafetensors/safetensors"
)

// Sentinel errors. Problems with what an index or a shard says are
// [*IndexError] values wrapping one of the first three; I/O errors are
// returned wrapped with %w, never turned into these.
var (
	// ErrInvalidIndex: the index file is not a valid model.safetensors.index.json.
	ErrInvalidIndex = errors.New("invalid index")
	// ErrUnsafeName: the index names a shard that is not a plain file name
	// in the model's directory ("..", an absolute path, a separator, a URL).
	ErrUnsafeName = errors.New("unsafe shard name")
	// ErrMismatch: the index and the shards disagree (a tensor missing from
	// its shard, in two shards, or in no weight_map entry).
	ErrMismatch = errors.New("index and shards disagree")
	// ErrNoModel: a directory holds no safetensors model, or several.
	ErrNoModel = errors.New("no model found")
	// ErrExists: an output exists and overwriting was not asked for. It
	// is safetensors.ErrExists, shared by every package that writes.
	ErrExists = safetensors.ErrExists
	// ErrOutputIsInput: an output would replace a file the source reads
	// (a shard or the index), even with overwriting allowed. It is
	// safetensors.ErrOutputIsInput.
	ErrOutputIsInput = safetensors.ErrOutputIsInput
	// ErrVerify: a written file did not read back as what was written. It
	// is safetensors.ErrVerify.
	ErrVerify = safetensors.ErrVerify
	// ErrOption: an option was given an invalid value (a nil option
	// included). It is safetensors.ErrOption, the sentinel every package
	// of the module wraps.
	ErrOption = safetensors.ErrOption
)

// IndexError describes what is wrong with an index or with a shard it
// names. Index is the index's name (a path or URL), Shard and Tensor are set
// when the problem concerns one of them.
type IndexError struct {
	Index  string
	Shard  string
	Tensor string
	Msg    string
	Err    error // ErrInvalidIndex, ErrUnsafeName or ErrMismatch

	hasTensor bool // Tensor is meaningful even when empty ("" is a valid name)
}

func (e *IndexError) Error() string {
	var b strings.Builder
	if e.Index != "" {
		b.WriteString(e.Index)
		b.WriteString(": ")
	}
	if e.Shard != "" {
		fmt.Fprintf(&b, "shard %s: ", e.Shard)
	}
	if e.Tensor != "" || e.hasTensor {
		fmt.Fprintf(&b, "tensor %q: ", e.Tensor)
	}
	b.WriteString(e.Msg)
	if e.Err != nil {
		fmt.Fprintf(&b, " (%v)", e.Err)
	}
	return b.String()
}

// Unwrap returns the sentinel.
func (e *IndexError) Unwrap() error { return e.Err }

func indexErr(sentinel error, index, shard string, format string, args ...any) *IndexError {
	return &IndexError{Index: index, Shard: shard, Msg: fmt.Sprintf(format, args...), Err: sentinel}
}

func tensorErr(sentinel error, index, shard, tensor string, format string, args ...any) *IndexError {
	e := indexErr(sentinel, index, shard, format, args...)
	e.Tensor, e.hasTensor = tensor, true
	return e
}
