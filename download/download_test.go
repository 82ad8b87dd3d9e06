package download

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gosafetensors/safetensors/hfcache"
	"github.com/gosafetensors/safetensors/internal/pacedserver"
	"github.com/gosafetensors/safetensors/sharded"
)

// TestHubCacheLayout: a repository downloaded into the cache as
// huggingface_hub lays it out: blobs named by sha256 (LFS) or git blob id,
// snapshot entries as relative links into blobs, refs/main holding the
// commit, the commit's file list, CACHEDIR.TAG; the model opens from the
// snapshot with every byte as served.
func TestHubCacheLayout(t *testing.T) {
	h := newHubFixture(t, smallSpec(), pacedserver.Config{})
	cache := t.TempDir()
	res, err := Download(context.Background(), "hf://"+testRepo, WithHub(h.hub(t, 4)), WithCacheDir(cache), WithConcurrency(4), WithChunkSize(64<<10))
	if err != nil {
		t.Fatal(err)
	}
	repo := filepath.Join(cache, "models--org--model")
	snap := filepath.Join(repo, "snapshots", testCommit)
	if res.Commit != testCommit || res.Dir != snap {
		t.Fatalf("result commit %s dir %s", res.Commit, res.Dir)
	}
	if b, err := os.ReadFile(filepath.Join(repo, "refs", "main")); err != nil || string(b) != testCommit {
		t.Fatalf("refs/main: %q %v", b, err)
	}
	for _, p := range h.paths() {
		data := h.content(t, p)
		rel := strings.TrimPrefix(p, "/")
		link := filepath.Join(snap, filepath.FromSlash(rel))
		want := gitBlob(data)
		if len(data) >= pacedserver.LFSThreshold {
			s := sha256.Sum256(data)
			want = hex.EncodeToString(s[:])
		}
		depth := strings.Count(rel, "/")
		if got := readLink(t, link); got != strings.Repeat("../", depth+2)+"blobs/"+want {
			t.Errorf("%s -> %s, want a relative link to blobs/%s", rel, got, want)
		}
		got, err := os.ReadFile(link)
		if err != nil || !bytes.Equal(got, data) {
			t.Errorf("%s: %d bytes read through the link (%v), want the %d served", rel, len(got), err, len(data))
		}
	}
	if files := ls(t, filepath.Join(repo, "blobs")); len(files) != len(h.files) {
		t.Errorf("blobs/ holds %v: partial files left?", files)
	}
	c := &hfcache.Cache{Root: cache}
	r, _ := c.Repo("model", testRepo)
	tree, err := r.ReadTree(testCommit)
	if err != nil || len(tree) != len(h.files) || tree["config.json"].BlobID == "" || tree["model-00001-of-00003.safetensors"].LFSSHA256 == "" {
		t.Fatalf("tree: %v %v", tree, err)
	}
	if _, err := os.Stat(filepath.Join(cache, "CACHEDIR.TAG")); err != nil {
		t.Fatal(err)
	}
	m, err := sharded.Open(context.Background(), filepath.Join(snap, sharded.IndexName))
	if err != nil {
		t.Fatal(err)
	}
	m.Close()

	// Again: everything is present, nothing moves.
	before := h.srv.Stats().Content
	res, err = Download(context.Background(), "hf://"+testRepo, WithHub(h.hub(t, 4)), WithCacheDir(cache))
	if err != nil {
		t.Fatal(err)
	}
	if res.Moved != 0 || !slices.ContainsFunc(res.Files, func(f File) bool { return f.Present }) {
		t.Fatalf("second download moved %d bytes", res.Moved)
	}
	if n := h.srv.Stats().Content - before; n > 2000 {
		t.Fatalf("second download read %d content bytes (the listing only)", n)
	}
}

func gitBlob(b []byte) string {
	h := Digest{Kind: "git-blob"}.newHash(int64(len(b)))
	h.Write(b)
	return hexSum(h)
}
