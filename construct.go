package safetensors

import (
	"fmt"
	"os"
	"reflect"
	"slices"
	"unsafe"
)

// dtypeOf returns the dtype that stores a T bit for bit.
func dtypeOf[T Number]() DType {
	switch reflect.TypeFor[T]().Kind() {
	case reflect.Int8:
		return I8
	case reflect.Uint8:
		return U8
	case reflect.Int16:
		return I16
	case reflect.Uint16:
		return U16
	case reflect.Int32:
		return I32
	case reflect.Uint32:
		return U32
	case reflect.Int64:
		return I64
	case reflect.Uint64:
		return U64
	case reflect.Float32:
		return F32
	case reflect.Float64:
		return F64
	}
	return C64
}

// checkShape returns the element count of shape, refusing negative
// dimensions and overflow, and checks it against have.
func checkShape(name string, dt DType, shape []int64, have int) error {
	if _, err := byteSize(dt, shape); err != nil {
		return fmt.Errorf("%w: tensor %q: %v", ErrWrite, name, err)
	}
	n := int64(1)
	for _, d := range shape {
		n *= d // cannot overflow: byteSize checked the product
	}
	if n != int64(have) {
		return fmt.Errorf("%w: tensor %q: shape %v holds %d elements, the data %d", ErrWrite, name, shape, n, have)
	}
	return nil
}

// FromSlice returns an in-memory tensor holding a copy of data with the
// given shape, stored as the dtype matching T exactly (I8 for int8 ... U64
// for uint64, F32 for float32, F64 for float64, C64 for complex64). The
// product of shape must equal len(data); an empty shape is a scalar. Use
// [FromFloat32] to store floats as F16 or BF16.
func FromSlice[T Number](name string, shape []int64, data []T) (*Tensor, error) {
	dt := dtypeOf[T]()
	if err := checkShape(name, dt, shape, len(data)); err != nil {
		return nil, err
	}
	size := int(unsafe.Sizeof(*new(T)))
	b := make([]byte, len(data)*size)
	if len(data) > 0 {
		copy(b, unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(data))), len(b)))
	}
	if !littleEndianHost {
		if dt == C64 {
			size = 4
		}
		swapToHost(b, size)
	}
	return newOwned(name, dt, shape, b), nil
}

// FromFloat32 returns an in-memory tensor holding data with the given
// shape, stored as dt: F32 or F64 (exact), or F16 or BF16, rounded to
// nearest with ties to even; values beyond the format's range become
// infinities and NaN stays NaN (see [Float32ToF16], [Float32ToBF16]).
func FromFloat32(name string, shape []int64, data []float32, dt DType) (*Tensor, error) {
	size, err := EncodedSize(dt, len(data))
	if err != nil {
		return nil, fmt.Errorf("tensor %q: %w", name, err)
	}
	if err := checkShape(name, dt, shape, len(data)); err != nil {
		return nil, err
	}
	b := make([]byte, size)
	if err := EncodeFloat32(b, data, dt); err != nil {
		return nil, err
	}
	return newOwned(name, dt, shape, b), nil
}

func newOwned(name string, dt DType, shape []int64, b []byte) *Tensor {
	info := TensorInfo{Name: name, DType: dt, Shape: slices.Clone(shape), DataOffsets: [2]int64{0, int64(len(b))}}
	if info.Shape == nil {
		info.Shape = []int64{}
	}
	return &Tensor{TensorInfo: info, data: b}
}

// LoadFile reads every tensor of the safetensors file at path into memory,
// like Python's safetensors.torch.load_file: the map is keyed by name and
// the tensors own their bytes (one read, one allocation), valid after the
// function returns. The metadata map is never nil.
func LoadFile(path string) (map[string]*Tensor, map[string]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, nil, err
	}
	r, err := NewReader(f, st.Size(), WithName(path))
	if err != nil {
		return nil, nil, err
	}
	all, err := r.ReadAll()
	if err != nil {
		return nil, nil, err
	}
	m := make(map[string]*Tensor, len(all))
	for _, t := range all {
		m[t.Name] = t
	}
	return m, r.Meta(), nil
}

// SaveFile writes tensors to path atomically, like Python's
// safetensors.torch.save_file: each tensor is stored under its map key
// (whatever its Name), in the reference writer's order, with metadata as
// __metadata__ (nil writes none). Tensors may come from any source (a
// mapped file, a reader, [FromSlice]); their bytes are streamed, not
// gathered in memory. On error the destination is left as it was.
func SaveFile(path string, tensors map[string]*Tensor, metadata map[string]string) error {
	infos := make([]TensorInfo, 0, len(tensors))
	for name, t := range tensors {
		if t == nil {
			return fmt.Errorf("%w: tensor %q is nil", ErrWrite, name)
		}
		infos = append(infos, TensorInfo{Name: name, DType: t.DType, Shape: t.Shape})
	}
	fw, err := Create(path, infos, metadata)
	if err != nil {
		return err
	}
	for _, info := range fw.Tensors() {
		if err := fw.WriteTensorFrom(info.Name, tensors[info.Name]); err != nil {
			fw.Abort()
			return err
		}
	}
	return fw.Close()
}
