package remote_test

import (
	"bytes"
	"context"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"time"

	safetensors "github.com/gosafetensors/safetensors"
	"github.com/gosafetensors/safetensors/remote"
)

// Reading a safetensors header over HTTP costs one request.
func ExampleOpen() {
	data, err := os.ReadFile("../testdata/torch/tiny_transformer.safetensors")
	if err != nil {
		log.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(data))
	}))
	defer srv.Close()

	f, err := remote.Open(context.Background(), srv.URL+"/model.safetensors")
	if err != nil {
		log.Fatal(err)
	}
	defer f.Close()
	r, err := safetensors.NewReader(f, f.Size(), safetensors.WithName(f.Name()))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(len(r.Tensors), "tensors,", f.Stats().Requests, "request")
	// Output: 35 tensors, 1 request
}

func ExampleParseHubURL() {
	ref, err := remote.ParseHubURL("hf://org/model@refs/pr/3/sub/model.safetensors")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(ref.Repo, ref.Revision, ref.Path)
	// Output: org/model refs/pr/3 sub/model.safetensors
}

func ExampleValidRepoPath() {
	for _, p := range []string{"model-00001-of-00002.safetensors", "../secrets", "https://evil.example/x"} {
		fmt.Println(p, remote.ValidRepoPath(p) == nil)
	}
	// Output:
	// model-00001-of-00002.safetensors true
	// ../secrets false
	// https://evil.example/x false
}
