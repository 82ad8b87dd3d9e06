package convert_test

import (
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/gosafetensors/safetensors/convert"
)

func ExampleFile() {
	dir, err := os.MkdirTemp("", "convert-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	r, err := convert.File("../testdata/torch/tied_weights.pt", filepath.Join(dir, "model.safetensors"), convert.Options{})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(len(r.Tensors), "tensors written, verified:", r.Verified)
	for _, a := range r.Removed {
		fmt.Printf("%s is the same tensor as %s\n", a.Name, a.Kept)
	}
	// Output:
	// 4 tensors written, verified: true
	// model.embed_tokens.weight is the same tensor as lm_head.weight
}
