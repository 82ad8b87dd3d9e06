package safetensors

import (
	"math"

	"github.com/x448/float16"
)

// F16ToFloat32 converts IEEE 754 half-precision bits to float32, exactly.
func F16ToFloat32(bits uint16) float32 { return float16.Frombits(bits).Float32() }

// BF16ToFloat32 converts bfloat16 bits to float32, exactly: bfloat16 is the
// upper half of a float32.
func BF16ToFloat32(bits uint16) float32 { return math.Float32frombits(uint32(bits) << 16) }

// F8E5M2ToFloat32 converts an F8_E5M2 byte to float32, exactly: 5 exponent
// bits with bias 15 and 2 mantissa bits, laid out like the upper byte of an
// IEEE half, with its infinities (0x7C, 0xFC) and NaNs.
func F8E5M2ToFloat32(b uint8) float32 {
	sign := uint32(b>>7) << 31
	exp := uint32(b>>2) & 0x1F
	man := uint32(b) & 0x3
	switch {
	case exp == 0x1F && man == 0:
		return math.Float32frombits(sign | 0x7F800000)
	case exp == 0x1F:
		return math.Float32frombits(sign | 0x7FC00000 | man<<21)
	case exp == 0 && man == 0:
		return math.Float32frombits(sign)
	case exp == 0:
		// Subnormal: man/4 * 2^-14 = man * 2^-16, exact in float32.
		v := float32(man) / 65536
		if sign != 0 {
			v = -v
		}
		return v
	}
	return math.Float32frombits(sign | (exp-15+127)<<23 | man<<21)
}

// F8E4M3ToFloat32 converts an F8_E4M3 (E4M3FN) byte to float32, exactly:
// 4 exponent bits with bias 7, 3 mantissa bits, no infinities, and NaN only
// for the all-ones exponent and mantissa (0x7F, 0xFF). The largest finite
// value is 448.
func F8E4M3ToFloat32(b uint8) float32 {
	sign := uint32(b>>7) << 31
	exp := uint32(b>>3) & 0xF
	man := uint32(b) & 0x7
	switch {
	case exp == 0xF && man == 0x7:
		return math.Float32frombits(sign | 0x7FC00000)
	case exp == 0 && man == 0:
		return math.Float32frombits(sign)
	case exp == 0:
		// Subnormal: man/8 * 2^-6 = man * 2^-9, exact in float32.
		v := float32(man) / 512
		if sign != 0 {
			v = -v
		}
		return v
	}
	return math.Float32frombits(sign | (exp-7+127)<<23 | man<<20)
}
