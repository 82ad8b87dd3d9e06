package source_test

import (
	"context"
	"fmt"
	"log"

	"github.com/gosafetensors/safetensors/source"
)

// A directory holding a sharded PyTorch checkpoint (pytorch_model-0000N-of-
// 0000M.bin and its index, as transformers saves one) opens as one model,
// read as converting it would write it; nothing in it is executed. The same
// call takes a file, an index, a URL, hf://ORG/REPO or a bucket object.
func ExampleOpenModel() {
	m, err := source.OpenModel(context.Background(), "../testdata/torch/sharded_bin")
	if err != nil {
		log.Fatal(err)
	}
	defer m.Close()
	fmt.Println(len(m.Sharded.Shards()), "shards,", len(m.Names()), "tensors")
	t, err := m.Tensor("transformer.h.10.attn.c_attn.weight")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(t.DType, t.Shape)
	fmt.Println("tied:", m.Meta()["transformer.wte.weight"])
	// Output:
	// 5 shards, 26 tensors
	// BF16 [8 8]
	// tied: lm_head.weight
}

// PickModel chooses a folder's model as transformers does: safetensors
// first.
func ExamplePickModel() {
	name, _ := source.PickModel("repo", []string{"config.json", "pytorch_model.bin", "model.safetensors"})
	fmt.Println(name)
	// Output: model.safetensors
}
