package convert_test

import (
	"context"
	"errors"
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
	r, err := convert.File(context.Background(), "../testdata/torch/tied_weights.pt", filepath.Join(dir, "model.safetensors"))
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

func ExampleDir() {
	in, err := os.MkdirTemp("", "convert-dir-in")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(in)
	b, err := os.ReadFile("../testdata/torch/tiny_transformer.bin")
	if err != nil {
		log.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(in, "pytorch_model.bin"), b, 0o644); err != nil {
		log.Fatal(err)
	}
	rep, err := convert.Dir(context.Background(), in, in)
	if err != nil {
		log.Fatal(err)
	}
	for _, r := range rep.Files {
		fmt.Println(filepath.Base(r.Input), "->", filepath.Base(r.Output), len(r.Tensors), "tensors")
	}
	// Output: pytorch_model.bin -> model.safetensors 35 tensors
}

func ExamplePlanFile_options() {
	rep, err := convert.PlanFile(context.Background(), "../testdata/torch/tied_weights.pt",
		convert.WithPrefer("model.embed_tokens.weight"),
		convert.WithMaxOutputBytes(64<<20))
	if err != nil {
		log.Fatal(err)
	}
	for _, a := range rep.Removed {
		fmt.Printf("%s is the same tensor as %s\n", a.Name, a.Kept)
	}

	// An invalid value is refused before the checkpoint is read.
	_, err = convert.PlanFile(context.Background(), "../testdata/torch/tied_weights.pt", convert.WithPrefer("a"), convert.WithDiscard("a"))
	fmt.Println(errors.Is(err, convert.ErrOption), err)
	// Output:
	// lm_head.weight is the same tensor as model.embed_tokens.weight
	// true invalid option: "a" is both preferred and discarded
}
