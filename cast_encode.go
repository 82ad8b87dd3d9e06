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
// become infinities; a NaN stays a NaN (quieted, sign kept). The method is
// Fabian Giesen's float_to_half_fast3_rtne: a biased add rounds the
// mantissa, and a float addition aligns subnormals.
func Float32ToF16(f float32) uint16 {
	x := math.Float32bits(f)
	sign := uint16(x>>16) & 0x8000
	x &^= 0x80000000
	switch {
	case x >= 0x47800000: // 65536 or more, Inf or NaN
		if x > 0x7F800000 {
			return sign | 0x7E00 | uint16(x>>13)&0x3FF
		}
		return sign | 0x7C00
	case x < 0x38800000: // below 2^-14: a subnormal half or zero
		// Adding 0.5 aligns the 10 mantissa bits at the bottom of the
		// float32, rounding to nearest even as float addition does.
		const magic = (127 - 15 + 23 - 10 + 1) << 23
		v := math.Float32frombits(x) + math.Float32frombits(magic)
		return sign | uint16(math.Float32bits(v)-magic)
	}
	odd := (x >> 13) & 1
	// Rebias the exponent (subtract 112<<23) and round: + 0xFFF + odd
	// carries into bit 13 exactly when the 13 dropped bits are past half,
	// or at half with an odd mantissa.
	x = x - 112<<23 + 0xFFF + odd
	return sign | uint16(x>>13)
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
