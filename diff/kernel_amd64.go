package diff

import (
	"math"

	"golang.org/x/sys/cpu"

	"github.com/gosafetensors/safetensors"
)

// useAVX2 selects the assembly kernels (four float64 lanes, eight
// elements per iteration) where the CPU has AVX2; useF16C the F16 one,
// which converts with the F16C instructions.
var (
	useAVX2 = cpu.X86.HasAVX2
	useF16C = useAVX2 && cpu.X86.HasF16C
)

// addTo merges o into r. An infinite difference makes the relative
// difference infinite: the kernels leave that to this merge.
func (o *kernelOut) addTo(r *chunkResult) {
	r.maxAbs = max(r.maxAbs, o.maxAbs)
	r.maxRel = max(r.maxRel, o.maxRel)
	if math.IsInf(o.maxAbs, 1) {
		r.maxRel = math.Inf(1)
	}
	r.differing += o.differing
}

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

// cmpBF16AVX2 is cmpF32AVX2 for the n (a multiple of 8) little-endian
// BF16 values at x and y.
//
//go:noescape
func cmpBF16AVX2(x, y *byte, n int, eps float64, out *kernelOut)

// cmpF16F16C is cmpF32AVX2 for the n (a multiple of 8) little-endian F16
// values at x and y.
//
//go:noescape
func cmpF16F16C(x, y *byte, n int, eps float64, out *kernelOut)

// compare16 compares the BF16 or F16 elements in a and b (of equal length)
// in place, without decoding them first, and reports whether it could: it
// needs the assembly kernel for the dtype.
func compare16(r *chunkResult, a, b []byte, dt safetensors.DType, eps float64) bool {
	var kernel func(x, y *byte, n int, eps float64, out *kernelOut)
	switch {
	case dt == safetensors.BF16 && useAVX2:
		kernel = cmpBF16AVX2
	case dt == safetensors.F16 && useF16C:
		kernel = cmpF16F16C
	default:
		return false
	}
	b = b[:len(a)]
	for len(a) >= 16 {
		n := min(len(a)/2&^7, kernelRun)
		var o kernelOut
		kernel(&a[0], &b[0], n, eps, &o)
		o.addTo(r)
		a, b = a[2*n:], b[2*n:]
	}
	// The last few elements, decoded (exactly) to float32.
	var fa, fb [8]float32
	k := len(a) / 2
	safetensors.DecodeFloat32(fa[:k], a, dt)
	safetensors.DecodeFloat32(fb[:k], b, dt)
	compareScalar(r, fa[:k], fb[:k], eps)
	return true
}

// compareF32 is compareScalar for float32, with the AVX2 kernel where the
// CPU has it.
func compareF32(r *chunkResult, x, y []float32, eps float64) { compareKernel(r, x, y, eps, cmpF32AVX2) }

// compareF64 is compareScalar for float64, with the AVX2 kernel where the
// CPU has it.
func compareF64(r *chunkResult, x, y []float64, eps float64) { compareKernel(r, x, y, eps, cmpF64AVX2) }

// compareKernel runs kernel over whole groups of 8 elements, at most
// kernelRun at a time (assembly cannot be preempted), and compareScalar
// over the rest.
func compareKernel[F float32 | float64](r *chunkResult, x, y []F, eps float64, kernel func(x, y *F, n int, eps float64, out *kernelOut)) {
	y = y[:len(x)]
	for useAVX2 && len(x) >= 8 {
		n := min(len(x)&^7, kernelRun)
		var o kernelOut
		kernel(&x[0], &y[0], n, eps, &o)
		o.addTo(r)
		x, y = x[n:], y[n:]
	}
	compareScalar(r, x, y, eps)
}
