package download

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gosafetensors/safetensors/hfcache"
	"github.com/gosafetensors/safetensors/internal/pacedserver"
)

// TestHubLocalDir: --local-dir writes plain files with huggingface_hub's
// metadata; a second run reads nothing; a file changed on disk is
// downloaded again.
func TestHubLocalDir(t *testing.T) {
	h := newHubFixture(t, smallSpec(), pacedserver.Config{})
	dir := t.TempDir()
	dl := func() *Result {
		t.Helper()
		res, err := Download(context.Background(), "hf://"+testRepo, WithHub(h.hub(t, 4)), WithLocalDir(dir), WithConcurrency(4), WithChunkSize(64<<10))
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	dl()
	check := func() {
		t.Helper()
		for _, p := range h.paths() {
			local := filepath.Join(dir, filepath.FromSlash(strings.TrimPrefix(p, "/")))
			st, err := os.Lstat(local)
			if err != nil || !st.Mode().IsRegular() {
				t.Fatalf("%s: not a plain file (%v)", local, err)
			}
			got, _ := os.ReadFile(local)
			if !bytes.Equal(got, h.content(t, p)) {
				t.Fatalf("%s differs from what was served", p)
			}
		}
	}
	check()
	if c, etag, _, ok := hfcache.ReadLocalMetadata(dir, "config.json"); !ok || c != testCommit || etag != gitBlob(h.content(t, "/config.json")) {
		t.Fatalf("metadata of config.json: %s %s %v", c, etag, ok)
	}
	if _, err := os.Stat(filepath.Join(dir, ".cache", "huggingface", "trees", testCommit+".json")); err != nil {
		t.Fatal(err)
	}
	if rep, err := Verify(context.Background(), dir); err != nil || !rep.OK() || rep.Files[0].Status != "ok" {
		t.Fatalf("verify: %v %v", rep, err)
	}
	if res := dl(); res.Moved != 0 {
		t.Fatalf("second run moved %d bytes", res.Moved)
	}
	shard := filepath.Join(dir, "model-00001-of-00003.safetensors")
	b, _ := os.ReadFile(shard)
	b[100] ^= 1
	os.WriteFile(shard, b, 0o666)
	future := time.Now().Add(2 * time.Second)
	os.Chtimes(shard, future, future)
	if rep, _ := Verify(context.Background(), dir); rep.OK() {
		t.Fatal("verify missed a changed file")
	}
	if res := dl(); res.Moved != int64(len(b)) {
		t.Fatalf("after a change, moved %d bytes, want the file's %d", res.Moved, len(b))
	}
	check()
}

// TestHTTPDir: an HTTP directory's model (found through its index) into a
// local directory; a second run reads nothing.
func TestHTTPDir(t *testing.T) {
	files, err := smallSpec().Model()
	if err != nil {
		t.Fatal(err)
	}
	served := map[string]pacedserver.File{}
	for k, v := range files {
		served["/models/m"+k] = v
	}
	s, err := pacedserver.Start(pacedserver.Config{}, served)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	dir := t.TempDir()
	res, err := Download(context.Background(), s.URL+"/models/m/", WithLocalDir(dir), WithConcurrency(3), WithChunkSize(64<<10))
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Files) != len(files) {
		t.Fatalf("%d files, want %d", len(res.Files), len(files))
	}
	for k, f := range files {
		want := make([]byte, f.Size)
		f.Content.ReadAt(want, 0)
		got, err := os.ReadFile(filepath.Join(dir, strings.TrimPrefix(k, "/")))
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("%s differs (%v)", k, err)
		}
	}
	res, err = Download(context.Background(), s.URL+"/models/m/", WithLocalDir(dir))
	if err != nil || res.Moved != 0 {
		t.Fatalf("second run: moved %d, %v", res.Moved, err)
	}
	// One file, named.
	dir2 := t.TempDir()
	if _, err := Download(context.Background(), s.URL+"/models/m/model.safetensors.index.json", WithLocalDir(dir2)); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir2, "model.safetensors.index.json")); err != nil {
		t.Fatal(err)
	}
}

// TestBucketPrefix: every object under a bucket prefix (file:// here,
// through the same pool and listing as s3://) into a local directory.
func TestBucketPrefix(t *testing.T) {
	src := t.TempDir()
	want := map[string][]byte{"a.safetensors": bytes.Repeat([]byte("a"), 300_000), "sub/b.json": []byte("{}"), "sub/deeper/c.bin": []byte("c")}
	for k, v := range want {
		p := filepath.Join(src, filepath.FromSlash(k))
		os.MkdirAll(filepath.Dir(p), 0o777)
		os.WriteFile(p, v, 0o666)
	}
	dir := t.TempDir()
	res, err := Download(context.Background(), "file://"+src+"/", WithLocalDir(dir), WithExclude("*.bin"), WithChunkSize(64<<10))
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Files) != 2 {
		t.Fatalf("files %+v", res.Files)
	}
	for k, v := range want {
		got, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(k)))
		if strings.HasSuffix(k, ".bin") {
			if err == nil {
				t.Fatalf("%s downloaded though excluded", k)
			}
			continue
		}
		if err != nil || !bytes.Equal(got, v) {
			t.Fatalf("%s differs (%v)", k, err)
		}
	}
	res, err = Download(context.Background(), "file://"+src+"/", WithLocalDir(dir), WithExclude("*.bin"))
	if err != nil || res.Moved != 0 {
		t.Fatalf("second run: moved %d, %v", res.Moved, err)
	}
}
