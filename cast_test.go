package safetensors_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"math/rand/v2"
	"os"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/gosafetensors/safetensors"
	"github.com/x448/float16"
)

// refDecode decodes one element the slow, obvious way, independently of
// the table-driven loops under test.
func refDecode(t *testing.T, dt safetensors.DType, b []byte, i int) float64 {
	le := binary.LittleEndian
	switch dt {
	case safetensors.BOOL:
		if b[i] != 0 {
			return 1
		}
		return 0
	case safetensors.U8:
		return float64(b[i])
	case safetensors.I8:
		return float64(int8(b[i]))
	case safetensors.F8_E5M2:
		return float64(safetensors.F8E5M2ToFloat32(b[i]))
	case safetensors.F8_E4M3:
		return float64(safetensors.F8E4M3ToFloat32(b[i]))
	case safetensors.F8_E8M0:
		if b[i] == 0xFF {
			return math.NaN()
		}
		return math.Ldexp(1, int(b[i])-127)
	case safetensors.F8_E4M3FNUZ, safetensors.F8_E5M2FNUZ:
		return refFNUZ(dt, b[i])
	case safetensors.F4:
		nib := b[i/2] >> (4 * (i % 2)) & 0xF
		v := []float64{0, 0.5, 1, 1.5, 2, 3, 4, 6}[nib&7]
		if nib&8 != 0 {
			v = -v
		}
		return v
	case safetensors.I16:
		return float64(int16(le.Uint16(b[2*i:])))
	case safetensors.U16:
		return float64(le.Uint16(b[2*i:]))
	case safetensors.F16:
		return float64(float16.Frombits(le.Uint16(b[2*i:])).Float32())
	case safetensors.BF16:
		return float64(math.Float32frombits(uint32(le.Uint16(b[2*i:])) << 16))
	case safetensors.I32:
		return float64(int32(le.Uint32(b[4*i:])))
	case safetensors.U32:
		return float64(le.Uint32(b[4*i:]))
	case safetensors.F32:
		return float64(math.Float32frombits(le.Uint32(b[4*i:])))
	case safetensors.F64:
		return math.Float64frombits(le.Uint64(b[8*i:]))
	case safetensors.I64:
		return float64(int64(le.Uint64(b[8*i:])))
	case safetensors.U64:
		return float64(le.Uint64(b[8*i:]))
	}
	t.Fatalf("no reference decoder for %s", dt)
	return 0
}

// refFNUZ decodes the FNUZ formats from their definition: all-zero sign
// bit with nonzero rest or zero is a number, 0x80 is NaN, bias 8 or 16.
func refFNUZ(dt safetensors.DType, b byte) float64 {
	if b == 0x80 {
		return math.NaN()
	}
	manBits, bias := 3, 8
	if dt == safetensors.F8_E5M2FNUZ {
		manBits, bias = 2, 16
	}
	exp := int(b&0x7F) >> manBits
	man := float64(int(b) & (1<<manBits - 1))
	frac := man / float64(int(1)<<manBits)
	v := math.Ldexp(frac, 1-bias)
	if exp > 0 {
		v = math.Ldexp(1+frac, exp-bias)
	}
	if b&0x80 != 0 {
		v = -v
	}
	return v
}

func sameFloat(a, b float64) bool {
	return a == b && math.Signbit(a) == math.Signbit(b) || math.IsNaN(a) && math.IsNaN(b)
}

