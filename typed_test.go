package safetensors

import (
	"bytes"
	"errors"
	"math"
	"testing"
)

func TestF8E4M3Exact(t *testing.T) {
	cases := map[uint8]float32{
		0x00: 0, 0x01: 1.0 / 512, 0x07: 7.0 / 512, 0x08: 1.0 / 64, 0x38: 1, 0x40: 2,
		0x3C: 1.5, 0x7E: 448, 0xFE: -448, 0xB8: -1, 0x81: -1.0 / 512,
	}
	for b, want := range cases {
		if got := F8E4M3ToFloat32(b); got != want {
			t.Errorf("E4M3 %#02x = %v, want %v", b, got, want)
		}
	}
	if got := F8E4M3ToFloat32(0x80); got != 0 || !math.Signbit(float64(got)) {
		t.Errorf("0x80 = %v, want -0", got)
	}
	for _, b := range []uint8{0x7F, 0xFF} {
		if got := F8E4M3ToFloat32(b); !math.IsNaN(float64(got)) {
			t.Errorf("%#02x = %v, want NaN", b, got)
		}
	}
	// Every byte against the definition, computed another way.
	for i := range 256 {
		b := uint8(i)
		e, m := int(b>>3&15), float64(b&7)
		var want float64
		switch {
		case e == 15 && m == 7:
			continue
		case e == 0:
			want = math.Ldexp(m/8, -6)
		default:
			want = math.Ldexp(1+m/8, e-7)
		}
		if b&0x80 != 0 {
			want = -want
		}
		if got := F8E4M3ToFloat32(b); float64(got) != want {
			t.Errorf("E4M3 %#02x = %v, want %v", b, got, want)
		}
	}
}

func TestF8E5M2Exact(t *testing.T) {
	cases := map[uint8]float32{0x3C: 1, 0x01: 1.0 / 65536, 0x7B: 57344, 0xFB: -57344, 0x40: 2}
	for b, want := range cases {
		if got := F8E5M2ToFloat32(b); got != want {
			t.Errorf("E5M2 %#02x = %v, want %v", b, got, want)
		}
	}
	if !math.IsInf(float64(F8E5M2ToFloat32(0x7C)), 1) || !math.IsInf(float64(F8E5M2ToFloat32(0xFC)), -1) {
		t.Error("E5M2 infinities")
	}
	for _, b := range []uint8{0x7D, 0x7E, 0x7F, 0xFF} {
		if !math.IsNaN(float64(F8E5M2ToFloat32(b))) {
			t.Errorf("%#02x not NaN", b)
		}
	}
	for i := range 256 {
		b := uint8(i)
		e, m := int(b>>2&31), float64(b&3)
		if e == 31 {
			continue
		}
		want := math.Ldexp(1+m/4, e-15)
		if e == 0 {
			want = math.Ldexp(m/4, -14)
		}
		if b&0x80 != 0 {
			want = -want
		}
		if got := F8E5M2ToFloat32(b); float64(got) != want {
			t.Errorf("E5M2 %#02x = %v, want %v", b, got, want)
		}
	}
}

func TestHalfAndBFloat16Exact(t *testing.T) {
	f16 := map[uint16]float32{0x3C00: 1, 0xC000: -2, 0x7BFF: 65504, 0x0001: float32(math.Ldexp(1, -24)), 0x0400: float32(math.Ldexp(1, -14))}
	for b, want := range f16 {
		if got := F16ToFloat32(b); got != want {
			t.Errorf("F16 %#04x = %v, want %v", b, got, want)
		}
	}
	if !math.IsInf(float64(F16ToFloat32(0x7C00)), 1) || !math.IsNaN(float64(F16ToFloat32(0x7E00))) {
		t.Error("F16 inf/nan")
	}
	bf := map[uint16]float32{0x3F80: 1, 0xC000: -2, 0x0001: math.Float32frombits(0x00010000), 0x7F7F: math.Float32frombits(0x7F7F0000)}
	for b, want := range bf {
		if got := BF16ToFloat32(b); got != want {
			t.Errorf("BF16 %#04x = %v, want %v", b, got, want)
		}
	}
	if !math.IsInf(float64(BF16ToFloat32(0xFF80)), -1) || !math.IsNaN(float64(BF16ToFloat32(0x7FC0))) {
		t.Error("BF16 inf/nan")
	}
}

