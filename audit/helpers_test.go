package audit_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/gosafetensors/safetensors/audit"
	"github.com/gosafetensors/safetensors/internal/hubtest"
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

const hubCommit = hubtest.Commit

// serveHub serves dir as the Hub repository org/model on loopback, and a
// Hub client for it.
func serveHub(t testing.TB, dir string) (*hubtest.Server, *remote.Hub) {
	h := hubtest.Serve(t, dir)
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