func TestDecodeEveryDType(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	// One length below the parallel threshold with a ragged tail, one above.
	for _, n := range []int{0, 1, 7, 1001, 300_003} {
		for _, dt := range safetensors.DTypes() {
			if !safetensors.CanDecode(dt) {
				continue
			}
			elems := n
			var nbytes int
			if dt == safetensors.F4 {
				elems = n &^ 1
				nbytes = elems / 2
			} else {
				nbytes = n * dt.Size()
			}
			src := make([]byte, nbytes)
			for i := range src {
				src[i] = byte(rng.Uint32())
			}
			d32 := make([]float32, elems)
			d64 := make([]float64, elems)
			if err := safetensors.DecodeFloat32(d32, src, dt); err != nil {
				t.Fatalf("%s: %v", dt, err)
			}
			if err := safetensors.DecodeFloat64(d64, src, dt); err != nil {
				t.Fatalf("%s: %v", dt, err)
			}
			for i := range elems {
				want := refDecode(t, dt, src, i)
				if !sameFloat(d64[i], want) {
					t.Fatalf("%s[%d] (n=%d): DecodeFloat64 %v, want %v", dt, i, n, d64[i], want)
				}
				if !sameFloat(float64(d32[i]), float64(float32(want))) {
					t.Fatalf("%s[%d] (n=%d): DecodeFloat32 %v, want %v", dt, i, n, d32[i], float32(want))
				}
			}
		}
	}
}

func TestDecodeKnownValues(t *testing.T) {
	for _, c := range []struct {
		dt   safetensors.DType
		b    byte
		want float64
	}{
		{safetensors.F8_E4M3FNUZ, 0x7F, 240},
		{safetensors.F8_E4M3FNUZ, 0x01, math.Ldexp(1, -10)},
		{safetensors.F8_E4M3FNUZ, 0x40, 1},
		{safetensors.F8_E4M3FNUZ, 0x80, math.NaN()},
		{safetensors.F8_E5M2FNUZ, 0x7F, 57344},
		{safetensors.F8_E5M2FNUZ, 0x40, 1},
		{safetensors.F8_E5M2FNUZ, 0x80, math.NaN()},
		{safetensors.F8_E8M0, 0x7F, 1},
		{safetensors.F8_E8M0, 0x00, math.Ldexp(1, -127)},
		{safetensors.F8_E8M0, 0xFF, math.NaN()},
		{safetensors.F8_E4M3, 0x7E, 448},
		{safetensors.F8_E5M2, 0x7B, 57344},
		{safetensors.F4, 0x7F, 6}, // low nibble 0xF = -6 first, then high 0x7 = 6: checked below
	} {
		out := make([]float64, 1)
		src := []byte{c.b}
		if c.dt == safetensors.F4 {
			out = make([]float64, 2)
		}
		if err := safetensors.DecodeFloat64(out, src, c.dt); err != nil {
			t.Fatal(err)
		}
		if c.dt == safetensors.F4 {
			if out[0] != -6 || out[1] != 6 {
				t.Errorf("F4 0x7F = %v, want [-6 6] (low nibble first)", out)
			}
			continue
		}
		if !sameFloat(out[0], c.want) {
			t.Errorf("%s %#x = %v, want %v", c.dt, c.b, out[0], c.want)
		}
	}
}

func TestDecodeErrors(t *testing.T) {
	for _, dt := range []safetensors.DType{safetensors.C64, safetensors.F6_E2M3, safetensors.F6_E3M2} {
		err := safetensors.DecodeFloat32(make([]float32, 1), make([]byte, 8), dt)
		if !errors.Is(err, safetensors.ErrDTypeMismatch) {
			t.Errorf("%s: %v, want ErrDTypeMismatch", dt, err)
		}
	}
	for _, c := range []struct {
		dst, src int
		dt       safetensors.DType
	}{{2, 3, safetensors.F16}, {1, 4, safetensors.F16}, {3, 4, safetensors.F32}, {3, 1, safetensors.F4}} {
		err := safetensors.DecodeFloat32(make([]float32, c.dst), make([]byte, c.src), c.dt)
		if !errors.Is(err, safetensors.ErrBufferSize) {
			t.Errorf("%s %d bytes into %d: %v, want ErrBufferSize", c.dt, c.src, c.dst, err)
		}
		err = safetensors.DecodeFloat64(make([]float64, c.dst), make([]byte, c.src), c.dt)
		if !errors.Is(err, safetensors.ErrBufferSize) {
			t.Errorf("%s %d bytes into %d float64: %v, want ErrBufferSize", c.dt, c.src, c.dst, err)
		}
	}
	if err := safetensors.EncodeFloat32(make([]byte, 3), []float32{1, 2}, safetensors.F16); !errors.Is(err, safetensors.ErrBufferSize) {
		t.Errorf("EncodeFloat32 short dst: %v", err)
	}
	if err := safetensors.EncodeFloat32(make([]byte, 2), []float32{1, 2}, safetensors.I8); !errors.Is(err, safetensors.ErrDTypeMismatch) {
		t.Errorf("EncodeFloat32 to I8: %v", err)
	}
}

