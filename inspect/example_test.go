package inspect_test

import (
	"context"
	"fmt"
	"log"

	"github.com/gosafetensors/safetensors/inspect"
	"github.com/gosafetensors/safetensors/source"
)

// Describe a model and print its totals the way `safetensors inspect`
// does.
func ExampleDescribe() {
	m, err := source.OpenModel(context.Background(), "../testdata/torch/tiny_transformer.safetensors")
	if err != nil {
		log.Fatal(err)
	}
	defer m.Close()
	d := inspect.Describe(m)
	tot := inspect.Sum(d.Tensors)
	fmt.Println(d.Format, len(d.Tensors), "tensors,", tot.Parameters, "parameters")
	// Output: safetensors 35 tensors, 1600 parameters
}
