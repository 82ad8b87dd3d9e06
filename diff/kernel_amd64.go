package diff

import "golang.org/x/sys/cpu"

// useAVX2 selects the assembly kernels (four float64 lanes, eight
// elements per iteration) where the CPU has AVX2.
var useAVX2 = cpu.X86.HasAVX2

// cmpF32AVX2 compares the n (a multiple of 8) float32 values at x and y,
// widened to float64, as [compareScalar] does, except that a lane with an
// infinite difference does not set out.maxRel: [kernelOut.addTo] does.
//
//go:noescape
func cmpF32AVX2(x, y *float32, n int, eps float64, out *kernelOut)

// cmpF64AVX2 is cmpF32AVX2 for float64 values.
//
//go:noescape
func cmpF64AVX2(x, y *float64, n int, eps float64, out *kernelOut)

// compareF32 is compareScalar for float32, with the AVX2 kernel where the
// CPU has it.
func compareF32(r *chunkResult, x, y []float32, eps float64) {
	y = y[:len(x)]
	n8 := len(x) &^ 7
	if useAVX2 && n8 > 0 {
		var o kernelOut
		cmpF32AVX2(&x[0], &y[0], n8, eps, &o)
		o.addTo(r)
		x, y = x[n8:], y[n8:]
	}
	compareScalar(r, x, y, eps)
}

// compareF64 is compareScalar for float64, with the AVX2 kernel where the
// CPU has it.
func compareF64(r *chunkResult, x, y []float64, eps float64) {
	y = y[:len(x)]
	n8 := len(x) &^ 7
	if useAVX2 && n8 > 0 {
		var o kernelOut
		cmpF64AVX2(&x[0], &y[0], n8, eps, &o)
		o.addTo(r)
		x, y = x[n8:], y[n8:]
	}
	compareScalar(r, x, y, eps)
}
