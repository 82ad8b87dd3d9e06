package stats

import (
	"encoding/binary"
	"fmt"
	"math"
	"sync"

	"github.com/gosafetensors/safetensors"
)

// NonFinite counts NaN and infinite values.
type NonFinite struct {
	NaN, PosInf, NegInf int64
}

// Inf returns the number of infinities of either sign.
func (c NonFinite) Inf() int64 { return c.PosInf + c.NegInf }

// Add adds o's counts to c.
func (c *NonFinite) Add(o NonFinite) {
	c.NaN += o.NaN
	c.PosInf += o.PosInf
	c.NegInf += o.NegInf
}

// class of a one-byte float value: 0 finite, 1 NaN, 2 +Inf, 3 -Inf.
var byteClasses = sync.OnceValue(func() map[safetensors.DType]*[256]uint8 {
	m := map[safetensors.DType]*[256]uint8{}
	for _, dt := range []safetensors.DType{safetensors.F8_E5M2, safetensors.F8_E4M3, safetensors.F8_E8M0, safetensors.F8_E4M3FNUZ, safetensors.F8_E5M2FNUZ} {
		var t [256]uint8
		src := make([]byte, 256)
		for i := range src {
			src[i] = byte(i)
		}
		v := make([]float32, 256)
		if err := safetensors.DecodeFloat32(v, src, dt); err != nil {
			continue // cannot happen: every one-byte float dtype decodes
		}
		for i, f := range v {
			switch {
			case f != f:
				t[i] = 1
			case math.IsInf(float64(f), 1):
				t[i] = 2
			case math.IsInf(float64(f), -1):
				t[i] = 3
			}
		}
		m[dt] = &t
	}
	return m
})

// CountNonFinite counts the NaN and infinite values among the whole
// little-endian elements of dtype dt in b, which must start on an element
// boundary: F8_E4M3 has NaN (0x7F, 0xFF) and no infinities, F8_E5M2 both,
// the FNUZ variants one NaN (0x80), F8_E8M0 one NaN (0xFF); F16, BF16, F32,
// F64 by IEEE rules; a C64 value is NaN if either part is, else infinite
// (signed by its first infinite part) if either part is. Integers, BOOL,
// F4 and F6 have neither. A trailing partial element is an error.
func CountNonFinite(dt safetensors.DType, b []byte) (NonFinite, error) {
	var c NonFinite
	le := binary.LittleEndian
	size := dt.Size()
	if !dt.Valid() {
		return c, fmt.Errorf("stats: invalid dtype %d", uint8(dt))
	}
	if size > 0 && len(b)%size != 0 {
		return c, fmt.Errorf("%w: %d bytes are not whole %s elements", safetensors.ErrBufferSize, len(b), dt)
	}
	switch dt {
	case safetensors.F16:
		for i := 0; i+2 <= len(b); i += 2 {
			c.ieee(uint64(le.Uint16(b[i:])), 0x8000, 0x7C00, 0x03FF)
		}
	case safetensors.BF16:
		for i := 0; i+2 <= len(b); i += 2 {
			c.ieee(uint64(le.Uint16(b[i:])), 0x8000, 0x7F80, 0x007F)
		}
	case safetensors.F32:
		for i := 0; i+4 <= len(b); i += 4 {
			c.ieee(uint64(le.Uint32(b[i:])), 0x80000000, 0x7F800000, 0x007FFFFF)
		}
	case safetensors.F64:
		for i := 0; i+8 <= len(b); i += 8 {
			c.ieee(le.Uint64(b[i:]), 1<<63, 0x7FF0000000000000, 0x000FFFFFFFFFFFFF)
		}
	case safetensors.C64:
		for i := 0; i+8 <= len(b); i += 8 {
			re := math.Float32frombits(le.Uint32(b[i:]))
			im := math.Float32frombits(le.Uint32(b[i+4:]))
			switch {
			case re != re || im != im:
				c.NaN++
			case math.IsInf(float64(re), 1) || !math.IsInf(float64(re), -1) && math.IsInf(float64(im), 1):
				c.PosInf++
			case math.IsInf(float64(re), -1) || math.IsInf(float64(im), -1):
				c.NegInf++
			}
		}
	default:
		t := byteClasses()[dt]
		if t == nil {
			return c, nil // integers, BOOL, F4, F6: always finite
		}
		var n [4]int64
		for _, x := range b {
			n[t[x]]++
		}
		c.NaN, c.PosInf, c.NegInf = n[1], n[2], n[3]
	}
	return c, nil
}

// ieee classifies one IEEE value by its sign, exponent and mantissa masks.
func (c *NonFinite) ieee(v, sign, exp, man uint64) {
	if v&exp != exp {
		return
	}
	switch {
	case v&man != 0:
		c.NaN++
	case v&sign != 0:
		c.NegInf++
	default:
		c.PosInf++
	}
}
