package load_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"log"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"

	"github.com/gosafetensors/safetensors"
	"github.com/gosafetensors/safetensors/load"
)

// exampleModel writes a model with a 4×2 q_proj weight and a norm.
func exampleModel() string {
	dir, err := os.MkdirTemp("", "load-example")
	if err != nil {
		log.Fatal(err)
	}
	f32 := func(v ...float32) []byte {
		b := make([]byte, 4*len(v))
		for i, x := range v {
			binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
		}
		return b
	}
	err = safetensors.WriteFile(filepath.Join(dir, "model.safetensors"), []safetensors.TensorData{
		{Name: "layers.0.q_proj.weight", DType: safetensors.F32, Shape: []int64{4, 2}, Data: f32(0, 1, 2, 3, 4, 5, 6, 7)},
		{Name: "layers.0.norm.weight", DType: safetensors.F32, Shape: []int64{2}, Data: f32(1, 1)},
	}, nil)
	if err != nil {
		log.Fatal(err)
	}
	return dir
}

// Rank 1 of 2 reads the second half of the rows of q_proj and the whole
// norm.
func Example_tensorParallel() {
	dir := exampleModel()
	defer os.RemoveAll(dir)
	ctx := context.Background()
	l, err := load.Open(ctx, dir, load.WithTensorParallel(1, 2))
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()
	got := map[string]*load.Tensor{}
	for t, err := range l.All(ctx) {
		if err != nil {
			log.Fatal(err)
		}
		got[t.Name] = t
	}
	for _, name := range slices.Sorted(maps.Keys(got)) {
		t := got[name]
		v, err := safetensors.As[float32](t.Tensor())
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("%s %v %v %v\n", name, t.Split, t.Shape, v)
	}
	// Output:
	// layers.0.norm.weight replicate [2] [1 1]
	// layers.0.q_proj.weight rows [2 2] [4 5 6 7]
}

// The bytes go where the caller says: here one arena for the whole load,
// as an engine would use pinned memory.
func ExampleWithDestination() {
	dir := exampleModel()
	defer os.RemoveAll(dir)
	ctx := context.Background()
	var arena []byte
	next := 0
	l, err := load.Open(ctx, dir, load.WithDestination(func(p load.Part) ([]byte, error) {
		// Called in read order from one goroutine: no lock needed.
		b := arena[next : next+int(p.Size)]
		next += int(p.Size)
		return b, nil
	}))
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()
	arena = make([]byte, l.Size()) // the plan knows the size before a byte is read
	st, err := l.Load(ctx, func(t *load.Tensor) error { return nil })
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(st.Tensors, "tensors,", st.Bytes, "bytes in an arena of", len(arena))
	// Output:
	// 2 tensors, 40 bytes in an arena of 40
}
