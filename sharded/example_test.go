package sharded_test

import (
	"context"
	"fmt"
	"io"
	"log"
	"os"
	"path/filepath"

	"github.com/gosafetensors/safetensors"
	"github.com/gosafetensors/safetensors/sharded"
)

// Split a file into shards of at most 1 KB, open the result as one model,
// and merge it back into one file.
func Example() {
	dir, _ := os.MkdirTemp("", "sharded-example")
	defer os.RemoveAll(dir)
	in := filepath.Join(dir, "model.safetensors")
	var tensors []safetensors.TensorData
	for _, name := range []string{"embed.weight", "layers.0.weight", "layers.1.weight", "lm_head.weight"} {
		tensors = append(tensors, safetensors.TensorData{Name: name, DType: safetensors.F32, Shape: []int64{16, 10}, Data: make([]byte, 640)})
	}
	if err := safetensors.WriteFile(in, tensors, map[string]string{"format": "pt"}); err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()

	src, err := sharded.Open(ctx, in)
	if err != nil {
		log.Fatal(err)
	}
	defer src.Close()
	limit, _ := sharded.ParseSize("1KB")
	res, err := sharded.Split(ctx, src, filepath.Join(dir, "shards"), sharded.WithMaxShardSize(limit))
	if err != nil {
		log.Fatal(err)
	}
	for _, f := range res.Files {
		fmt.Println(filepath.Base(f))
	}

	m, err := sharded.Open(ctx, filepath.Join(dir, "shards"))
	if err != nil {
		log.Fatal(err)
	}
	defer m.Close()
	shard, _ := m.ShardOf("lm_head.weight")
	fmt.Println(len(m.Names()), "tensors; lm_head.weight is in", shard)
	if _, err := sharded.Merge(ctx, m, filepath.Join(dir, "merged.safetensors")); err != nil {
		log.Fatal(err)
	}
	// Output:
	// model-00001-of-00004.safetensors
	// model-00002-of-00004.safetensors
	// model-00003-of-00004.safetensors
	// model-00004-of-00004.safetensors
	// model.safetensors.index.json
	// 4 tensors; lm_head.weight is in model-00004-of-00004.safetensors
}

func ExampleIndex_Marshal() {
	idx := sharded.NewIndex()
	idx.Add("model-00001-of-00002.safetensors", safetensors.TensorInfo{Name: "a", DType: safetensors.BF16, Shape: []int64{2, 3}})
	idx.Add("model-00002-of-00002.safetensors", safetensors.TensorInfo{Name: "b", DType: safetensors.F32, Shape: []int64{4}})
	b, _ := idx.Marshal()
	fmt.Print(string(b))
	// Output:
	// {
	//   "metadata": {
	//     "total_parameters": 10,
	//     "total_size": 28
	//   },
	//   "weight_map": {
	//     "a": "model-00001-of-00002.safetensors",
	//     "b": "model-00002-of-00002.safetensors"
	//   }
	// }
}

func ExampleParseSize() {
	for _, s := range []string{"5GB", "500MB", "2GiB", "1048576"} {
		n, _ := sharded.ParseSize(s)
		fmt.Println(s, n)
	}
	// Output:
	// 5GB 5000000000
	// 500MB 500000000
	// 2GiB 2147483648
	// 1048576 1048576
}

// A remote store plugs in through an Opener; here, files read by path.
func ExampleReaderAtOpener() {
	dir, _ := os.MkdirTemp("", "sharded-example")
	defer os.RemoveAll(dir)
	for i, name := range []string{"a", "b"} {
		t := []safetensors.TensorData{{Name: name, DType: safetensors.U8, Shape: []int64{4}, Data: []byte{1, 2, 3, 4}}}
		safetensors.WriteFile(filepath.Join(dir, sharded.ShardName(i, 2)), t, nil)
	}
	idx, err := sharded.ParseIndex([]byte(`{"weight_map": {"a": "model-00001-of-00002.safetensors", "b": "model-00002-of-00002.safetensors"}}`), "index.json")
	if err != nil {
		log.Fatal(err)
	}
	op := sharded.ReaderAtOpener(func(ctx context.Context, name string) (r io.ReaderAt, size int64, err error) {
		f, err := os.Open(filepath.Join(dir, name)) // name has passed CheckShardName
		if err != nil {
			return nil, 0, err
		}
		st, err := f.Stat()
		if err != nil {
			f.Close()
			return nil, 0, err
		}
		return f, st.Size(), nil // closed with the model
	})
	m, err := sharded.OpenIndex(context.Background(), idx, "index.json", op)
	if err != nil {
		log.Fatal(err)
	}
	defer m.Close()
	fmt.Println(m.Names(), m.Shards()[1].Name)
	// Output:
	// [a b] model-00002-of-00002.safetensors
}
