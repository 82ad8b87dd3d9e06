package safetensors

import (
	"errors"
	"fmt"
	"io"

	"github.com/gosafetensors/safetensors/internal/fault"
)

// decodeChunk is the bytes read at a time by Float32Into and Float64Into for
// a tensor that is not in memory.
const decodeChunk = 1 << 20

// ChunkAt returns up to len(buf) bytes of the tensor starting at byte off:
// a zero-copy view when the tensor's bytes are in memory (a mapped file, a
// sliced or constructed tensor), otherwise the bytes read into buf. It lets
// streaming code walk tensors of any size with one bounded buffer and no
// copy when none is needed. At the end of the tensor it returns io.EOF.
func (t *Tensor) ChunkAt(buf []byte, off int64) ([]byte, error) {
	size := t.Size()
	if off < 0 || off > size {
		return nil, t.errorf("read at offset %d outside the tensor's %d bytes", off, size)
	}
	if off == size {
		return nil, io.EOF
	}
	if len(buf) == 0 {
		return nil, fmt.Errorf("%s: tensor %q: %w: ChunkAt needs a non-empty buffer", t.fileName(), t.Name, ErrBufferSize)
	}
	n := min(int64(len(buf)), size-off)
	if t.data != nil || t.src == nil {
		return t.data[off : off+n], nil
	}
	m, err := t.src.ReadAt(buf[:n], t.off+off)
	if int64(m) < n {
		if err == nil || errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return nil, fmt.Errorf("%s: tensor %q: reading %d bytes at byte %d: %w", t.fileName(), t.Name, n, t.off+off, err)
	}
	return buf[:n], nil
}

// Float32Into converts the tensor's elements into dst (see [DecodeFloat32]),
// which must have exactly NumElements() elements. A tensor in memory is
// converted in place on all cores; one read from a file or remote source
// goes through a bounded buffer, never a copy of the whole tensor.
func (t *Tensor) Float32Into(dst []float32) error {
	return decodeInto(t, dst, DecodeFloat32)
}

// Float64Into converts the tensor's elements into dst (see [DecodeFloat64]).
func (t *Tensor) Float64Into(dst []float64) error {
	return decodeInto(t, dst, DecodeFloat64)
}

func decodeInto[F float32 | float64](t *Tensor, dst []F, decode func([]F, []byte, DType) error) error {
	if !CanDecode(t.DType) {
		e := tensorError(ErrDTypeMismatch, t.Name, -1, "no conversion from %s to %T", t.DType, F(0))
		e.File = t.file
		return e
	}
	n := t.NumElements()
	if int64(len(dst)) != n {
		return fmt.Errorf("%s: tensor %q: %w: %d elements into a buffer of %d", t.fileName(), t.Name, ErrBufferSize, n, len(dst))
	}
	if t.data != nil || t.src == nil {
		if !t.mapped {
			return decode(dst, t.data, t.DType)
		}
		var derr error
		if err := fault.CatchIn(t.data, func() error { derr = decode(dst, t.data, t.DType); return nil }); err != nil {
			return t.mappedErr(err)
		}
		return derr
	}
	buf := make([]byte, min(t.Size(), decodeChunk))
	per := int64(t.DType.Size()) // bytes per element; 0 for F4 (two per byte)
	for off := int64(0); off < t.Size(); {
		b, err := t.ChunkAt(buf, off)
		if err != nil {
			return err
		}
		first, count := off, int64(len(b))*2
		if per > 0 {
			first, count = off/per, int64(len(b))/per
		} else {
			first = off * 2
		}
		if err := decode(dst[first:first+count], b, t.DType); err != nil {
			return err
		}
		off += int64(len(b))
	}
	return nil
}
