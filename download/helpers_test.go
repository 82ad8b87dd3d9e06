package download

import (
	"bytes"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gosafetensors/safetensors/internal/pacedserver"
	"github.com/gosafetensors/safetensors/remote"
)

const (
	testRepo   = "org/model"
	testCommit = "0123456789abcdef0123456789abcdef01234567"
)

// hubFixture is a Hub-shaped paced server holding a generated model and
// a few small files, and the bytes it serves.
type hubFixture struct {
	srv   *pacedserver.Server
	files map[string]pacedserver.File // by repository path, "/config.json"
	mu    sync.Mutex
	read  map[string]int64 // content bytes served per path (resolve or cdn)
}

func newHubFixture(t testing.TB, spec pacedserver.ModelSpec, cfg pacedserver.Config) *hubFixture {
	t.Helper()
	files, err := spec.Model()
	if err != nil {
		t.Fatal(err)
	}
	cfgJSON := []byte(`{"architectures":["LlamaForCausalLM"],"hidden_size":16}`)
	files["/config.json"] = pacedserver.File{Content: bytes.NewReader(cfgJSON), Size: int64(len(cfgJSON))}
	files["/sub/README.md"] = pacedserver.File{Content: strings.NewReader("# model\n"), Size: 8}
	files["/empty.txt"] = pacedserver.File{Content: strings.NewReader(""), Size: 0}
	return startHub(t, files, cfg)
}

func startHub(t testing.TB, files map[string]pacedserver.File, cfg pacedserver.Config, mutate ...func(served map[string]pacedserver.File)) *hubFixture {
	t.Helper()
	served, err := pacedserver.Hub(testRepo, testCommit, files)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range mutate {
		m(served)
	}
	h := &hubFixture{files: files, read: map[string]int64{}}
	next := cfg.OnRead
	cfg.OnRead = func(name string, off, n int64) {
		h.mu.Lock()
		h.read[name] += n
		h.mu.Unlock()
		if next != nil {
			next(name, off, n)
		}
	}
	if cfg.Lifetime == 0 {
		cfg.Lifetime = 5 * time.Minute
	}
	h.srv, err = pacedserver.Start(cfg, served)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.srv.Close() })
	return h
}

// dataRead returns the content bytes served of files at least
// pacedserver.LFSThreshold long (the CDN's), API answers excluded.
func (h *hubFixture) dataRead() int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	var n int64
	for k, v := range h.read {
		if strings.HasPrefix(k, "/cdn/") {
			n += v
		}
	}
	return n
}

func (h *hubFixture) content(t testing.TB, path string) []byte {
	t.Helper()
	f := h.files[path]
	b := make([]byte, f.Size)
	if _, err := f.Content.ReadAt(b, 0); err != nil && err != io.EOF {
		t.Fatal(err)
	}
	return b
}

func (h *hubFixture) paths() []string { return slices.Sorted(maps.Keys(h.files)) }

func (h *hubFixture) hub(t testing.TB, n int) *remote.Hub {
	t.Helper()
	hub, err := remote.NewHub(append(remoteOptions(&config{concurrency: n}), remote.WithEndpoint(h.srv.URL), remote.WithToken(""), remote.WithOffline(false),
		remote.WithBackoff(time.Millisecond, 10*time.Millisecond))...)
	if err != nil {
		t.Fatal(err)
	}
	return hub
}

func smallSpec() pacedserver.ModelSpec {
	return pacedserver.ModelSpec{Hidden: 64, Intermediate: 128, Layers: 2, Vocab: 256, Shards: 3}
}

// readLink returns the target of a link, failing the test if it is not one.
func readLink(t testing.TB, p string) string {
	t.Helper()
	l, err := os.Readlink(p)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func ls(t testing.TB, dir string) []string {
	t.Helper()
	var out []string
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			rel, _ := filepath.Rel(dir, p)
			out = append(out, filepath.ToSlash(rel))
		}
		return nil
	})
	return out
}

// flipped serves r with one byte inverted.
type flipped struct {
	r   io.ReaderAt
	off int64
}

func (f flipped) ReadAt(p []byte, off int64) (int, error) {
	n, err := f.r.ReadAt(p, off)
	if f.off >= off && f.off < off+int64(n) {
		p[f.off-off] ^= 0xff
	}
	return n, err
}

// flipCDN makes the CDN serve the LFS file path with a byte flipped.
func flipCDN(path string, at int64) func(map[string]pacedserver.File) {
	return func(served map[string]pacedserver.File) {
		loc := served["/"+testRepo+"/resolve/main"+path].Redirect
		f := served[loc]
		f.Content = flipped{f.Content, at}
		served[loc] = f
	}
}
