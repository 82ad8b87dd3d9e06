package diff

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gosafetensors/safetensors"
)

// reference compares x and y the plain way: one division per differing
// pair, in order, as the documentation of [Tensor] states it.
func reference(x, y []float64, eps float64) kernelOut {
	var o kernelOut
	for i := range x {
		a, b := x[i], y[i]
		if a == b {
			continue
		}
		if math.IsNaN(a) || math.IsNaN(b) {
			if math.IsNaN(a) != math.IsNaN(b) {
				o.differing++
			}
			continue
		}
		d := math.Abs(a - b)
		o.maxAbs = math.Max(o.maxAbs, d)
		if math.IsInf(d, 0) {
			o.maxRel = math.Inf(1)
		} else {
			o.maxRel = math.Max(o.maxRel, d/math.Max(math.Abs(a), math.Abs(b)))
		}
		if d > eps {
			o.differing++
		}
	}
	return o
}

var specials = []float64{0, math.Copysign(0, -1), math.Inf(1), math.Inf(-1), math.NaN(),
	math.Float64frombits(0xFFF8000000000001), math.MaxFloat64, -math.MaxFloat64,
	math.SmallestNonzeroFloat64, -math.SmallestNonzeroFloat64, 0x1p-1022, 0x1p-1023, 1, -1,
	math.Nextafter(1, 2), math.MaxFloat32, -math.MaxFloat32, math.SmallestNonzeroFloat32, 0x1p-126, 0x1p-127}

// values returns n random pairs mixing every kind of value: random bits
// (huge, tiny, subnormal, NaN and Inf patterns), special values, equal
// values (runs of equal zeros and infinities among them), neighbours a
// few units in the last place apart, values close to each other relative
// to their size, and integers one apart; narrow rounds the pairs to
// float32.
func values(rng *rand.Rand, n int, narrow bool) ([]float64, []float64) {
	x, y := make([]float64, n), make([]float64, n)
	mode := rng.IntN(6) // per call: some slices are all one kind
	for i := range x {
		m := mode
		if m == 4 {
			m = rng.IntN(4)
		}
		if m == 5 { // mostly equal zeros and infinities, a few special pairs
			m = 1
			if rng.IntN(16) != 0 {
				x[i] = specials[rng.IntN(4)]
				y[i] = x[i]
				continue
			}
		}
		switch m {
		case 0:
			x[i], y[i] = math.Float64frombits(rng.Uint64()), math.Float64frombits(rng.Uint64())
			if narrow {
				x[i] = float64(math.Float32frombits(rng.Uint32()))
				y[i] = float64(math.Float32frombits(rng.Uint32()))
			}
		case 1:
			x[i], y[i] = specials[rng.IntN(len(specials))], specials[rng.IntN(len(specials))]
		case 2:
			x[i] = rng.NormFloat64() * math.Pow(2, float64(rng.IntN(80)-40))
			y[i] = x[i]
			for range rng.IntN(4) {
				y[i] = math.Nextafter(y[i], math.Inf(rng.IntN(2)*2-1))
			}
		case 3:
			x[i] = rng.NormFloat64()
			y[i] = x[i] * (1 + rng.NormFloat64()*1e-3)
			switch rng.IntN(8) {
			case 0:
				y[i] = x[i]
			case 1: // integers one apart: exactly epsilon 1
				x[i] = float64(rng.IntN(100))
				y[i] = x[i] + 1
			}
		}
		if rng.IntN(2) == 0 {
			x[i], y[i] = y[i], x[i]
		}
		if narrow {
			x[i], y[i] = float64(float32(x[i])), float64(float32(y[i]))
		}
	}
	return x, y
}

func same(a, b kernelOut) bool {
	return math.Float64bits(a.maxAbs) == math.Float64bits(b.maxAbs) &&
		math.Float64bits(a.maxRel) == math.Float64bits(b.maxRel) && a.differing == b.differing
}

func out(r chunkResult) kernelOut { return kernelOut{r.maxAbs, r.maxRel, r.differing} }

