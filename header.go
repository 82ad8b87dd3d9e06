package safetensors

import (
	"encoding/binary"
	"fmt"
	"iter"
	"math"
	"slices"
)

// DefaultMaxHeaderSize is the largest header length accepted by default, the
// reference implementation's limit.
const DefaultMaxHeaderSize = 100_000_000

// metadataKey is the reserved header key holding the string-to-string map.
const metadataKey = "__metadata__"

// TensorInfo describes one tensor as the header declares it.
type TensorInfo struct {
	Name  string
	DType DType
	Shape []int64
	// DataOffsets are the begin and end of the tensor's bytes, relative to
	// the start of the data section (the byte after the header).
	DataOffsets [2]int64
}

// NumElements returns the number of elements: the product of the shape, 1
// for a scalar (empty shape).
func (t TensorInfo) NumElements() int64 {
	n := int64(1)
	for _, d := range t.Shape {
		n *= d
	}
	return n
}

// Size returns the size of the tensor's data in bytes.
func (t TensorInfo) Size() int64 { return t.DataOffsets[1] - t.DataOffsets[0] }

// Header is the parsed and validated header of a safetensors file.
type Header struct {
	// Metadata is the "__metadata__" map, or nil when the file has none.
	Metadata map[string]string
	// Tensors lists the tensors in file order (by data offset).
	Tensors []TensorInfo
	// Size is the header length N: the JSON, padding included.
	Size int64
	// Warnings lists things the format allows but a careful reader may want
	// to know, such as unknown fields in a tensor entry.
	Warnings []string

	index map[string]int
}

// DataOffset returns the absolute file offset of the data section.
func (h *Header) DataOffset() int64 { return 8 + h.Size }

// DataSize returns the size of the data section in bytes.
func (h *Header) DataSize() int64 {
	if len(h.Tensors) == 0 {
		return 0
	}
	return h.Tensors[len(h.Tensors)-1].DataOffsets[1]
}

// FileSize returns the size of a file holding this header and its data.
func (h *Header) FileSize() int64 { return h.DataOffset() + h.DataSize() }

// Len returns the number of tensors.
func (h *Header) Len() int { return len(h.Tensors) }

// Info returns the description of the named tensor.
func (h *Header) Info(name string) (TensorInfo, bool) {
	i, ok := h.lookup(name)
	if !ok {
		return TensorInfo{}, false
	}
	return h.Tensors[i], true
}

// Names returns the tensor names sorted bytewise, like the reference's keys().
func (h *Header) Names() []string {
	names := make([]string, len(h.Tensors))
	for i, t := range h.Tensors {
		names[i] = t.Name
	}
	slices.Sort(names)
	return names
}

// All iterates over the tensors in file order.
func (h *Header) All() iter.Seq2[string, TensorInfo] {
	return func(yield func(string, TensorInfo) bool) {
		for _, t := range h.Tensors {
			if !yield(t.Name, t) {
				return
			}
		}
	}
}

// options configures parsing.
type options struct {
	maxHeaderSize uint64
	name          string
	raw           bool // WithoutDecompression
}

// Option configures [Open], [NewReader] and [ReadHeader]. An invalid
// value makes the call fail with an error wrapping [ErrOption], never
// silently ignored.
type Option func(*options) error

// WithMaxHeaderSize sets the largest header length accepted, in bytes
// (0 to 2^63-1). The default is [DefaultMaxHeaderSize].
func WithMaxHeaderSize(n int64) Option {
	return func(o *options) error {
		if n < 0 {
			return fmt.Errorf("%w: WithMaxHeaderSize(%d): a size cannot be negative", ErrOption, n)
		}
		o.maxHeaderSize = uint64(n)
		return nil
	}
}

func buildOptions(opts []Option) (options, error) {
	o := options{maxHeaderSize: DefaultMaxHeaderSize}
	for _, f := range opts {
		if f == nil {
			return o, fmt.Errorf("%w: nil Option", ErrOption)
		}
		if err := f(&o); err != nil {
			return o, err
		}
	}
	return o, nil
}

