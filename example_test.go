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
