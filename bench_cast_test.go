package safetensors_test

import (
	"fmt"
	"github.com/gosafetensors/safetensors/internal/benchcmp"
	"math/rand/v2"
	"testing"

	"github.com/gosafetensors/safetensors"
)

// BenchmarkDecode converts 64 MiB of input (and 64 KiB, cache-resident, for
// the cost of the loop alone) to float32 into a reused buffer, against copy
// of the same input bytes; GB/s are of input.
func BenchmarkDecode(b *testing.B) {
	for _, c := range []struct {
		dt   safetensors.DType
		size int
	}{{safetensors.BF16, 64 << 10}, {safetensors.F16, 64 << 10}, {safetensors.BF16, 64 << 20}, {safetensors.F16, 64 << 20}, {safetensors.F8_E4M3, 64 << 20}, {safetensors.F32, 64 << 20}} {
		dt := c.dt
		b.Run(fmt.Sprintf("%s/%dKiB", dt, c.size>>10), func(b *testing.B) {
			src := make([]byte, c.size)
			rng := rand.New(rand.NewPCG(1, 1))
			for i := range src {
				src[i] = byte(rng.Uint32())
			}
			n := len(src) / dt.Size()
			dst := make([]float32, n)
			cp := make([]byte, len(src))
			benchcmp.Interleaved(b, int64(len(src)), func() { copy(cp, src) }, func() {
				if err := safetensors.DecodeFloat32(dst, src, dt); err != nil {
					b.Fatal(err)
				}
			})
		})
	}
}

// BenchmarkEncode rounds 16M float32 to BF16 and F16, against copy of the
// same 64 MiB of input.
func BenchmarkEncode(b *testing.B) {
	for _, dt := range []safetensors.DType{safetensors.BF16, safetensors.F16} {
		b.Run(dt.String(), func(b *testing.B) {
			src := make([]float32, 16<<20)
			rng := rand.New(rand.NewPCG(1, 1))
			for i := range src {
				src[i] = float32(rng.NormFloat64())
			}
			dst := make([]byte, 2*len(src))
			in := make([]byte, 4*len(src))
			cp := make([]byte, len(in))
			benchcmp.Interleaved(b, int64(len(in)), func() { copy(cp, in) }, func() {
				if err := safetensors.EncodeFloat32(dst, src, dt); err != nil {
					b.Fatal(err)
				}
			})
		})
	}
}