// TestHalvesRoundTrip checks every one of the 2^16 F16 and BF16 values
// survives decode then encode bit for bit (NaN stays NaN).
func TestHalvesRoundTrip(t *testing.T) {
	for i := range 1 << 16 {
		h := uint16(i)
		f := safetensors.F16ToFloat32(h)
		got := safetensors.Float32ToF16(f)
		if f != f {
			if got&0x7C00 != 0x7C00 || got&0x3FF == 0 || got&0x8000 != h&0x8000 {
				t.Fatalf("F16 NaN %#04x came back as %#04x", h, got)
			}
		} else if got != h {
			t.Fatalf("F16 %#04x (%v) came back as %#04x", h, f, got)
		}
		b := safetensors.BF16ToFloat32(h)
		gotb := safetensors.Float32ToBF16(b)
		if b != b {
			if gotb&0x7F80 != 0x7F80 || gotb&0x7F == 0 || gotb&0x8000 != h&0x8000 {
				t.Fatalf("BF16 NaN %#04x came back as %#04x", h, gotb)
			}
		} else if gotb != h {
			t.Fatalf("BF16 %#04x came back as %#04x", h, gotb)
		}
	}
}

// randomBits returns n random float32 bit patterns.
func randomBits(n int) []uint32 {
	in := make([]uint32, n)
	rng := rand.New(rand.NewPCG(3, 4))
	for i := range in {
		in[i] = rng.Uint32()
	}
	return in
}

func bf16Oracle(f float32) uint16 {
	b := math.Float32bits(f)
	lo := b &^ 0xFFFF
	if math.IsInf(float64(f), 0) {
		return uint16(lo >> 16)
	}
	hi := lo + 0x10000
	loVal, hiVal := float64(math.Float32frombits(lo)), float64(math.Float32frombits(hi))
	if hi&0x7FFFFFFF == 0x7F800000 {
		// Round as if the exponent were unbounded, then overflow: the
		// value past the largest finite bfloat16 is 2^128.
		hiVal = math.Copysign(math.Ldexp(1, 128), hiVal)
	}
	dl := math.Abs(float64(f) - loVal)
	dh := math.Abs(hiVal - float64(f))
	switch {
	case dl < dh:
		return uint16(lo >> 16)
	case dh < dl:
		return uint16(hi >> 16)
	case (lo>>16)&1 == 0:
		return uint16(lo >> 16)
	}
	return uint16(hi >> 16)
}

func TestFloat32ToBF16Rounding(t *testing.T) {
	check := func(b uint32) {
		f := math.Float32frombits(b)
		got := safetensors.Float32ToBF16(f)
		if f != f {
			if safetensors.BF16ToFloat32(got) == safetensors.BF16ToFloat32(got) {
				t.Fatalf("NaN %#08x became %#04x", b, got)
			}
			return
		}
		want := bf16Oracle(f)
		if got != want {
			t.Fatalf("%#08x (%v): got %#04x, want %#04x", b, f, got, want)
		}
	}
	for i := range 1 << 16 {
		mid := uint32(i)<<16 | 0x8000
		for _, b := range []uint32{mid - 1, mid, mid + 1, uint32(i) << 16, uint32(i)<<16 | 0xFFFF} {
			check(b)
		}
	}
	for _, b := range randomBits(1 << 20) {
		check(b)
	}
	if got := safetensors.Float32ToBF16(math.MaxFloat32); got != 0x7F80 {
		t.Errorf("MaxFloat32 -> %#04x, want +Inf 0x7F80", got)
	}
}

