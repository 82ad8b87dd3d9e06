package safetensors

import "fmt"

// DType is the element type of a tensor. The numeric order of the constants
// is the reference implementation's order; the writer sorts tensors by it.
type DType uint8

// The dtypes of the format, in the reference implementation's order.
const (
	BOOL        DType = iota // boolean, one byte
	F4                       // 4-bit float (E2M1)
	F6_E2M3                  // 6-bit float
	F6_E3M2                  // 6-bit float
	U8                       // unsigned 8-bit integer
	I8                       // signed 8-bit integer
	F8_E5M2                  // 8-bit float, 5 exponent bits
	F8_E4M3                  // 8-bit float, 4 exponent bits (E4M3FN: no infinities)
	F8_E8M0                  // 8-bit exponent-only scale
	F8_E4M3FNUZ              // 8-bit float, no infinities, no negative zero
	F8_E5M2FNUZ              // 8-bit float, no infinities, no negative zero
	I16                      // signed 16-bit integer
	U16                      // unsigned 16-bit integer
	F16                      // IEEE 754 half precision
	BF16                     // bfloat16
	I32                      // signed 32-bit integer
	U32                      // unsigned 32-bit integer
	F32                      // IEEE 754 single precision
	C64                      // complex64: two float32
	F64                      // IEEE 754 double precision
	I64                      // signed 64-bit integer
	U64                      // unsigned 64-bit integer

	numDTypes
)

var dtypeNames = [numDTypes]string{
	"BOOL", "F4", "F6_E2M3", "F6_E3M2", "U8", "I8", "F8_E5M2", "F8_E4M3",
	"F8_E8M0", "F8_E4M3FNUZ", "F8_E5M2FNUZ", "I16", "U16", "F16", "BF16",
	"I32", "U32", "F32", "C64", "F64", "I64", "U64",
}

var dtypeBits = [numDTypes]uint64{
	8, 4, 6, 6, 8, 8, 8, 8, 8, 8, 8, 16, 16, 16, 16, 32, 32, 32, 64, 64, 64, 64,
}

// DTypes returns every dtype in the reference implementation's order.
func DTypes() []DType {
	out := make([]DType, numDTypes)
	for i := range out {
		out[i] = DType(i)
	}
	return out
}

// String returns the dtype's name as spelled in a header, such as "F32".
func (d DType) String() string {
	if d < numDTypes {
		return dtypeNames[d]
	}
	return fmt.Sprintf("DType(%d)", uint8(d))
}

// Valid reports whether d is one of the format's dtypes.
func (d DType) Valid() bool { return d < numDTypes }

// Bits returns the size of one element in bits (4 for F4, 6 for F6_*).
func (d DType) Bits() int {
	if d < numDTypes {
		return int(dtypeBits[d])
	}
	return 0
}

// IsFloat reports whether d is a floating-point dtype, as torch's
// is_floating_point says: F4, F6_E2M3, F6_E3M2, the F8 dtypes (F8_E8M0
// scales included), F16, BF16, F32 and F64. Integers, BOOL and the complex
// C64 are not.
func (d DType) IsFloat() bool {
	switch d {
	case F4, F6_E2M3, F6_E3M2, F8_E5M2, F8_E4M3, F8_E8M0, F8_E4M3FNUZ, F8_E5M2FNUZ, F16, BF16, F32, F64:
		return true
	}
	return false
}

// IsComplex reports whether d is a complex dtype (C64).
func (d DType) IsComplex() bool { return d == C64 }

// Size returns the size of one element in bytes, or 0 for the sub-byte
// dtypes F4, F6_E2M3 and F6_E3M2, whose elements do not fill whole bytes.
func (d DType) Size() int {
	if b := d.Bits(); b%8 == 0 {
		return b / 8
	}
	return 0
}

// ParseDType returns the dtype with the given name. Names are case-sensitive,
// as in the reference: "f32" is not a dtype.
func ParseDType(name string) (DType, bool) {
	// A switch compiles to a length-then-value search: faster than a map
	// for the hundreds of thousands of lookups a large header needs.
	switch name {
	case "BOOL":
		return BOOL, true
	case "F4":
		return F4, true
	case "F6_E2M3":
		return F6_E2M3, true
	case "F6_E3M2":
		return F6_E3M2, true
	case "U8":
		return U8, true
	case "I8":
		return I8, true
	case "F8_E5M2":
		return F8_E5M2, true
	case "F8_E4M3":
		return F8_E4M3, true
	case "F8_E8M0":
		return F8_E8M0, true
	case "F8_E4M3FNUZ":
		return F8_E4M3FNUZ, true
	case "F8_E5M2FNUZ":
		return F8_E5M2FNUZ, true
	case "I16":
		return I16, true
	case "U16":
		return U16, true
	case "F16":
		return F16, true
	case "BF16":
		return BF16, true
	case "I32":
		return I32, true
	case "U32":
		return U32, true
	case "F32":
		return F32, true
	case "C64":
		return C64, true
	case "F64":
		return F64, true
	case "I64":
		return I64, true
	case "U64":
		return U64, true
	}
	return 0, false
}

// MarshalText implements encoding.TextMarshaler.
func (d DType) MarshalText() ([]byte, error) {
	if !d.Valid() {
		return nil, fmt.Errorf("safetensors: invalid dtype %d", uint8(d))
	}
	return []byte(dtypeNames[d]), nil
}

// UnmarshalText implements encoding.TextUnmarshaler.
func (d *DType) UnmarshalText(b []byte) error {
	v, ok := ParseDType(string(b))
	if !ok {
		return fmt.Errorf("safetensors: unknown dtype %q", b)
	}
	*d = v
	return nil
}
