package stats

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestKernelMatchesGo checks the F32 kernel (assembly where the CPU has
// it) against the portable loop on every length up to 40 and on whole
// blocks, with zeros, negative values, huge values and non-finite ones.
func TestKernelMatchesGo(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 5))
	for trial := range 2000 {
		n := trial%41 + 1
		if trial%10 == 0 {
			n = block
		}
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(rng.NormFloat64() * 1000)
			switch rng.IntN(60) {
			case 0:
				v[i] = 0
			case 1:
				v[i] = float32(math.Copysign(0, -1))
			case 2:
				v[i] = math.MaxFloat32
			case 3:
				if trial%3 == 0 {
					v[i] = float32(math.NaN())
				}
			case 4:
				if trial%5 == 0 {
					v[i] = float32(math.Inf(-1))
				}
			}
		}
		got, want := newAcc(), newAcc()
		addBlockF32(&got, v)
		addBlock(&want, v)
		if got.n != want.n || got.zeros != want.zeros || got.nf != want.nf || got.min != want.min || got.max != want.max ||
			!closeTo(got.mean, want.mean) || !closeTo(got.m2, want.m2) {
			t.Fatalf("n=%d (AVX2 %v): kernel %+v, Go %+v", n, useAVX2, got, want)
		}
	}
}

func closeTo(a, b float64) bool {
	return a == b || math.Abs(a-b) <= 1e-12*math.Max(math.Abs(a), math.Abs(b)) || math.Abs(a-b) < 1e-9
}
