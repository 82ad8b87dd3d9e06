package download_test

import (
	"context"
	"fmt"
	"log"
	"os"

	"github.com/gosafetensors/safetensors/download"
	"github.com/gosafetensors/safetensors/internal/pacedserver"
	"github.com/gosafetensors/safetensors/remote"
)

// A repository into the Hugging Face cache, then checked again on disk.
// The Hub here is a loopback stand-in; without WithHub, the Hub of the
// environment (HF_ENDPOINT, HF_TOKEN) is used, and without WithCacheDir,
// huggingface_hub's cache.
func ExampleDownload() {
	files, _ := pacedserver.ModelSpec{Hidden: 64, Intermediate: 128, Layers: 1, Vocab: 256, Shards: 2}.Model()
	served, _ := pacedserver.Hub("org/model", "0123456789abcdef0123456789abcdef01234567", files)
	srv, _ := pacedserver.Start(pacedserver.Config{}, served)
	defer srv.Close()
	hub, _ := remote.NewHub(remote.WithEndpoint(srv.URL), remote.WithToken(""), remote.WithOffline(false))
	cache, _ := os.MkdirTemp("", "hub")
	defer os.RemoveAll(cache)

	res, err := download.Download(context.Background(), "hf://org/model",
		download.WithHub(hub), download.WithCacheDir(cache), download.WithInclude("*.safetensors", "*.json"))
	if err != nil {
		log.Fatal(err)
	}
	for _, f := range res.Files {
		fmt.Println(f.Path, f.Digest.Kind)
	}
	rep, err := download.Verify(context.Background(), res.Dir)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("verified:", rep.OK(), len(rep.Files), "files,", len(rep.Indexes), "index")
	// Output:
	// model-00001-of-00002.safetensors sha256
	// model-00002-of-00002.safetensors sha256
	// model.safetensors.index.json git-blob
	// verified: true 3 files, 1 index
}
