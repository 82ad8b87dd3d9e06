package compressed

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"

	"github.com/gosafetensors/safetensors"
	"github.com/gosafetensors/safetensors/internal/atomicfile"
)

// CompressFile compresses the safetensors file in to out (see [Compress]).
// The output is written atomically: a temporary file in out's directory,
// synced, then renamed; nothing is left behind on error, and in is never
// changed (out may not be in itself). Cancelling ctx stops the work and
// removes the temporary file.
func CompressFile(ctx context.Context, in, out string, opts ...WriteOption) (*Result, error) {
	c, err := writeConfig("CompressFile", true, append([]WriteOption{WithName(in)}, opts...))
	if err != nil {
		return nil, err
	}
	return convertFile(in, out, c, func(dst *atomicfile.File, src *os.File, size int64) (*Result, error) {
		return compress(ctx, dst, src, size, c)
	})
}

// DecompressFile restores the original file from the compressed file in
// (see [Decompress]), writing out atomically like [CompressFile].
func DecompressFile(ctx context.Context, in, out string, opts ...ReadOption) (*Result, error) {
	c, err := readConfig("DecompressFile", false, true, append([]ReadOption{WithName(in)}, opts...))
	if err != nil {
		return nil, err
	}
	return convertFile(in, out, c, func(dst *atomicfile.File, src *os.File, size int64) (*Result, error) {
		return decompress(ctx, dst, src, size, c)
	})
}

func convertFile(in, out string, c config, run func(*atomicfile.File, *os.File, int64) (*Result, error)) (*Result, error) {
	src, err := os.Open(in)
	if err != nil {
		return nil, err
	}
	defer src.Close()
	st, err := src.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("compressed: %s is not a regular file", in)
	}
	if ost, err := os.Stat(out); err == nil {
		if _, same := atomicfile.OutputIsInput(out, []atomicfile.Input{{Name: in, Info: st}}); same {
			return nil, fmt.Errorf("compressed: %s: %w: output is the input file", out, safetensors.ErrOutputIsInput)
		}
		if !c.overwrite {
			return nil, fmt.Errorf("compressed: %s: %w", out, ErrExists)
		}
		if ost.IsDir() {
			return nil, fmt.Errorf("compressed: %s is a directory", out)
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	dst, err := atomicfile.Create(out)
	if err != nil {
		return nil, err
	}
	defer dst.Abort()
	res, err := run(dst, src, st.Size())
	if err != nil {
		return nil, err
	}
	if err := dst.Commit(); err != nil {
		return nil, err
	}
	return res, nil
}

var _ io.WriterAt = (*atomicfile.File)(nil)
