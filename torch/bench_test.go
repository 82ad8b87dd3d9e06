package torch

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/gosafetensors/safetensors/torch/torchtest"
)

var (
	manyOnce sync.Once
	manyZip  []byte
)

func manyTensors(b *testing.B) []byte {
	manyOnce.Do(func() {
		ts := make([]torchtest.Tensor, 100000)
		data := f32s(4)
		for i := range ts {
			ts[i] = torchtest.Tensor{Name: fmt.Sprintf("layers.%d.weight", i), DType: "F32", Shape: []int64{2, 2}, Data: data}
		}
		var buf bytes.Buffer
		if err := torchtest.WriteZip(&buf, ts, torchtest.Options{}); err != nil {
			b.Fatal(err)
		}
		manyZip = buf.Bytes()
	})
	return manyZip
}

// BenchmarkOpen100kTensors opens (and scans) a 100,000-tensor checkpoint.
func BenchmarkOpen100kTensors(b *testing.B) {
	data := manyTensors(b)
	r := bytes.NewReader(data)
	b.Run("Open", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		for i := 0; i < b.N; i++ {
			c, err := NewReader(r, int64(len(data)), "many.pt")
			if err != nil || len(c.Tensors()) != 100000 {
				b.Fatal(err)
			}
		}
	})
	b.Run("Scan", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		for i := 0; i < b.N; i++ {
			rep, err := Scan(r, int64(len(data)), "many.pt")
			if err != nil || !rep.Safe() {
				b.Fatal(err, rep.Problems)
			}
		}
	})
}

// BenchmarkWriteTo256MiB streams a 256 MiB checkpoint (16 x 16 MiB tensors,
// one of them transposed) through WriteTo, against io.Copy of the same bytes.
func BenchmarkWriteTo256MiB(b *testing.B) {
	const n, size = 16, 16 << 20
	data := make([]byte, size)
	for i := range data {
		data[i] = byte(i * 7)
	}
	ts := make([]torchtest.Tensor, n)
	for i := range ts {
		ts[i] = torchtest.Tensor{Name: fmt.Sprintf("t%d", i), DType: "F32", Shape: []int64{2048, 2048}, Data: data}
	}
	ts[n-1].Stride = []int64{1, 2048} // a transposed view
	path := filepath.Join(b.TempDir(), "big.pt")
	if err := torchtest.WriteFile(path, ts, torchtest.Options{}); err != nil {
		b.Fatal(err)
	}
	total := int64(n * size)
	b.Run("WriteTo", func(b *testing.B) {
		c, err := Open(path)
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close()
		for _, t := range c.Tensors() {
			if err := t.Storage.Verify(); err != nil {
				b.Fatal(err)
			}
		}
		b.SetBytes(total)
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			for _, t := range c.Tensors() {
				if _, err := t.WriteTo(io.Discard); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
	b.Run("WriteToWithCRC", func(b *testing.B) {
		b.SetBytes(total)
		for i := 0; i < b.N; i++ {
			c, err := Open(path)
			if err != nil {
				b.Fatal(err)
			}
			for _, t := range c.Tensors() {
				if _, err := t.WriteTo(io.Discard); err != nil {
					b.Fatal(err)
				}
			}
			c.Close()
		}
	})
	b.Run("io.Copy", func(b *testing.B) {
		f, err := os.Open(path)
		if err != nil {
			b.Fatal(err)
		}
		defer f.Close()
		c, err := Open(path)
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close()
		b.SetBytes(total)
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			for _, t := range c.Tensors() {
				if _, err := io.Copy(io.Discard, io.NewSectionReader(f, storageOffset(t.Storage), t.Storage.NBytes())); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
}

func storageOffset(s *Storage) int64 { return s.recOff }
