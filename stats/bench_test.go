package stats_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"github.com/gosafetensors/safetensors/internal/benchcmp"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/gosafetensors/safetensors"
	"github.com/gosafetensors/safetensors/stats"
)

// benchFile returns a safetensors file of 8 F32 tensors of 128 MiB (1 GiB
// of data) under /tmp, made once and reused; values are random in ±[1, 2)
// with bit flip seed selecting a variant.
func benchFile(b *testing.B, seed uint64) string {
	b.Helper()
	dir := filepath.Join(os.TempDir(), "safetensors-bench")
	os.MkdirAll(dir, 0o755)
	path := filepath.Join(dir, fmt.Sprintf("f32-1g-%d.safetensors", seed))
	if _, err := os.Stat(path); err == nil {
		return path
	}
	const per = 128 << 20
	var infos []safetensors.TensorInfo
	for i := range 8 {
		infos = append(infos, safetensors.TensorInfo{Name: fmt.Sprintf("layers.%d.weight", i), DType: safetensors.F32, Shape: []int64{per / 4 / 4096, 4096}})
	}
	fw, err := safetensors.Create(path, infos, nil)
	if err != nil {
		b.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 1)) // the same values for every seed...
	buf := make([]byte, per)
	for i, t := range fw.Tensors() {
		for j := 0; j < len(buf); j += 4 {
			r := rng.Uint32()
			binary.LittleEndian.PutUint32(buf[j:], 0x3F800000|r&0x807FFFFF)
		}
		if seed != 0 { // ...except one element in every 64 KiB
			for j := i * 4; j < len(buf); j += 64 << 10 {
				buf[j] ^= byte(seed)
			}
		}
		if err := fw.WriteTensor(t.Name, buf); err != nil {
			fw.Abort()
			b.Fatal(err)
		}
	}
	if err := fw.Close(); err != nil {
		b.Fatal(err)
	}
	return path
}

// BenchmarkStats1GiB summarises a 1 GiB F32 file, against one read of the
// file, mapped (Open) and through pread (NewReader over *os.File).
func BenchmarkStats1GiB(b *testing.B) {
	path := benchFile(b, 0)
	st, _ := os.Stat(path)
	b.Run("mapped", func(b *testing.B) {
		benchcmp.Interleaved(b, st.Size(), func() { benchcmp.ReadOnce(b, path) }, func() {
			f, err := safetensors.Open(path)
			if err != nil {
				b.Fatal(err)
			}
			defer f.Close()
			if _, err := stats.Compute(context.Background(), f, nil); err != nil {
				b.Fatal(err)
			}
		})
	})
	b.Run("pread", func(b *testing.B) {
		benchcmp.Interleaved(b, st.Size(), func() { benchcmp.ReadOnce(b, path) }, func() {
			f, err := os.Open(path)
			if err != nil {
				b.Fatal(err)
			}
			defer f.Close()
			r, err := safetensors.NewReader(f, st.Size())
			if err != nil {
				b.Fatal(err)
			}
			if _, err := stats.Compute(context.Background(), r, nil); err != nil {
				b.Fatal(err)
			}
		})
	})
}

// BenchmarkKernel summarises an in-memory 16 MiB F32 tensor on one worker:
// the per-value cost of the computation alone.
func BenchmarkKernel(b *testing.B) {
	v := make([]float32, 4<<20)
	rng := rand.New(rand.NewPCG(1, 1))
	for i := range v {
		v[i] = float32(rng.NormFloat64())
	}
	x, _ := safetensors.FromFloat32("x", []int64{int64(len(v))}, v, safetensors.F32)
	b.SetBytes(int64(4 * len(v)))
	for b.Loop() {
		if _, err := stats.Tensor(context.Background(), x, stats.WithWorkers(1)); err != nil {
			b.Fatal(err)
		}
	}
}
