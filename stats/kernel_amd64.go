package stats

import "golang.org/x/sys/cpu"

// useAVX2 selects the assembly kernel for F32 blocks.
var useAVX2 = cpu.X86.HasAVX2 && cpu.X86.HasFMA

// sumsF32AVX2 computes, over the n (a multiple of 8) float32 values at v
// widened to float64: out[0] = sum of (x-k), out[1] = sum of (x-k)^2,
// out[2] = min, out[3] = max, out[4] = smallest |x| (starting from k).
// NaN and infinities give meaningless min/max; the caller checks the sums.
//
//go:noescape
func sumsF32AVX2(v *float32, n int, k float64, out *[5]float64)

// addBlockF32 is addBlock for float32 values, with the AVX2 kernel (eight
// values per iteration, four float64 lanes) where the CPU has it.
func addBlockF32(a *acc, v []float32) {
	n8 := len(v) &^ 7
	if !useAVX2 || n8 == 0 {
		addBlock(a, v)
		return
	}
	k := float64(v[0])
	var out [5]float64
	sumsF32AVX2(&v[0], n8, k, &out)
	s, q, mn, mx, small := out[0], out[1], out[2], out[3], out[4]
	for _, f := range v[n8:] {
		x := float64(f)
		d := x - k
		s += d
		q += d * d
		mn, mx, small = min(mn, x), max(mx, x), min(small, abs(x))
	}
	finishBlock(a, v, k, s, q, mn, mx, small)
}
