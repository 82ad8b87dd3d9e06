package safetensors_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/gosafetensors/safetensors"
)

// interleaved runs ours and the baseline alternately, b.N times each, and
// reports the median throughput of both (bytes per second of input) and
// ratio = median time of ours / median time of the baseline, so a noisy
// shared machine slows both alike.
func interleaved(b *testing.B, bytes int64, baseline, ours func()) {
	b.Helper()
	var tb, to []time.Duration
	baseline()
	ours()
	b.ResetTimer()
	for range b.N {
		t0 := time.Now()
		baseline()
		t1 := time.Now()
		ours()
		t2 := time.Now()
		tb, to = append(tb, t1.Sub(t0)), append(to, t2.Sub(t1))
	}
	b.StopTimer()
	mb, mo := median(tb), median(to)
	b.ReportMetric(float64(bytes)/mb.Seconds()/1e9, "base-GB/s")
	b.ReportMetric(float64(bytes)/mo.Seconds()/1e9, "ours-GB/s")
	b.ReportMetric(mo.Seconds()/mb.Seconds(), "ratio")
}

func median(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}

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
			interleaved(b, int64(len(src)), func() { copy(cp, src) }, func() {
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
			interleaved(b, int64(len(in)), func() { copy(cp, in) }, func() {
				if err := safetensors.EncodeFloat32(dst, src, dt); err != nil {
					b.Fatal(err)
				}
			})
		})
	}
}
