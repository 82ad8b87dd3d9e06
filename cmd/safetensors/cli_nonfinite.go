package main

import (
	"encoding/binary"
	"math"

	"github.com/gosafetensors/safetensors"
)

// nonFinite counts NaN and infinite values in little-endian float data.
type nonFinite struct{ nan, inf int64 }

// hasFloatBits reports whether countNonFinite understands dtype d.
func hasFloatBits(d safetensors.DType) bool {
	switch d {
	case safetensors.F16, safetensors.BF16, safetensors.F32, safetensors.F64, safetensors.C64:
		return true
	}
	return false
}

// add counts the non-finite values among the whole elements of b, which
// must start on an element boundary.
func (c *nonFinite) add(d safetensors.DType, b []byte) {
	le := binary.LittleEndian
	switch d {
	case safetensors.F16:
		for i := 0; i+2 <= len(b); i += 2 {
			c.bits(uint64(le.Uint16(b[i:])), 0x7c00, 0x03ff)
		}
	case safetensors.BF16:
		for i := 0; i+2 <= len(b); i += 2 {
			c.bits(uint64(le.Uint16(b[i:])), 0x7f80, 0x007f)
		}
	case safetensors.F32:
		for i := 0; i+4 <= len(b); i += 4 {
			c.bits(uint64(le.Uint32(b[i:])), 0x7f800000, 0x007fffff)
		}
	case safetensors.C64:
		// One value is two float32: NaN if either part is, else infinite
		// if either part is.
		for i := 0; i+8 <= len(b); i += 8 {
			re := math.Float32frombits(le.Uint32(b[i:]))
			im := math.Float32frombits(le.Uint32(b[i+4:]))
			switch {
			case re != re || im != im:
				c.nan++
			case math.IsInf(float64(re), 0) || math.IsInf(float64(im), 0):
				c.inf++
			}
		}
	case safetensors.F64:
		for i := 0; i+8 <= len(b); i += 8 {
			v := math.Float64frombits(le.Uint64(b[i:]))
			if math.IsNaN(v) {
				c.nan++
			} else if math.IsInf(v, 0) {
				c.inf++
			}
		}
	}
}

// bits classifies one IEEE value by its exponent and mantissa masks.
func (c *nonFinite) bits(v, exp, mant uint64) {
	if v&exp == exp {
		if v&mant != 0 {
			c.nan++
		} else {
			c.inf++
		}
	}
}
