package compressed

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/gosafetensors/safetensors"
)

// genWeights returns n normally distributed weights (std 0.02) from a
// fixed seed: the same bytes on every run and platform.
func genWeights(seed uint64, n int) []float32 {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	w := make([]float32, n)
	for i := range w {
		w[i] = float32(r.NormFloat64() * 0.02)
	}
	return w
}

// bf16Bytes rounds to BF16 (round to nearest even) and returns LE bytes.
func bf16Bytes(w []float32) []byte {
	b := make([]byte, 2*len(w))
	for i, f := range w {
		u := math.Float32bits(f)
		u += 0x7fff + (u>>16)&1
		binary.LittleEndian.PutUint16(b[2*i:], uint16(u>>16))
	}
	return b
}

func f32Bytes(w []float32) []byte {
	b := make([]byte, 4*len(w))
	for i, f := range w {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(f))
	}
	return b
}

// genModel builds a safetensors file of weights of dtype dt totalling about
// size bytes: matrices of [rows, 1024] elements plus a few small tensors
// (small.weight [512, 1024] from 16 MiB up, else [16, 1024]; a bias, an I64 position table, an empty tensor).
func genModel(t testing.TB, dt safetensors.DType, size int64, seed uint64) []byte {
	t.Helper()
	const cols = 1024
	el := int64(dt.Size())
	var tensors []safetensors.TensorData
	var made int64
	for i := 0; made < size; i++ {
		rows := min(int64(4096), max(1, (size-made)/(cols*el)))
		w := genWeights(seed+uint64(i), int(rows*cols))
		var data []byte
		if dt == safetensors.BF16 {
			data = bf16Bytes(w)
		} else {
			data = f32Bytes(w)
		}
		tensors = append(tensors, safetensors.TensorData{Name: fmt.Sprintf("layers.%d.weight", i), DType: dt, Shape: []int64{rows, cols}, Data: data})
		made += int64(len(data))
	}
	pos := make([]byte, 8*100)
	for i := range 100 {
		binary.LittleEndian.PutUint64(pos[8*i:], uint64(i))
	}
	smallRows := int64(16)
	if size >= 16<<20 {
		smallRows = 512
	}
	small := genWeights(seed+1000, int(smallRows*cols))
	smallData := f32Bytes(small)
	if dt == safetensors.BF16 {
		smallData = bf16Bytes(small)
	}
	tensors = append(tensors,
		safetensors.TensorData{Name: "small.weight", DType: dt, Shape: []int64{smallRows, cols}, Data: smallData},
		safetensors.TensorData{Name: "bias", DType: dt, Shape: []int64{3}, Data: make([]byte, 3*el)},
		safetensors.TensorData{Name: "position_ids", DType: safetensors.I64, Shape: []int64{100}, Data: pos},
		safetensors.TensorData{Name: "empty", DType: safetensors.F32, Shape: []int64{0, 4}, Data: nil},
	)
	b, err := safetensors.Marshal(tensors, map[string]string{"format": "pt"})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// compressBytes compresses orig with opts and returns the compressed bytes.
func compressBytes(t testing.TB, orig []byte, opts ...WriteOption) []byte {
	t.Helper()
	dir := t.TempDir()
	f, err := os.Create(filepath.Join(dir, "c"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := Compress(context.Background(), f, bytes.NewReader(orig), int64(len(orig)), opts...); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(f.Name())
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func decompressBytes(comp []byte, opts ...ReadOption) ([]byte, error) {
	var out bytes.Buffer
	_, err := Decompress(context.Background(), &out, bytes.NewReader(comp), int64(len(comp)), opts...)
	return out.Bytes(), err
}

var allCodecs = []Codec{Zstd, LZ4, Grouped}
