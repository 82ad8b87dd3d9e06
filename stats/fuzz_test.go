package stats_test

import (
	"context"
	"math"
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
		if tolMean, tolStd, ok := summationBounds(v, want); ok &&
			(math.Abs(got.Mean-want.Mean) > tolMean || math.Abs(got.Std-want.Std) > tolStd) {
			t.Fatalf("%s: mean %v std %v, want %v %v (bounds %.3g, %.3g)", dt, got.Mean, got.Std, want.Mean, want.Std, tolMean, tolStd)
		}
	})
}

// summationBounds returns how far a float64 mean and standard deviation
// of the values v may be from the exact ones (want), and ok=false when
// squares would overflow and no bound is useful. With u = 2^-53, n finite
// values of magnitude at most M and a shift k among them (|x-k| <= 2M):
// each of the n additions of x-k to the running sum errs by at most u times
// the partial sum, at most 2nM, so the sum errs by at most 2n^2 uM and the
// mean by 2n uM, plus a few rounding steps of the final division and
// shift; the sum of squared deviations (terms at most 4M^2) errs by
// 4n^2 uM^2, so the variance by 4n uM^2 plus the cancellation of
// (sum)^2/n, bounded the same way. A relative bound alone fails for a true
// mean of 0 (the 14.10 input: -3.47e-18 against 0); an absolute bound
// alone fails for large values. The std bound follows from the variance
// bound dv: |s1-s2| = |v1-v2|/(s1+s2) <= min(dv/(s1+s2), sqrt(dv)). The
// factor 4 over these worst cases covers the pairwise merges of blocks
// and chunks, each a few roundings of values within the same bounds.
func summationBounds(v []float64, want stats.Stats) (tolMean, tolStd float64, ok bool) {
	if want.Finite == 0 {
		return 0, 0, true // NaN on both sides, checked by near above
	}
	const u = 0x1p-53
	var m float64
	for _, x := range v {
		if !math.IsNaN(x) && !math.IsInf(x, 0) {
			m = max(m, math.Abs(x))
		}
	}
	if m > 1e150 {
		return 0, 0, false
	}
	n := float64(want.Finite)
	tolMean = 4*(2*n+4)*u*m + 4*u*math.Abs(want.Mean)
	dv := 4 * (8*n + 8) * u * m * m
	tolStd = min(math.Sqrt(dv), dv/max(want.Std, math.SmallestNonzeroFloat64)) + 4*u*want.Std
	return tolMean, tolStd, true
}
