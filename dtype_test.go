package safetensors

import "testing"

// TestDTypeKinds pins which dtypes are floating point (as torch's
// is_floating_point) and which complex: every dtype is listed, so a new
// one must be classified here.
func TestDTypeKinds(t *testing.T) {
	float := map[DType]bool{F4: true, F6_E2M3: true, F6_E3M2: true, F8_E5M2: true, F8_E4M3: true, F8_E8M0: true,
		F8_E4M3FNUZ: true, F8_E5M2FNUZ: true, F16: true, BF16: true, F32: true, F64: true}
	other := map[DType]bool{BOOL: true, U8: true, I8: true, I16: true, U16: true, I32: true, U32: true, C64: true, I64: true, U64: true}
	for _, d := range DTypes() {
		if float[d] == other[d] {
			t.Fatalf("%s is not classified by this test", d)
		}
		if got := d.IsFloat(); got != float[d] {
			t.Errorf("%s.IsFloat() = %v", d, got)
		}
		if got := d.IsComplex(); got != (d == C64) {
			t.Errorf("%s.IsComplex() = %v", d, got)
		}
	}
	if DType(200).IsFloat() || DType(200).IsComplex() {
		t.Error("an invalid dtype is a float or complex")
	}
}