// TestKernels checks the AVX2 kernels (where the CPU has them) and the Go
// loop against the reference, bit for bit, for float32 and float64 values
// of every kind, lengths around the kernels' eight elements, several
// epsilons, and the elements split into parts at random points (the
// result must not depend on how a tensor is cut into chunks).
func TestKernels(t *testing.T) {
	t.Logf("AVX2: %v", useAVX2)
	rng := rand.New(rand.NewPCG(5, 5))
	lengths := []int{0, 1, 2, 7, 8, 9, 15, 16, 17, 31, 33, 64, 100, 1000, 4096, 4099, kernelRun*3/2 + 5}
	for iter := range 12 {
		for _, n := range lengths {
			for _, narrow := range []bool{false, true} {
				x, y := values(rng, n, narrow)
				for _, eps := range []float64{0, 1e-300, 1e-3, 1, math.MaxFloat64} {
					want := reference(x, y, eps)
					var r chunkResult
					compareScalar(&r, x, y, eps)
					if got := out(r); !same(got, want) {
						t.Fatalf("iter %d n %d narrow %v eps %v: Go loop %+v, want %+v", iter, n, narrow, eps, got, want)
					}
					r = chunkResult{}
					compareF64(&r, x, y, eps)
					if got := out(r); !same(got, want) {
						t.Fatalf("iter %d n %d narrow %v eps %v: float64 kernel %+v, want %+v", iter, n, narrow, eps, got, want)
					}
					// Cut into parts, each compared into its own result and
					// merged as the chunks of a tensor are.
					var merged chunkResult
					for lo := 0; lo < n; {
						hi := min(n, lo+1+rng.IntN(n))
						var p chunkResult
						compareF64(&p, x[lo:hi], y[lo:hi], eps)
						merged.maxAbs = max(merged.maxAbs, p.maxAbs)
						merged.maxRel = max(merged.maxRel, p.maxRel)
						merged.differing += p.differing
						lo = hi
					}
					if got := out(merged); !same(got, want) {
						t.Fatalf("iter %d n %d narrow %v eps %v: merged parts %+v, want %+v", iter, n, narrow, eps, got, want)
					}
					if !narrow {
						continue
					}
					x32, y32 := make([]float32, n), make([]float32, n)
					for i := range x {
						x32[i], y32[i] = float32(x[i]), float32(y[i])
					}
					r = chunkResult{}
					compareF32(&r, x32, y32, eps)
					if got := out(r); !same(got, want) {
						t.Fatalf("iter %d n %d eps %v: float32 kernel %+v, want %+v", iter, n, eps, got, want)
					}
					r = chunkResult{}
					compareScalar(&r, x32, y32, eps)
					if got := out(r); !same(got, want) {
						t.Fatalf("iter %d n %d eps %v: float32 Go loop %+v, want %+v", iter, n, eps, got, want)
					}
				}
			}
		}
	}
}

// TestRelativeNotMissed: the quotient of the second pair is one unit in
// the last place above the first's, and maxRel*m rounds to exactly its
// difference; a filter testing d > maxRel*m (the previous implementation)
// kept the smaller quotient.
func TestRelativeNotMissed(t *testing.T) {
	x := []float64{1.6917025195138842, 1.4248635100291631}
	y := []float64{0.9869275092728585, 0.8312554830331228}
	want := reference(x, y, 0)
	if want.maxRel != 0.4166069401158928 {
		t.Fatalf("reference max rel %v", want.maxRel)
	}
	// Alone, and eight apart with ones between and after: the same lane
	// of the AVX2 kernel.
	ones := []float64{1, 1, 1, 1, 1, 1, 1}
	padded := func(v []float64) []float64 {
		return append(append(append([]float64{v[0]}, ones...), v[1]), ones...)
	}
	for _, pad := range []bool{false, true} {
		xs, ys := x, y
		if pad {
			xs, ys = padded(x), padded(y)
		}
		var r chunkResult
		compareScalar(&r, xs, ys, 0)
		if r.maxRel != want.maxRel {
			t.Errorf("pad %v: Go loop max rel %v, want %v", pad, r.maxRel, want.maxRel)
		}
		r = chunkResult{}
		compareF64(&r, xs, ys, 0)
		if r.maxRel != want.maxRel {
			t.Errorf("pad %v: kernel max rel %v, want %v", pad, r.maxRel, want.maxRel)
		}
	}
}

// TestCompare16 checks the BF16 and F16 kernels (where the CPU has them)
// against the reference over the decoded values: every bit pattern
// against a random one, its neighbour and itself, at lengths that leave
// every tail of fewer than eight elements.
func TestCompare16(t *testing.T) {
	t.Logf("AVX2: %v, F16C: %v", useAVX2, useF16C)
	rng := rand.New(rand.NewPCG(6, 6))
	const n = 1 << 16
	for _, dt := range []safetensors.DType{safetensors.BF16, safetensors.F16} {
		for _, kind := range []string{"random", "neighbour", "itself"} {
			a, b := make([]byte, 2*n), make([]byte, 2*n)
			for i := range n {
				j := uint16(rng.Uint32())
				switch kind {
				case "neighbour":
					j = uint16(i) + 1
				case "itself":
					j = uint16(i)
				}
				binary.LittleEndian.PutUint16(a[2*i:], uint16(i))
				binary.LittleEndian.PutUint16(b[2*i:], j)
			}
			va, vb := make([]float64, n), make([]float64, n)
			if err := safetensors.DecodeFloat64(va, a, dt); err != nil {
				t.Fatal(err)
			}
			if err := safetensors.DecodeFloat64(vb, b, dt); err != nil {
				t.Fatal(err)
			}
			for _, m := range []int{n, n - 1, n - 7, 9, 8, 7, 1, 0} {
				for _, eps := range []float64{0, 1e-3} {
					want := reference(va[:m], vb[:m], eps)
					var r chunkResult
					if !compare16(&r, a[:2*m], b[:2*m], dt, eps) {
						t.Skipf("%s: no kernel", dt)
					}
					if got := out(r); !same(got, want) {
						t.Errorf("%s %s %d eps %v: %+v, want %+v", dt, kind, m, eps, got, want)
					}
				}
			}
		}
	}
}
