package source

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/gosafetensors/safetensors"
	"github.com/gosafetensors/safetensors/hfcache"
	"github.com/gosafetensors/safetensors/remote"
)

// cacheModel puts files into a Hugging Face cache as huggingface_hub
// would: blobs, snapshot links, refs/main.
func cacheModel(t *testing.T, root string, files map[string][]byte) {
	t.Helper()
	r, err := (&hfcache.Cache{Root: root}).Repo("model", "org/model")
	if err != nil {
		t.Fatal(err)
	}
	for name, data := range files {
		etag := "blob-" + filepath.Base(name)
		p, _ := r.BlobPath(etag)
		os.MkdirAll(filepath.Dir(p), 0o777)
		if err := os.WriteFile(p, data, 0o666); err != nil {
			t.Fatal(err)
		}
		if err := r.Link(hubCommit, name, etag); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.WriteRef("main", hubCommit); err != nil {
		t.Fatal(err)
	}
}

// TestHubCacheFirst: hf:// reads a snapshot the cache holds before any
// request (the Hub here cannot be reached at all), only it under offline
// mode, and a snapshot that lacks a shard is not taken for the model.
func TestHubCacheFirst(t *testing.T) {
	var buf []byte
	src := filepath.Join(t.TempDir(), "m.safetensors")
	if err := safetensors.WriteFile(src, []safetensors.TensorData{{Name: "w", DType: safetensors.F32, Shape: []int64{2}, Data: make([]byte, 8)}}, nil); err != nil {
		t.Fatal(err)
	}
	buf, _ = os.ReadFile(src)
	root := t.TempDir()
	cacheModel(t, root, map[string][]byte{"model.safetensors": buf, "sub/model.safetensors": buf})
	unreachable, err := remote.NewHub(remote.WithEndpoint("http://127.0.0.1:1"), remote.WithOffline(false), remote.WithRetries(1, 1e9))
	if err != nil {
		t.Fatal(err)
	}
	for _, loc := range []string{"hf://org/model", "hf://org/model/model.safetensors", "hf://org/model@" + hubCommit + "/sub"} {
		m, err := OpenModel(context.Background(), loc, WithHub(unreachable), WithHubCache(root))
		if err != nil {
			t.Fatalf("%s: %v", loc, err)
		}
		if _, ok := m.Info("w"); !ok {
			t.Fatalf("%s: no tensor w", loc)
		}
		m.Close()
	}
	// Not in the cache: the Hub is asked (and cannot be reached).
	if _, err := OpenModel(context.Background(), "hf://org/model@v2", WithHub(unreachable), WithHubCache(root)); err == nil {
		t.Fatal("a revision the cache does not hold was opened")
	}
	// Offline: the cache, and nothing else.
	offline, _ := remote.NewHub(remote.WithEndpoint("http://127.0.0.1:1"), remote.WithOffline(true))
	if _, err := OpenModel(context.Background(), "hf://org/model", WithHub(offline), WithHubCache(root)); err != nil {
		t.Fatal(err)
	}
	_, err = OpenModel(context.Background(), "hf://org/other", WithHub(offline), WithHubCache(root))
	if !errors.Is(err, remote.ErrOffline) {
		t.Fatalf("offline, not cached: %v", err)
	}
	// An index whose shard the snapshot lacks is not the model.
	idx := []byte(`{"metadata":{},"weight_map":{"w":"model-00001-of-00002.safetensors","v":"model-00002-of-00002.safetensors"}}`)
	root2 := t.TempDir()
	cacheModel(t, root2, map[string][]byte{"model.safetensors.index.json": idx, "model-00001-of-00002.safetensors": buf})
	if _, err := OpenModel(context.Background(), "hf://org/model", WithHub(offline), WithHubCache(root2)); !errors.Is(err, remote.ErrOffline) {
		t.Fatalf("incomplete snapshot: %v", err)
	}
	// The cache turned off: the Hub is asked.
	if _, err := OpenModel(context.Background(), "hf://org/model", WithHub(offline), WithHubCache("")); !errors.Is(err, remote.ErrOffline) {
		t.Fatalf("cache off: %v", err)
	}
}
