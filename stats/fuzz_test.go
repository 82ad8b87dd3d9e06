package stats_test

import (
	"context"
	"testing"

	"github.com/gosafetensors/safetensors"
	"github.com/gosafetensors/safetensors/stats"
)

// FuzzStats summarises arbitrary bytes as every dtype: never a panic, the
// NaN/Inf counts equal CountNonFinite's, and the statistics match the
// big-float reference on the decoded values.
func FuzzStats(f *testing.F) {
	f.Add([]byte{0x7F, 0xFF, 0x80, 0x00, 0x7C, 0x7D, 0x01, 0x38}, uint8(safetensors.F8_E5M2))
	f.Add([]byte{0, 0, 0x80, 0x7F, 0, 0, 0xC0, 0x7F, 0, 0, 0x80, 0x3F, 0, 0, 0, 0}, uint8(safetensors.F32))
	f.Fuzz(func(t *testing.T, b []byte, d uint8) {
		dt := safetensors.DType(d % uint8(len(safetensors.DTypes())))
		bits := int64(len(b)) * 8
		if bits%int64(dt.Bits()) != 0 {
			return
		}
		x := safetensors.NewTensorBytes(safetensors.TensorInfo{Name: "x", DType: dt, Shape: []int64{bits / int64(dt.Bits())},
			DataOffsets: [2]int64{0, int64(len(b))}}, b, "")
		got, err := stats.Tensor(context.Background(), x)
		if err != nil {
			t.Fatal(err)
		}
		nf, err := stats.CountNonFinite(dt, b)
		if err != nil || got.NonFinite != nf {
			t.Fatalf("%s: counted %+v, CountNonFinite %+v %v", dt, got.NonFinite, nf, err)
		}
		if !safetensors.CanDecode(dt) {
			return
		}
		v := make([]float64, got.Count)
		if err := safetensors.DecodeFloat64(v, b, dt); err != nil {
			t.Fatal(err)
		}
		want := naive(v)
		if got.Finite != want.Finite || got.Zeros != want.Zeros || !near(got.Min, want.Min, 0) || !near(got.Max, want.Max, 0) {
			t.Fatalf("%s: %+v, want %+v", dt, got, want)
		}
		if want.Std < 1e150 && (!near(got.Mean, want.Mean, 1e-9) && !near(got.Mean-want.Mean, 0, 1e-9*want.Std) ||
			!near(got.Std, want.Std, 1e-6) && got.Std-want.Std > 1e-9*(want.Std+max(-want.Min, want.Max))) {
			t.Fatalf("%s: mean %v std %v, want %v %v", dt, got.Mean, got.Std, want.Mean, want.Std)
		}
	})
}
