package diff_test

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
	"github.com/gosafetensors/safetensors/diff"
)

// benchFile: see stats' benchmark; the same generator, so seed 0 files are
// shared between the two packages' benchmarks.
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
	rng := rand.New(rand.NewPCG(1, 1))
	buf := make([]byte, per)
	for i, t := range fw.Tensors() {
		for j := 0; j < len(buf); j += 4 {
			r := rng.Uint32()
			binary.LittleEndian.PutUint32(buf[j:], 0x3F800000|r&0x807FFFFF)
		}
		stride := 64 << 10 // one changed element per 64 KiB...
		if seed >= 0x100 {
			stride = 4 // ...or every element
		}
		if seed != 0 {
			for j := i * 4 % stride; j < len(buf); j += stride {
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

// BenchmarkDiff1GiB compares two 1 GiB F32 files against reading both once:
// "identical" (equal bytes: the memcmp path), "sparse" (one element in every
// 64 KiB differs: only runs of 64 elements around them are decoded) and
// "dense" (every element differs: everything is decoded and compared).
func BenchmarkDiff1GiB(b *testing.B) {
	a := benchFile(b, 0)
	for _, c := range []struct {
		name string
		seed uint64
	}{{"identical", 0}, {"sparse", 0x10}, {"dense", 0x110}} {
		other := a
		if c.seed != 0 {
			other = benchFile(b, c.seed)
		} else {
			// A second file with the same bytes, so both are read.
			other = filepath.Join(filepath.Dir(a), "f32-1g-copy.safetensors")
			if _, err := os.Stat(other); err != nil {
				data, err := os.ReadFile(a)
				if err != nil {
					b.Fatal(err)
				}
				if err := os.WriteFile(other, data, 0o644); err != nil {
					b.Fatal(err)
				}
			}
		}
		b.Run(c.name, func(b *testing.B) {
			sa, _ := os.Stat(a)
			sb, _ := os.Stat(other)
			benchcmp.Interleaved(b, sa.Size()+sb.Size(), func() { benchcmp.ReadOnce(b, a, other) }, func() {
				fa, err := safetensors.Open(a)
				if err != nil {
					b.Fatal(err)
				}
				defer fa.Close()
				fb, err := safetensors.Open(other)
				if err != nil {
					b.Fatal(err)
				}
				defer fb.Close()
				r, err := diff.Compare(context.Background(), fa, fb)
				if err != nil {
					b.Fatal(err)
				}
				if r.TensorsEqual() != (c.seed == 0) {
					b.Fatalf("equal = %v", r.TensorsEqual())
				}
			})
		})
	}
}
