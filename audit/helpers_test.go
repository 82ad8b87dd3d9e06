package audit_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gosafetensors/safetensors/audit"
	"github.com/gosafetensors/safetensors/remote"
	"github.com/gosafetensors/safetensors/sharded"
	"github.com/gosafetensors/safetensors/source"
)

const (
	torchDir = "../testdata/torch/"
	evilDir  = "../testdata/malicious/"
)

func copyFile(t testing.TB, src, dst string) {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func writeFile(t testing.TB, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// binModel writes a PyTorch-sharded model: pytorch_model.bin.index.json
// naming two .bin shards, the first a clean checkpoint, the second one
// that runs os.system on load.
func binModel(t testing.TB) string {
	dir := t.TempDir()
	copyFile(t, torchDir+"tiny_transformer.bin", filepath.Join(dir, "pytorch_model-00001-of-00002.bin"))
	copyFile(t, evilDir+"torch_zip_os_system.bin", filepath.Join(dir, "pytorch_model-00002-of-00002.bin"))
	writeFile(t, filepath.Join(dir, "pytorch_model.bin.index.json"), `{"metadata": {"total_size": 6464},
 "weight_map": {"h.0.fc_in.weight": "pytorch_model-00001-of-00002.bin", "lm_head.weight": "pytorch_model-00002-of-00002.bin"}}`)
	return dir
}

// safetensorsModel splits a model into a sharded safetensors model and
// returns its directory and shard names.
func safetensorsModel(t testing.TB) (string, []string) {
	dir := filepath.Join(t.TempDir(), "model")
	m, err := source.OpenModel(context.Background(), torchDir+"tiny_transformer.safetensors")
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if _, err := sharded.Split(context.Background(), m, dir, sharded.WithMaxShardSize(3000)); err != nil {
		t.Fatal(err)
	}
	shards, _ := filepath.Glob(filepath.Join(dir, "model-*.safetensors"))
	if len(shards) < 2 {
		t.Fatalf("%d shards", len(shards))
	}
	for i := range shards {
		shards[i] = filepath.Base(shards[i])
	}
	return dir, shards
}

// hubServer is shaped like the Hub: /ORG/REPO/resolve/REV/FILE answers with
// the file of dir and X-Repo-Commit, ETags and ranges (http.ServeContent),
// X-Error-Code EntryNotFound for a missing file.
type hubServer struct {
	*httptest.Server
	mu   sync.Mutex
	revs map[string]int
}

const hubCommit = "0123456789abcdef0123456789abcdef01234567"

func serveHub(t testing.TB, dir string) (*hubServer, *remote.Hub) {
	h := &hubServer{revs: map[string]int{}}
	h.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if rev, ok := strings.CutPrefix(r.URL.Path, "/api/models/org/model/revision/"); ok {
			// the Hub's model-info API: the commit and every file
			h.mu.Lock()
			h.revs[rev]++
			h.mu.Unlock()
			var sibs []map[string]string
			filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
				if err == nil && !d.IsDir() {
					rel, _ := filepath.Rel(dir, p)
					sibs = append(sibs, map[string]string{"rfilename": filepath.ToSlash(rel)})
				}
				return nil
			})
			json.NewEncoder(w).Encode(map[string]any{"sha": hubCommit, "siblings": sibs})
			return
		}
		rest, ok := strings.CutPrefix(r.URL.Path, "/org/model/resolve/")
		rev, file, _ := strings.Cut(rest, "/")
		if !ok || (rev != "main" && rev != hubCommit) {
			w.Header().Set("X-Error-Code", "RepoNotFound")
			http.Error(w, "not found", http.StatusNotFound)
			return
		}
		h.mu.Lock()
		h.revs[rev]++
		h.mu.Unlock()
		w.Header().Set("X-Repo-Commit", hubCommit)
		b, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(file)))
		if err != nil {
			w.Header().Set("X-Error-Code", "EntryNotFound")
			http.Error(w, "no such file", http.StatusNotFound)
			return
		}
		w.Header().Set("ETag", `"`+file+`"`)
		http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(b))
	}))
	t.Cleanup(h.Close)
	hub, err := remote.NewHub(remote.WithEndpoint(h.URL), remote.WithToken(""), remote.WithOffline(false))
	if err != nil {
		t.Fatal(err)
	}
	return h, hub
}

// serveDir serves dir over HTTP on loopback with ETags and ranges.
func serveDir(t testing.TB, dir string) *httptest.Server {
	srv := httptest.NewServer(http.FileServer(http.Dir(dir)))
	t.Cleanup(srv.Close)
	return srv
}

func scanAll(t testing.TB, loc string, opts ...audit.Option) []*audit.ScanReport {
	t.Helper()
	var out []*audit.ScanReport
	for r := range audit.Scan(context.Background(), loc, opts...) {
		out = append(out, r)
	}
	return out
}

func verdicts(reports []*audit.ScanReport) map[string]string {
	m := map[string]string{}
	for _, r := range reports {
		m[r.Path] = r.Verdict.String()
	}
	return m
}

func countHandler(h http.Handler, n *atomic.Int64) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		h.ServeHTTP(w, r)
	})
}