// TestTypedAccessRealFile reads the reference file that torch's tensors were
// converted into and checks values across dtypes agree: randn_f16 and
// randn_bf16 hold values whose float32 forms are known only through
// conversion, so compare the exact integer and float tensors instead.
func TestTypedAccessRealFile(t *testing.T) {
	f, err := Open("testdata/torch/dtypes.safetensors")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	get := func(name string) *Tensor {
		x, err := f.Tensor(name)
		if err != nil {
			t.Fatal(err)
		}
		return x
	}
	i64, err := As[int64](get("i64"))
	if err != nil || len(i64) != 5 {
		t.Fatalf("i64: %v %v", i64, err)
	}
	f64, err := As[float64](get("f64"))
	if err != nil || len(f64) != 3 {
		t.Fatalf("f64: %v %v", f64, err)
	}
	if _, err := As[float32](get("i64")); !errors.Is(err, ErrDTypeMismatch) {
		t.Fatalf("As[float32] on I64: %v", err)
	}
	// The torch fixture holds known specials: check the conversions on
	// bytes torch wrote.
	inf := float32(math.Inf(1))
	checkFloats(t, get("f16"), []float32{0, -2.5, 65504, float32(math.Ldexp(1, -24)), inf, float32(math.NaN())})
	checkFloats(t, get("bf16"), []float32{1, -3.140625, math.Float32frombits(0x7E960000), -inf})
	checkFloats(t, get("f32"), []float32{0, float32(math.Copysign(0, -1)), 1.5, inf, -inf, float32(math.NaN()), math.Float32frombits(1), math.Float32frombits(0x7F7FC99E)})
	// c64 views as complex64.
	c, err := As[complex64](get("c64"))
	if err != nil || len(c) != 3 {
		t.Fatalf("c64: %v %v", c, err)
	}
	bools, err := As[uint8](get("bool"))
	if err != nil || len(bools) != 5 {
		t.Fatalf("bool: %v %v", bools, err)
	}
	if _, err := ToFloat32(get("c64")); !errors.Is(err, ErrDTypeMismatch) {
		t.Fatalf("ToFloat32(C64): %v", err)
	}
}

func checkFloats(t *testing.T, x *Tensor, want []float32) {
	t.Helper()
	got, err := ToFloat32(x)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("%s: %d values, want %d", x.Name, len(got), len(want))
	}
	for i := range got {
		g, w := got[i], want[i]
		same := math.Float32bits(g) == math.Float32bits(w) || (math.IsNaN(float64(g)) && math.IsNaN(float64(w)))
		if !same {
			t.Errorf("%s[%d] = %v (%#08x), want %v (%#08x)", x.Name, i, g, math.Float32bits(g), w, math.Float32bits(w))
		}
	}
}

func TestParseDTypeCoversTable(t *testing.T) {
	for _, d := range DTypes() {
		if got, ok := ParseDType(d.String()); !ok || got != d {
			t.Errorf("ParseDType(%q) = %v, %v", d.String(), got, ok)
		}
	}
	if _, ok := ParseDType("f32"); ok {
		t.Error("lower case accepted")
	}
}

// TestF8E5M2MatchesHalf: E5M2 is the upper byte of an IEEE half, so the
// hand-written decoder must agree with x448/float16 on all 256 bytes.
func TestF8E5M2MatchesHalf(t *testing.T) {
	for i := range 256 {
		got, want := F8E5M2ToFloat32(uint8(i)), F16ToFloat32(uint16(i)<<8)
		if math.Float32bits(got) != math.Float32bits(want) && !(math.IsNaN(float64(got)) && math.IsNaN(float64(want))) {
			t.Errorf("%#02x: %v, half says %v", i, got, want)
		}
	}
}

func TestAsCoversEveryWholeByteDType(t *testing.T) {
	views := map[DType]func(*Tensor) (int, error){
		BOOL: n[uint8], U8: n[uint8], I8: n[int8], F8_E5M2: n[uint8], F8_E4M3: n[uint8], F8_E8M0: n[uint8],
		F8_E4M3FNUZ: n[uint8], F8_E5M2FNUZ: n[uint8], I16: n[int16], U16: n[uint16], F16: n[uint16],
		BF16: n[uint16], I32: n[int32], U32: n[uint32], F32: n[float32], C64: n[complex64],
		F64: n[float64], I64: n[int64], U64: n[uint64],
	}
	for _, d := range DTypes() {
		if d.Size() == 0 {
			continue // F4, F6: no Go type holds them
		}
		view, ok := views[d]
		if !ok {
			t.Errorf("no typed view listed for %s", d)
			continue
		}
		b, err := Marshal([]TensorData{{Name: "x", DType: d, Shape: []int64{3}, Data: make([]byte, 3*d.Size())}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		r, _ := NewReader(bytes.NewReader(b), int64(len(b)))
		x, _ := r.Tensor("x")
		if got, err := view(x); err != nil || got != 3 {
			t.Errorf("%s: %d elements, %v", d, got, err)
		}
	}
}

func n[T Number](t *Tensor) (int, error) {
	v, err := As[T](t)
	return len(v), err
}
