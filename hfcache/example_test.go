package hfcache_test

import (
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/gosafetensors/safetensors/hfcache"
)

// Where huggingface_hub keeps a file of a repository, and how a snapshot
// is found offline.
func ExampleRepo_Snapshot() {
	root, _ := os.MkdirTemp("", "hub")
	defer os.RemoveAll(root)
	cache := &hfcache.Cache{Root: root}
	repo, err := cache.Repo("model", "org/model")
	if err != nil {
		log.Fatal(err)
	}
	const commit = "0123456789abcdef0123456789abcdef01234567"
	blob, _ := repo.BlobPath("4f1b0c") // a git blob id or an LFS sha256
	os.MkdirAll(filepath.Dir(blob), 0o777)
	os.WriteFile(blob, []byte(`{"hidden_size": 64}`), 0o666)
	repo.Link(commit, "config.json", "4f1b0c")
	repo.WriteRef("main", commit)

	got, dir, err := repo.Snapshot("main")
	if err != nil {
		log.Fatal(err)
	}
	link, _ := os.Readlink(filepath.Join(dir, "config.json"))
	rel, _ := filepath.Rel(root, dir)
	fmt.Println(got == commit, rel)
	fmt.Println(link)
	// Output:
	// true models--org--model/snapshots/0123456789abcdef0123456789abcdef01234567
	// ../../blobs/4f1b0c
}
