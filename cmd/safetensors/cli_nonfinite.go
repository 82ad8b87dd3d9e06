package main

import (
	"github.com/gosafetensors/safetensors"
	"github.com/gosafetensors/safetensors/stats"
)

// nonFinite counts NaN and infinite values in little-endian float data,
// with the library's counter (stats.CountNonFinite), so that validate
// --full and stats agree for every dtype, the 8-bit floats included.
type nonFinite struct{ nan, inf int64 }

// hasFloatBits reports whether values of dtype d can be NaN or infinite.
func hasFloatBits(d safetensors.DType) bool {
	switch d {
	case safetensors.F8_E5M2, safetensors.F8_E4M3, safetensors.F8_E8M0, safetensors.F8_E4M3FNUZ,
		safetensors.F8_E5M2FNUZ, safetensors.F16, safetensors.BF16, safetensors.F32, safetensors.C64, safetensors.F64:
		return true
	}
	return false
}

// add counts the non-finite values among the whole elements of b, which
// must start on an element boundary; a trailing partial element is ignored.
func (c *nonFinite) add(d safetensors.DType, b []byte) {
	if s := d.Size(); s > 0 {
		b = b[:len(b)/s*s]
	}
	n, err := stats.CountNonFinite(d, b)
	if err != nil {
		return // only for a partial element, trimmed above
	}
	c.nan += n.NaN
	c.inf += n.Inf()
}
