package diff_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/gosafetensors/safetensors"
	"github.com/gosafetensors/safetensors/diff"
)

func ExampleCompare() {
	dir, _ := os.MkdirTemp("", "example")
	defer os.RemoveAll(dir)
	// A model and its BF16 copy.
	w, _ := safetensors.FromFloat32("w", []int64{3}, []float32{1, 0.1, -3}, safetensors.F32)
	h, _ := safetensors.FromFloat32("w", []int64{3}, []float32{1, 0.1, -3}, safetensors.BF16)
	pa, pb := filepath.Join(dir, "a.safetensors"), filepath.Join(dir, "b.safetensors")
	if err := safetensors.SaveFile(pa, map[string]*safetensors.Tensor{"w": w}, nil); err != nil {
		log.Fatal(err)
	}
	if err := safetensors.SaveFile(pb, map[string]*safetensors.Tensor{"w": h}, nil); err != nil {
		log.Fatal(err)
	}
	a, _ := safetensors.Open(pa)
	defer a.Close()
	b, _ := safetensors.Open(pb)
	defer b.Close()

	r, err := diff.Compare(context.Background(), a, b, diff.WithEpsilon(1e-3))
	if err != nil {
		log.Fatal(err)
	}
	t := r.Tensors[0]
	fmt.Printf("%s: %s vs %s, %d of %d differ by more than 1e-3, max abs diff %.2g\n",
		t.Name, t.DTypeA, t.DTypeB, t.Differing, t.Count, t.MaxAbs)
	fmt.Println("equal:", r.Equal())
	// Output:
	// w: F32 vs BF16, 0 of 3 differ by more than 1e-3, max abs diff 9.8e-05
	// equal: false
}
