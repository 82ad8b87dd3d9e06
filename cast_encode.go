package safetensors

import (
	"encoding/binary"
	"fmt"
	"math"
	"unsafe"
)

// Float32ToBF16 rounds f to the nearest bfloat16, ties to even. Values
// beyond the largest finite bfloat16 become infinities, as IEEE 754
// rounding requires; a NaN stays a NaN (quieted, sign kept).
func Float32ToBF16(f float32) uint16 {
	b := math.Float32bits(f)
	if b&0x7FFFFFFF > 0x7F800000 { // NaN: truncating could give Inf
		return uint16(b>>16) | 0x0040
	}
	b += 0x7FFF + (b>>16)&1
	return uint16(b >> 16)
}

// Float32ToF16 rounds f to the nearest IEEE 754 half, ties to even,
// subnormal halves included. Values whose magnitude rounds beyond 65504
// become infinities; a NaN stays a NaN (quieted, sign and upper payload
// bits kept).
func Float32ToF16(f float32) uint16 {
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	exp := int32(b>>23) & 0xFF
	man := b & 0x7FFFFF
	if exp == 0xFF {
		if man != 0 {
			return sign | 0x7E00 | uint16(man>>13)
		}
		return sign | 0x7C00
	}
	e := exp - 127 + 15
	if e >= 0x1F {
		return sign | 0x7C00
	}
	if e <= 0 {
		// Subnormal half (or zero): shift the mantissa with its implicit
		// bit into place and round on the bits shifted out.
		if e < -10 {
			return sign
		}
		man |= 0x800000
		shift := uint32(14 - e)
		r := man >> shift
		rem := man & (1<<shift - 1)
		half := uint32(1) << (shift - 1)
		if rem > half || (rem == half && r&1 == 1) {
			r++
		}
		return sign | uint16(r)
	}
	r := uint32(e)<<10 | man>>13
	rem := man & 0x1FFF
	if rem > 0x1000 || (rem == 0x1000 && r&1 == 1) {
		r++ // a carry into the exponent is right, up to infinity
	}
	return sign | uint16(r)
}

// EncodedSize returns the bytes n elements of dtype dt take, for the
// dtypes [EncodeFloat32] writes.
func EncodedSize(dt DType, n int) (int, error) {
	switch dt {
	case F32, F64, F16, BF16:
		if n < 0 || n > math.MaxInt/dt.Size() {
			return 0, fmt.Errorf("%w: %d elements of %s overflow", ErrBufferSize, n, dt)
		}
		return n * dt.Size(), nil
	}
	return 0, fmt.Errorf("%w: no conversion from float32 to %s (F32, F64, F16 or BF16)", ErrDTypeMismatch, dt)
}

// EncodeFloat32 writes src as little-endian elements of dtype dt into dst,
// which must be exactly [EncodedSize] bytes long. F32 and F64 are exact; F16
// and BF16 round to nearest, ties to even (see [Float32ToF16] and
// [Float32ToBF16]). Large inputs are converted on all cores.
func EncodeFloat32(dst []byte, src []float32, dt DType) error {
	want, err := EncodedSize(dt, len(src))
	if err != nil {
		return err
	}
	if len(dst) != want {
		return fmt.Errorf("%w: %d float32 as %s need %d bytes, not %d", ErrBufferSize, len(src), dt, want, len(dst))
	}
	s := dt.Size()
	parallel(len(src), dt, func(lo, hi int) { encode32(dst[lo*s:hi*s], src[lo:hi], dt) })
	return nil
}

func encode32(dst []byte, src []float32, dt DType) {
	le := binary.LittleEndian
	switch dt {
	case F32:
		if littleEndianHost {
			copy(dst, unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(src))), 4*len(src)))
			return
		}
		for i, f := range src {
			le.PutUint32(dst[4*i:], math.Float32bits(f))
		}
	case F64:
		for i, f := range src {
			le.PutUint64(dst[8*i:], math.Float64bits(float64(f)))
		}
	case BF16:
		for i, f := range src {
			le.PutUint16(dst[2*i:], Float32ToBF16(f))
		}
	case F16:
		for i, f := range src {
			le.PutUint16(dst[2*i:], Float32ToF16(f))
		}
	}
}
