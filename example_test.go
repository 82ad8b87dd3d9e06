package safetensors_test

import (
	"bytes"
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/gosafetensors/safetensors"
)

func ExampleOpen() {
	f, err := safetensors.Open("testdata/torch/tiny_transformer.safetensors")
	if err != nil {
		log.Fatal(err)
	}
	defer f.Close()
	fmt.Println(len(f.Names()), "tensors; format:", f.Metadata["format"])
	w, err := f.Tensor("lm_head.weight")
	if err != nil {
		log.Fatal(err)
	}
	v, err := safetensors.As[float32](w) // zero-copy view of the mapping
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(w.DType, w.Shape, len(v))
	// Output:
	// 35 tensors; format: pt
	// F32 [32 8] 256
}

func ExampleTensor_Slice() {
	data := []byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}
	file, _ := safetensors.Marshal([]safetensors.TensorData{{Name: "x", DType: safetensors.U8, Shape: []int64{3, 4}, Data: data}}, nil)
	r, _ := safetensors.NewReader(bytes.NewReader(file), int64(len(file)))
	x, _ := r.Tensor("x")
	idx, _ := safetensors.ParseSlice("0:2, -1")
	s, err := x.Slice(idx...)
	if err != nil {
		log.Fatal(err)
	}
	b, _ := s.Bytes()
	fmt.Println(s.Shape, b)
	// Output: [2] [3 7]
}

func ExampleWriteFile() {
	dir, _ := os.MkdirTemp("", "example")
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "model.safetensors")
	err := safetensors.WriteFile(path, []safetensors.TensorData{
		{Name: "bias", DType: safetensors.F32, Shape: []int64{2}, Data: make([]byte, 8)},
		{Name: "step", DType: safetensors.I64, Shape: []int64{}, Data: make([]byte, 8)},
	}, map[string]string{"format": "pt"})
	if err != nil {
		log.Fatal(err)
	}
	h, _ := os.ReadFile(path)
	fmt.Printf("%s\n", bytes.TrimRight(h[8:8+h[0]], " "))
	// Output: {"__metadata__":{"format":"pt"},"step":{"dtype":"I64","shape":[],"data_offsets":[0,8]},"bias":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}}
}

func ExampleFormatError() {
	_, err := safetensors.Open("testdata/safetensors/files/offsets_gap.safetensors")
	var fe *safetensors.FormatError
	if errors.As(err, &fe) && errors.Is(err, safetensors.ErrInvalidOffset) {
		fmt.Println(fe.Tensor, fe.Variant(), fe.Offset)
	}
	fmt.Println(err)
	// Output:
	// b InvalidOffset 61
	// testdata/safetensors/files/offsets_gap.safetensors: tensor "b": data_offsets [8 12] leave a gap after byte 4 (InvalidOffset at byte 61)
}

func ExampleDecodeFloat32() {
	// Three BF16 values, little-endian: 1, -2, +Inf.
	src := []byte{0x80, 0x3F, 0x00, 0xC0, 0x80, 0x7F}
	dst := make([]float32, 3) // reuse dst across calls: no allocation
	if err := safetensors.DecodeFloat32(dst, src, safetensors.BF16); err != nil {
		log.Fatal(err)
	}
	fmt.Println(dst)
	// Output: [1 -2 +Inf]
}

func ExampleTensor_Float32Into() {
	f, err := safetensors.Open("testdata/torch/tiny_transformer.safetensors")
	if err != nil {
		log.Fatal(err)
	}
	defer f.Close()
	w, _ := f.Tensor("h.0.ln_1.weight")
	buf := make([]float32, w.NumElements())
	if err := w.Float32Into(buf); err != nil {
		log.Fatal(err)
	}
	fmt.Println(w.DType, buf[:3])
	// Output: F32 [1 1 1]
}

func ExampleToFloat32() {
	x, _ := safetensors.FromFloat32("x", []int64{3}, []float32{0.1, 1, 65536}, safetensors.F16)
	v, err := safetensors.ToFloat32(x)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(v) // 0.1 rounded to the nearest half; 65536 overflows
	// Output: [0.099975586 1 +Inf]
}

func ExampleAs() {
	x, _ := safetensors.FromSlice("ids", []int64{2, 2}, []int64{1, 2, 3, 4})
	v, err := safetensors.As[int64](x)
	if err != nil {
		log.Fatal(err)
	}
	_, err = safetensors.As[float32](x)
	fmt.Println(v, errors.Is(err, safetensors.ErrDTypeMismatch))
	// Output: [1 2 3 4] true
}

func ExampleNewReader() {
	x, _ := safetensors.FromSlice("w", []int64{2}, []float32{1.5, -2})
	file, _ := safetensors.Marshal([]safetensors.TensorData{{Name: x.Name, DType: x.DType, Shape: x.Shape, Data: exampleBytes(x.Bytes())}}, nil)
	// Any io.ReaderAt: a file, an HTTP range reader, bytes in memory.
	r, err := safetensors.NewReader(bytes.NewReader(file), int64(len(file)))
	if err != nil {
		log.Fatal(err)
	}
	w, _ := r.Tensor("w")
	v, _ := safetensors.ToFloat32(w)
	fmt.Println(r.Names(), w.Shape, v)
	// Output: [w] [2] [1.5 -2]
}

func exampleBytes(b []byte, err error) []byte {
	if err != nil {
		log.Fatal(err)
	}
	return b
}

func ExampleSaveFile() {
	dir, _ := os.MkdirTemp("", "example")
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "model.safetensors")

	w, _ := safetensors.FromFloat32("w", []int64{2, 2}, []float32{1, 2, 3, 4}, safetensors.BF16)
	step, _ := safetensors.FromSlice("step", nil, []int64{1000})
	err := safetensors.SaveFile(path, map[string]*safetensors.Tensor{"w": w, "step": step}, map[string]string{"format": "pt"})
	if err != nil {
		log.Fatal(err)
	}

	tensors, meta, err := safetensors.LoadFile(path) // owned copies, like load_file
	if err != nil {
		log.Fatal(err)
	}
	v, _ := safetensors.ToFloat32(tensors["w"])
	fmt.Println(len(tensors), meta["format"], tensors["w"].DType, v)
	// Output: 2 pt BF16 [1 2 3 4]
}