// TestFloat32ToF16Rounding compares with github.com/x448/float16 (round to
// nearest even) at every tie between adjacent halves, one float32 ulp either
// side, and on random inputs.
func TestFloat32ToF16Rounding(t *testing.T) {
	check := func(f float32) {
		got := safetensors.Float32ToF16(f)
		if f != f {
			if safetensors.F16ToFloat32(got) == safetensors.F16ToFloat32(got) {
				t.Fatalf("NaN %v became %#04x", f, got)
			}
			return
		}
		want := float16.Fromfloat32(f).Bits()
		if got != want {
			t.Fatalf("%v (%#08x): got %#04x, want %#04x (x448/float16)", f, math.Float32bits(f), got, want)
		}
	}
	for i := range 1<<15 - 1 {
		lo := float64(safetensors.F16ToFloat32(uint16(i)))
		hi := float64(safetensors.F16ToFloat32(uint16(i + 1)))
		if math.IsNaN(hi) {
			continue
		}
		if math.IsInf(hi, 1) {
			hi = 65536 // the tie to infinity lies where the next binade would start
		}
		mid := float32((lo + hi) / 2) // exact: 12 significant bits
		for _, s := range []float32{1, -1} {
			m := mid * s
			check(m)
			check(math.Nextafter32(m, 0))
			check(math.Nextafter32(m, float32(math.Inf(1))*s))
		}
	}
	for _, b := range randomBits(1 << 20) {
		check(math.Float32frombits(b))
	}
}

func TestEncodeDecodeRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	src := make([]float32, 200_001)
	for i := range src {
		src[i] = float32(rng.NormFloat64() * 100)
	}
	src[0], src[1], src[2] = float32(math.Inf(1)), float32(math.NaN()), 1e6
	for _, dt := range []safetensors.DType{safetensors.F32, safetensors.F64, safetensors.F16, safetensors.BF16} {
		n, err := safetensors.EncodedSize(dt, len(src))
		if err != nil {
			t.Fatal(err)
		}
		b := make([]byte, n)
		if err := safetensors.EncodeFloat32(b, src, dt); err != nil {
			t.Fatal(err)
		}
		back := make([]float32, len(src))
		if err := safetensors.DecodeFloat32(back, b, dt); err != nil {
			t.Fatal(err)
		}
		for i, f := range src {
			var want float32
			switch dt {
			case safetensors.F16:
				want = float16.Fromfloat32(f).Float32()
			case safetensors.BF16:
				want = safetensors.BF16ToFloat32(bf16Oracle(f))
			default:
				want = f
			}
			if f != f {
				if back[i] == back[i] {
					t.Fatalf("%s: NaN at %d came back as %v", dt, i, back[i])
				}
				continue
			}
			if back[i] != want {
				t.Fatalf("%s[%d]: %v came back as %v, want %v", dt, i, f, back[i], want)
			}
		}
	}
}

