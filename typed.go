package safetensors

import (
	"reflect"
	"unsafe"
)

// Number lists the Go types a fixed-width tensor can be viewed as.
type Number interface {
	~int8 | ~uint8 | ~int16 | ~uint16 | ~int32 | ~uint32 | ~int64 | ~uint64 |
		~float32 | ~float64 | ~complex64
}

// littleEndianHost is true on little-endian machines, where tensor bytes
// can be viewed in place.
var littleEndianHost = func() bool {
	x := uint16(1)
	return *(*byte)(unsafe.Pointer(&x)) == 1
}()

// dtypesFor returns the dtypes whose elements a T can hold bit for bit:
// uint8 also views BOOL and the raw bits of the 8-bit floats, uint16 the raw
// bits of F16 and BF16.
func dtypesFor[T Number]() []DType {
	switch reflect.TypeFor[T]().Kind() {
	case reflect.Int8:
		return []DType{I8}
	case reflect.Uint8:
		return []DType{U8, BOOL, F8_E5M2, F8_E4M3, F8_E8M0, F8_E4M3FNUZ, F8_E5M2FNUZ}
	case reflect.Int16:
		return []DType{I16}
	case reflect.Uint16:
		return []DType{U16, F16, BF16}
	case reflect.Int32:
		return []DType{I32}
	case reflect.Uint32:
		return []DType{U32}
	case reflect.Int64:
		return []DType{I64}
	case reflect.Uint64:
		return []DType{U64}
	case reflect.Float32:
		return []DType{F32}
	case reflect.Float64:
		return []DType{F64}
	case reflect.Complex64:
		return []DType{C64}
	}
	return nil
}

// As returns the tensor's elements as a []T, where T matches the dtype
// (float32 for F32, int64 for I64, complex64 for C64, uint8 for U8, BOOL and
// the raw bits of the F8 types, uint16 for the raw bits of F16 and BF16, and
// so on): every dtype whose elements fill whole bytes. On a little-endian host, for a mapped
// file or an in-memory tensor whose bytes are suitably aligned, the result
// is a zero-copy view: it must not be modified (the mapping is read-only) and
// is valid only while the file is open. Otherwise the elements are copied.
func As[T Number](t *Tensor) ([]T, error) {
	var z T
	size := int(unsafe.Sizeof(z))
	ok := false
	for _, d := range dtypesFor[T]() {
		if d == t.DType {
			ok = true
		}
	}
	if !ok {
		e := tensorError(ErrDTypeMismatch, t.Name, -1, "dtype %s cannot be viewed as %T", t.DType, z)
		e.File = t.file
		return nil, e
	}
	n := int(t.Size()) / size
	if n == 0 {
		return []T{}, nil
	}
	if littleEndianHost && (t.data != nil || t.src == nil) {
		if uintptr(unsafe.Pointer(&t.data[0]))%unsafe.Alignof(z) == 0 {
			return unsafe.Slice((*T)(unsafe.Pointer(&t.data[0])), n), nil
		}
	}
	out := make([]T, n)
	raw := unsafe.Slice((*byte)(unsafe.Pointer(&out[0])), n*size)
	if _, err := t.ReadAt(raw, 0); err != nil {
		return nil, err
	}
	if !littleEndianHost {
		if t.DType == C64 {
			size = 4 // two float32 halves
		}
		swapToHost(raw, size)
	}
	return out, nil
}

// View returns little-endian bytes b as a []T without copying, when the
// host is little-endian, b is aligned for T and holds a whole number of
// elements (ok false otherwise: decode or copy instead). The view aliases
// b.
func View[T Number](b []byte) (v []T, ok bool) {
	var z T
	size := int(unsafe.Sizeof(z))
	if !littleEndianHost || len(b) == 0 || len(b)%size != 0 || uintptr(unsafe.Pointer(unsafe.SliceData(b)))%unsafe.Alignof(z) != 0 {
		return nil, false
	}
	return unsafe.Slice((*T)(unsafe.Pointer(unsafe.SliceData(b))), len(b)/size), true
}

// swapToHost reverses each element's bytes (little-endian data on a
// big-endian host); complex64 halves are swapped as two float32.
func swapToHost(b []byte, size int) {
	for i := 0; i+size <= len(b); i += size {
		e := b[i : i+size]
		for l, r := 0, size-1; l < r; l, r = l+1, r-1 {
			e[l], e[r] = e[r], e[l]
		}
	}
}

// ToFloat32 returns the tensor's elements converted to float32 in a new
// slice: every dtype [DecodeFloat32] accepts (floats exact except F64,
// integers rounded beyond float32's 24-bit mantissa). To reuse a buffer, use
// [Tensor.Float32Into].
func ToFloat32(t *Tensor) ([]float32, error) {
	if !CanDecode(t.DType) {
		e := tensorError(ErrDTypeMismatch, t.Name, -1, "no conversion from %s to float32", t.DType)
		e.File = t.file
		return nil, e
	}
	out := make([]float32, t.NumElements())
	if err := t.Float32Into(out); err != nil {
		return nil, err
	}
	return out, nil
}
