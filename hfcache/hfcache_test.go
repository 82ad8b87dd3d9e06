package hfcache

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"
)

const commit = "0123456789abcdef0123456789abcdef01234567"

// TestDir: the environment variables huggingface_hub reads, in its order.
func TestDir(t *testing.T) {
	t.Setenv("HF_HUB_CACHE", "")
	t.Setenv("HUGGINGFACE_HUB_CACHE", "")
	t.Setenv("HF_HOME", "")
	t.Setenv("XDG_CACHE_HOME", "/x")
	t.Setenv("HOME", "/home/u")
	check := func(want string) {
		t.Helper()
		if d, err := Dir(); err != nil || d != want {
			t.Fatalf("Dir() = %q, %v; want %q", d, err, want)
		}
	}
	check("/x/huggingface/hub")
	t.Setenv("XDG_CACHE_HOME", "")
	check("/home/u/.cache/huggingface/hub")
	t.Setenv("HF_HOME", "~/hf")
	check("/home/u/hf/hub")
	t.Setenv("HUGGINGFACE_HUB_CACHE", "/legacy")
	check("/legacy")
	t.Setenv("HF_HUB_CACHE", "$HOME/c")
	check("/home/u/c")
}

// TestLayout: the names huggingface_hub uses, links relative, refs atomic,
// nothing that could escape the cache accepted.
func TestLayout(t *testing.T) {
	c := &Cache{Root: t.TempDir()}
	r, err := c.Repo("", "org/name")
	if err != nil {
		t.Fatal(err)
	}
	if r.Dir != filepath.Join(c.Root, "models--org--name") {
		t.Fatalf("dir %s", r.Dir)
	}
	if typ, id, ok := ParseFolderName("datasets--a--b"); !ok || typ != "dataset" || id != "a/b" {
		t.Fatalf("ParseFolderName: %s %s %v", typ, id, ok)
	}
	blob, _ := r.BlobPath("abc")
	os.MkdirAll(filepath.Dir(blob), 0o777)
	os.WriteFile(blob, []byte("x"), 0o666)
	if err := r.Link(commit, "a/b/c.json", "abc"); err != nil {
		t.Fatal(err)
	}
	p, _ := r.SnapshotPath(commit, "a/b/c.json")
	if l, _ := os.Readlink(p); l != "../../../../blobs/abc" {
		t.Fatalf("link %q", l)
	}
	if b, err := os.ReadFile(p); err != nil || string(b) != "x" {
		t.Fatal(err)
	}
	if _, err := r.Commit("main"); !errors.Is(err, ErrNotCached) {
		t.Fatalf("uncached ref: %v", err)
	}
	if err := r.WriteRef("refs/pr/1", commit); err != nil {
		t.Fatal(err)
	}
	if got, _, err := r.Snapshot("refs/pr/1"); err != nil || got != commit {
		t.Fatalf("snapshot: %s %v", got, err)
	}
	if b, _ := os.ReadFile(filepath.Join(r.Dir, "refs", "refs", "pr", "1")); string(b) != commit {
		t.Fatalf("ref file %q", b)
	}
	files, err := r.Files(commit)
	if err != nil || len(files) != 1 || files[0] != "a/b/c.json" {
		t.Fatalf("files %v %v", files, err)
	}
	for _, bad := range []string{"../x", "a/../../x", "/abs", "a//b", `a\b`, ""} {
		if _, err := r.SnapshotPath(commit, bad); !errors.Is(err, ErrInvalid) {
			t.Errorf("path %q accepted", bad)
		}
	}
	for _, bad := range []string{"..", "a/b", "x.incomplete"} {
		if _, err := r.BlobPath(bad); !errors.Is(err, ErrInvalid) {
			t.Errorf("blob %q accepted", bad)
		}
	}
	for _, bad := range []string{"org", "org/na/me", "../x", "a--b/c"} {
		if _, err := c.Repo("model", bad); !errors.Is(err, ErrInvalid) {
			t.Errorf("repo %q accepted", bad)
		}
	}
	size := int64(5)
	if err := r.WriteTree(commit, map[string]TreeEntry{"m.safetensors": {Size: 5, BlobID: "b", LFSSHA256: "s", LFSSize: &size}}); err != nil {
		t.Fatal(err)
	}
	tree, err := r.ReadTree(commit)
	if err != nil || tree["m.safetensors"].Etag() != "s" {
		t.Fatalf("tree %v %v", tree, err)
	}
}

// TestLock: a second holder waits until the first lets go, or its context
// ends.
func TestLock(t *testing.T) {
	c := &Cache{Root: t.TempDir()}
	r, _ := c.Repo("model", "org/name")
	unlock, err := r.Lock(context.Background(), "abc")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	if _, err := r.Lock(ctx, "abc"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("second lock: %v", err)
	}
	unlock()
	u2, err := r.Lock(context.Background(), "abc")
	if err != nil {
		t.Fatal(err)
	}
	u2()
	if _, err := os.Stat(filepath.Join(c.Root, ".locks", "models--org--name", "abc.lock")); err != nil {
		t.Fatal(err)
	}
}

// TestLocalMetadata: huggingface_hub's local-dir metadata round-trips.
func TestLocalMetadata(t *testing.T) {
	dir := t.TempDir()
	if err := WriteLocalMetadata(dir, "sub/f.bin", commit, "e", 1700000000.5); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(filepath.Join(dir, ".cache", "huggingface", "download", "sub", "f.bin.metadata"))
	if string(b) != commit+"\ne\n1700000000.500000\n" {
		t.Fatalf("metadata %q", b)
	}
	c, e, ts, ok := ReadLocalMetadata(dir, "sub/f.bin")
	if !ok || c != commit || e != "e" || ts != 1700000000.5 {
		t.Fatalf("read back %s %s %v %v", c, e, ts, ok)
	}
}