func TestFloat32IntoStreams(t *testing.T) {
	// A tensor read through an io.ReaderAt (chunked) must decode like the
	// same bytes in memory; 600k BF16 elements span two chunks.
	rng := rand.New(rand.NewPCG(7, 8))
	data := make([]byte, 2*600_001)
	for i := range data {
		data[i] = byte(rng.Uint32())
	}
	file, err := safetensors.Marshal([]safetensors.TensorData{{Name: "w", DType: safetensors.BF16, Shape: []int64{600_001}, Data: data}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	r, err := safetensors.NewReader(bytes.NewReader(file), int64(len(file)))
	if err != nil {
		t.Fatal(err)
	}
	w, err := r.Tensor("w")
	if err != nil {
		t.Fatal(err)
	}
	got := make([]float32, 600_001)
	if err := w.Float32Into(got); err != nil {
		t.Fatal(err)
	}
	want := make([]float32, 600_001)
	if err := safetensors.DecodeFloat32(want, data, safetensors.BF16); err != nil {
		t.Fatal(err)
	}
	for i := range want {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
			t.Fatalf("element %d: %v, want %v", i, got[i], want[i])
		}
	}
	if err := w.Float32Into(got[:5]); !errors.Is(err, safetensors.ErrBufferSize) {
		t.Errorf("short buffer: %v", err)
	}
	// A truncated source is an I/O error, not a format error.
	r2, err := safetensors.NewReader(bytes.NewReader(file[:len(file)-10]), int64(len(file)))
	if err != nil {
		t.Fatal(err)
	}
	w2, _ := r2.Tensor("w")
	err = w2.Float32Into(got)
	var fe *safetensors.FormatError
	if err == nil || errors.As(err, &fe) {
		t.Errorf("truncated source: %v, want an I/O error", err)
	}
}

// TestRoundingExhaustive checks every one of the 2^32 float32 values against
// x448/float16 (F16) and the float64 oracle (BF16). It takes minutes, so it
// runs only with SAFETENSORS_EXHAUSTIVE=1.
func TestRoundingExhaustive(t *testing.T) {
	if os.Getenv("SAFETENSORS_EXHAUSTIVE") == "" {
		t.Skip("set SAFETENSORS_EXHAUSTIVE=1 to check all 2^32 float32 values")
	}
	var wg sync.WaitGroup
	var bad atomic.Int64
	const parts = 64
	for p := range parts {
		wg.Go(func() {
			lo := uint64(p) << 32 / parts
			hi := uint64(p+1) << 32 / parts
			for b := lo; b < hi && bad.Load() < 10; b++ {
				f := math.Float32frombits(uint32(b))
				h, bf := safetensors.Float32ToF16(f), safetensors.Float32ToBF16(f)
				if f != f {
					if h&0x7C00 != 0x7C00 || h&0x3FF == 0 || bf&0x7F80 != 0x7F80 || bf&0x7F == 0 {
						bad.Add(1)
						t.Errorf("NaN %#08x: F16 %#04x BF16 %#04x", b, h, bf)
					}
					continue
				}
				if w := float16.Fromfloat32(f).Bits(); h != w {
					bad.Add(1)
					t.Errorf("F16 %#08x: %#04x, want %#04x", b, h, w)
				}
				if w := bf16Oracle(f); bf != w {
					bad.Add(1)
					t.Errorf("BF16 %#08x: %#04x, want %#04x", b, bf, w)
				}
			}
		})
	}
	wg.Wait()
}

// FuzzDecode decodes arbitrary bytes as every dtype: never a panic, and
// every element equal to the one-at-a-time reference decoder.
func FuzzDecode(f *testing.F) {
	f.Add([]byte{0x7F, 0xFF, 0x80, 0x00, 0x7C, 0x7D, 0x01, 0x38}, uint8(safetensors.F8_E4M3))
	f.Add([]byte{0x00, 0x7C, 0x01, 0x7C, 0x00, 0xFC}, uint8(safetensors.F16))
	f.Add([]byte{0x80, 0x3F, 0xC0, 0x7F}, uint8(safetensors.BF16))
	f.Add([]byte{0x7F, 0x0F}, uint8(safetensors.F4))
	f.Add(make([]byte, 24), uint8(safetensors.F64))
	f.Fuzz(func(t *testing.T, b []byte, d uint8) {
		dt := safetensors.DType(d % uint8(len(safetensors.DTypes())))
		n, err := safetensors.ElementCount(dt, len(b))
		if err != nil {
			if safetensors.CanDecode(dt) && (dt.Size() == 0 || len(b)%dt.Size() == 0) {
				t.Fatalf("%s, %d bytes: %v", dt, len(b), err)
			}
			return
		}
		v := make([]float64, n)
		if err := safetensors.DecodeFloat64(v, b, dt); err != nil {
			t.Fatal(err)
		}
		w := make([]float32, n)
		if err := safetensors.DecodeFloat32(w, b, dt); err != nil {
			t.Fatal(err)
		}
		for i := range v {
			want := refDecode(t, dt, b, i)
			if !sameFloat(v[i], want) || !sameFloat(float64(w[i]), float64(float32(want))) {
				t.Fatalf("%s[%d]: %v / %v, want %v", dt, i, v[i], w[i], want)
			}
		}
	})
}