// checkPrefix validates the 8-byte length prefix against the limit and, when
// fileSize >= 0, against the file size, in the reference's order.
func checkPrefix(prefix []byte, fileSize int64, o options) (uint64, error) {
	if len(prefix) < 8 {
		return 0, newError(ErrHeaderTooSmall, -1, "file is %d bytes, shorter than the 8-byte header length", len(prefix))
	}
	n := binary.LittleEndian.Uint64(prefix)
	if n > o.maxHeaderSize {
		return 0, newError(ErrHeaderTooLarge, 0, "header length %d exceeds the limit of %d bytes", n, o.maxHeaderSize)
	}
	if fileSize >= 0 && (n > math.MaxInt64-8 || 8+int64(n) > fileSize) {
		return 0, newError(ErrInvalidHeaderLength, 0, "header length %d runs past the end of the %d-byte file", n, fileSize)
	}
	return n, nil
}

// validate checks the tensors' offsets, shapes and sizes in the reference's
// order and returns the data section size. The raw entries carry offsets and
// dims as parsed (uint64) and are already in file order (parseHeaderJSON
// sorts them).
func validate(raw []rawTensor) (uint64, error) {
	var start uint64
	for i := range raw {
		r := &raw[i]
		if r.begin != start || r.end < r.begin {
			if r.end < r.begin {
				return 0, tensorError(ErrInvalidOffset, r.name, r.pos, "data_offsets [%d %d] end before they begin", r.begin, r.end)
			}
			if r.begin < start {
				return 0, tensorError(ErrInvalidOffset, r.name, r.pos, "data_offsets [%d %d] overlap the previous tensor, which ends at byte %d", r.begin, r.end, start)
			}
			return 0, tensorError(ErrInvalidOffset, r.name, r.pos, "data_offsets [%d %d] leave a gap after byte %d", r.begin, r.end, start)
		}
		start = r.end
		n := uint64(1)
		for _, d := range r.shape {
			hi, lo := mul64(n, d)
			if hi {
				return 0, tensorError(ErrValidationOverflow, r.name, r.pos, "element count of shape %v overflows 64 bits", r.shape)
			}
			n = lo
		}
		over, bits := mul64(n, dtypeBits[r.dtype])
		if over {
			return 0, tensorError(ErrValidationOverflow, r.name, r.pos, "size in bits of %d %s elements overflows 64 bits", n, r.dtype)
		}
		if bits%8 != 0 {
			return 0, tensorError(ErrMisalignedSlice, r.name, r.pos, "%d %s elements fill %d bits, not whole bytes", n, r.dtype, bits)
		}
		if bits/8 != r.end-r.begin {
			return 0, tensorError(ErrTensorInvalidInfo, r.name, r.pos, "shape %v of %s is %d bytes but data_offsets [%d %d] span %d", r.shape, r.dtype, bits/8, r.begin, r.end, r.end-r.begin)
		}
	}
	return start, nil
}

// toInfos converts validated entries to the public form. It refuses what
// validation let through but int64 cannot hold: dimensions above 2^63-1
// (possible only beside a zero dimension; the reference accepts them) and
// offsets no real file can reach.
func toInfos(raw []rawTensor) ([]TensorInfo, error) {
	infos := make([]TensorInfo, len(raw))
	ndims := 0
	for i := range raw {
		ndims += len(raw[i].shape)
	}
	slab := make([]int64, ndims) // one allocation for every shape
	for i := range raw {
		r := &raw[i]
		if r.end > math.MaxInt64 {
			return nil, tensorError(ErrValidationOverflow, r.name, r.pos, "data_offsets [%d %d] exceed 2^63-1", r.begin, r.end)
		}
		shape := slab[:len(r.shape):len(r.shape)]
		slab = slab[len(r.shape):]
		for j, d := range r.shape {
			if d > math.MaxInt64 {
				return nil, tensorError(ErrValidationOverflow, r.name, r.pos, "dimension %d of shape %v exceeds 2^63-1 (stricter than the reference)", j, r.shape)
			}
			shape[j] = int64(d)
		}
		infos[i] = TensorInfo{Name: r.name, DType: r.dtype, Shape: shape, DataOffsets: [2]int64{int64(r.begin), int64(r.end)}}
	}
	return infos, nil
}

// mul64 multiplies with overflow detection.
func mul64(a, b uint64) (overflow bool, product uint64) {
	if a == 0 || b == 0 {
		return false, 0
	}
	p := a * b
	return p/b != a, p
}
