package blobstore_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"

	safetensors "github.com/gosafetensors/safetensors"
	"github.com/gosafetensors/safetensors/remote/blobstore"
)

// Objects in s3://, gs:// and azblob:// buckets open the same way; a local
// directory through file:// needs no credentials.
func ExampleOpen() {
	abs, err := filepath.Abs("../../testdata/torch/tiny_transformer.safetensors")
	if err != nil {
		log.Fatal(err)
	}
	o, err := blobstore.Open(context.Background(), "file://"+filepath.ToSlash(abs))
	if err != nil {
		log.Fatal(err)
	}
	defer o.Close()
	r, err := safetensors.NewReader(o, o.Size(), safetensors.WithName(o.Name()))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(len(r.Tensors), "tensors,", o.Stats().Requests, "read")
	// Output: 35 tensors, 1 read
}

// List returns the objects under a prefix, for audits of a whole bucket.
func ExampleList() {
	dir, err := os.MkdirTemp("", "blobstore-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	for _, name := range []string{"a.safetensors", "b.safetensors"} {
		os.WriteFile(filepath.Join(dir, name), []byte("x"), 0o644)
	}
	objs, err := blobstore.List(context.Background(), "file://"+filepath.ToSlash(dir)+"/")
	if err != nil {
		log.Fatal(err)
	}
	for _, o := range objs {
		fmt.Println(o.Key, o.Size)
	}
	// Output:
	// a.safetensors 1
	// b.safetensors 1
}
