package download

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gosafetensors/safetensors/internal/pacedserver"
)

// hfPython returns a Python that imports huggingface_hub, or skips.
func hfPython(t *testing.T) string {
	for _, py := range []string{"/usr/bin/python3", "python3"} {
		if p, err := exec.LookPath(py); err == nil && exec.Command(p, "-c", "import huggingface_hub").Run() == nil {
			return p
		}
	}
	t.Skip("huggingface_hub is not importable by /usr/bin/python3 or python3 (set PYTHONPATH to a huggingface_hub source tree to run this test)")
	return ""
}

// hfScript reads a cache offline with huggingface_hub's own functions.
const hfScript = `
import hashlib, json, os, sys
from huggingface_hub import snapshot_download, hf_hub_download, try_to_load_from_cache, scan_cache_dir
cache = sys.argv[1]
out = {}
snap = snapshot_download("org/model", cache_dir=cache, local_files_only=True)
out["snapshot"] = snap
out["snapshot_json"] = snapshot_download("org/model", cache_dir=cache, allow_patterns=["*.json"])
p = hf_hub_download("org/model", "model-00002-of-00003.safetensors", cache_dir=cache, local_files_only=True)
out["shard_sha256"] = hashlib.sha256(open(p, "rb").read()).hexdigest()
out["readme"] = open(hf_hub_download("org/model", "sub/README.md", cache_dir=cache)).read()
out["cached_index"] = try_to_load_from_cache("org/model", "model.safetensors.index.json", cache_dir=cache)
info = scan_cache_dir(cache)
out["warnings"] = [str(w) for w in info.warnings]
out["repos"] = [[r.repo_id, r.repo_type, r.nb_files, r.size_on_disk, sorted(x.commit_hash for x in r.revisions), sorted(sorted(x.refs) for x in r.revisions)] for r in info.repos]
json.dump(out, sys.stdout)
`

// TestHuggingfaceHubReadsCache: what download puts in the cache is found
// offline by huggingface_hub itself (snapshot_download, hf_hub_download,
// try_to_load_from_cache) and scans clean (scan_cache_dir), where a Python
// with huggingface_hub is available.
func TestHuggingfaceHubReadsCache(t *testing.T) {
	py := hfPython(t)
	h := newHubFixture(t, smallSpec(), pacedserver.Config{})
	cache := t.TempDir()
	res, err := Download(context.Background(), "hf://"+testRepo, WithHub(h.hub(t, 4)), WithCacheDir(cache))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(py, "-c", hfScript, cache)
	cmd.Env = append(os.Environ(), "HF_HUB_OFFLINE=1", "HF_HUB_DISABLE_TELEMETRY=1", "HF_HOME="+t.TempDir())
	out, err := cmd.Output()
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			t.Fatalf("huggingface_hub: %v\n%s", err, ee.Stderr)
		}
		t.Fatal(err)
	}
	var got struct {
		Snapshot     string `json:"snapshot"`
		SnapshotJSON string `json:"snapshot_json"`
		ShardSHA256  string `json:"shard_sha256"`
		Readme       string `json:"readme"`
		CachedIndex  string `json:"cached_index"`
		Warnings     []string
		Repos        [][]any
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	var shard File
	for _, f := range res.Files {
		if f.Path == "model-00002-of-00003.safetensors" {
			shard = f
		}
	}
	if got.Snapshot != res.Dir || got.SnapshotJSON != res.Dir || got.ShardSHA256 != shard.Digest.Hex || got.Readme != "# model\n" ||
		got.CachedIndex != filepath.Join(res.Dir, "model.safetensors.index.json") {
		t.Fatalf("huggingface_hub saw %+v; the download is at %s", got, res.Dir)
	}
	if len(got.Warnings) != 0 || len(got.Repos) != 1 {
		t.Fatalf("scan_cache_dir: %+v", got)
	}
	t.Logf("huggingface_hub: %s", strings.TrimSpace(string(out)))
}

// TestHuggingfaceHubWritesCache: what huggingface_hub downloads (from the
// same Hub-shaped loopback server) is found by download as already there,
// and verifies.
func TestHuggingfaceHubWritesCache(t *testing.T) {
	py := hfPython(t)
	h := newHubFixture(t, smallSpec(), pacedserver.Config{})
	cache := t.TempDir()
	var names []string
	for _, p := range h.paths() {
		names = append(names, strings.TrimPrefix(p, "/"))
	}
	// Debian 12's filelock (3.9) predates the mode argument huggingface_hub
	// passes; the lock taken is the same flock(2) without it.
	script := `
import sys, inspect, filelock
import huggingface_hub.utils._fixes as fixes
if "mode" not in inspect.signature(filelock.FileLock.__init__).parameters:
    fixes.FileLock = lambda path, timeout=-1, mode=None: filelock.FileLock(path, timeout=timeout)
from huggingface_hub import hf_hub_download
for name in sys.argv[2:]:
    hf_hub_download("org/model", name, cache_dir=sys.argv[1])
`
	cmd := exec.Command(py, append([]string{"-c", script, cache}, names...)...)
	cmd.Env = append(os.Environ(), "HF_ENDPOINT="+h.srv.URL, "HF_HUB_OFFLINE=0", "HF_HUB_DISABLE_TELEMETRY=1", "HF_HOME="+t.TempDir(), "HF_HUB_DISABLE_XET=1")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("huggingface_hub: %v\n%s", err, out)
	}
	res, err := Download(context.Background(), "hf://"+testRepo, WithHub(h.hub(t, 4)), WithCacheDir(cache))
	if err != nil {
		t.Fatal(err)
	}
	if res.Moved != 0 {
		t.Fatalf("download moved %d bytes of a repository huggingface_hub had cached", res.Moved)
	}
	rep, err := Verify(context.Background(), filepath.Join(cache, "models--org--model"))
	if err != nil || !rep.OK() {
		t.Fatalf("verify: %v %v", rep.Problems, err)
	}
	for _, f := range rep.Files {
		if f.Status != "ok" {
			t.Fatalf("%+v", f)
		}
	}
}
