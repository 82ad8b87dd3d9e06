package source

import (
	"os"
	"path"
	"path/filepath"

	"github.com/gosafetensors/safetensors/hfcache"
	"github.com/gosafetensors/safetensors/remote"
	"github.com/gosafetensors/safetensors/sharded"
)

// WithHubCache reads hf:// locations from the Hugging Face cache at dir
// when it holds them (a snapshot of the revision with the file, or with a
// model and, for an index, every shard it names), before any request; ""
// turns the cache off. By default the cache is huggingface_hub's
// ($HF_HUB_CACHE, $HF_HOME/hub, ~/.cache/huggingface/hub), and under
// HF_HUB_OFFLINE=1 it is the only place hf:// locations are read from.
// A branch is read at the commit the cache last recorded for it: run
// `safetensors download` to bring it up to date.
func WithHubCache(dir string) Option {
	return func(c *config) error { c.hubCache = &dir; return nil }
}

// cachedHub returns the local path of a Hub location in the cache, or ""
// when the cache does not hold all of it.
func cachedHub(ref remote.Ref, c *config) string {
	root := ""
	if c.hubCache != nil {
		root = *c.hubCache
	} else if d, err := hfcache.Dir(); err == nil {
		root = d
	}
	if root == "" {
		return ""
	}
	repo, err := (&hfcache.Cache{Root: root}).Repo(ref.Type, ref.Repo)
	if err != nil {
		return ""
	}
	rev := ref.Revision
	if rev == "" {
		rev = "main"
	}
	_, snap, err := repo.Snapshot(rev)
	if err != nil {
		return ""
	}
	rel := path.Join(ref.Path, c.subfolder)
	p := snap
	if rel != "" && rel != "." {
		if remote.ValidRepoPath(rel) != nil {
			return ""
		}
		p = filepath.Join(snap, filepath.FromSlash(rel))
	}
	st, err := os.Stat(p) // through the link into blobs/
	if err != nil {
		return ""
	}
	if !st.IsDir() {
		return p
	}
	if !completeModelDir(p) {
		return ""
	}
	return p
}

// completeModelDir reports whether a snapshot folder holds its model: the
// file PickModel chooses and, for an index, every shard it names.
func completeModelDir(dir string) bool {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return false
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	name, err := PickModel(dir, names)
	if err != nil {
		return false
	}
	p := filepath.Join(dir, name)
	if _, err := os.Stat(p); err != nil {
		return false
	}
	if path.Ext(name) != ".json" {
		return true
	}
	idx, err := sharded.ReadIndex(p)
	if err != nil {
		return true // opening it says what is wrong
	}
	for _, s := range idx.Shards() {
		if _, err := os.Stat(filepath.Join(dir, filepath.FromSlash(s))); err != nil {
			return false
		}
	}
	return true
}
