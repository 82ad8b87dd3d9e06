package main

import (
	"github.com/gosafetensors/safetensors"
	"github.com/gosafetensors/safetensors/stats"
)

// nonFinite counts NaN and infinite values in little-endian float data,
// with the library's counter (stats.CountNonFinite), so that validate
// --full and stats agree for every dtype, the 8-bit floats included.
type nonFinite struct{ nan, inf int64 }

// hasFloatBits reports whether values of dtype d can be NaN or infinite:
// floats of 8 bits and more, and complex values (F4 and F6 encode neither).
func hasFloatBits(d safetensors.DType) bool { return d.IsFloat() && d.Bits() >= 8 || d.IsComplex() }

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
