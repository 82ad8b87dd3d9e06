package compressed_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/gosafetensors/safetensors"
	"github.com/gosafetensors/safetensors/compressed"
)

// Compress a safetensors file with the grouped codec, then read one tensor
// and a slice of it back, decompressing only the chunks that hold them.
func Example() {
	dir, err := os.MkdirTemp("", "example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	in := filepath.Join(dir, "model.safetensors")
	data := make([]byte, 4*256*256)
	for i := range data {
		data[i] = byte(i * 7 % 13) // a compressible pattern
	}
	err = safetensors.WriteFile(in, []safetensors.TensorData{
		{Name: "w", DType: safetensors.F32, Shape: []int64{256, 256}, Data: data},
	}, nil)
	if err != nil {
		log.Fatal(err)
	}

	out := filepath.Join(dir, "model.grouped.safetensors")
	res, err := compressed.CompressFile(context.Background(), in, out, compressed.WithCodec(compressed.Grouped), compressed.WithFrameSize(64<<10))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(res.Format, res.Frames, "chunks")

	ra, err := compressed.Open(out) // an io.ReaderAt over the original bytes
	if err != nil {
		log.Fatal(err)
	}
	defer ra.Close()
	r, err := safetensors.NewReader(ra, ra.Size())
	if err != nil {
		log.Fatal(err)
	}
	w, err := r.Tensor("w")
	if err != nil {
		log.Fatal(err)
	}
	s, err := w.Slice(safetensors.Range(0, 32)) // 1/8 of the rows
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(s.Shape, ra.Stats().FramesDecoded, "chunk decompressed")
	// Output:
	// grouped 4 chunks
	// [32 256] 1 chunk decompressed
}
