package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gosafetensors/safetensors/internal/pacedserver"
)

const dlCommit = "89abcdef0123456789abcdef0123456789abcdef"

// hubServer serves spec as Hub repository org/model (LFS files through a
// redirect, digests in the listing); flip, if set, inverts a byte of that
// LFS file's served content.
func hubServer(t *testing.T, spec pacedserver.ModelSpec, flip string) *pacedserver.Server {
	t.Helper()
	files, err := spec.Model()
	if err != nil {
		t.Fatal(err)
	}
	served, err := pacedserver.Hub("org/model", dlCommit, files)
	if err != nil {
		t.Fatal(err)
	}
	if flip != "" {
		loc := served["/org/model/resolve/main/"+flip].Redirect
		f := served[loc]
		f.Content = flipByte{f.Content}
		served[loc] = f
	}
	s, err := pacedserver.Start(pacedserver.Config{}, served)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

type flipByte struct {
	r interface {
		ReadAt([]byte, int64) (int, error)
	}
}

func (f flipByte) ReadAt(p []byte, off int64) (int, error) {
	n, err := f.r.ReadAt(p, off)
	if off <= 5000 && 5000 < off+int64(n) {
		p[5000-off] ^= 0x80
	}
	return n, err
}

// hubEnv points the Hub client at s and the cache at a new folder, with
// no token.
func hubEnv(t *testing.T, s *pacedserver.Server) string {
	cache := t.TempDir()
	t.Setenv("HF_ENDPOINT", s.URL)
	t.Setenv("HF_HUB_CACHE", cache)
	t.Setenv("HF_HOME", t.TempDir())
	t.Setenv("HF_TOKEN", "")
	t.Setenv("HF_HUB_OFFLINE", "")
	return cache
}

// TestDownloadCLI: download into the cache, again (nothing moves), verify
// it, and read it offline through hf:// with every other command.
func TestDownloadCLI(t *testing.T) {
	s := hubServer(t, loadSpec, "")
	cache := hubEnv(t, s)
	code, out, errs := runCLI(t, "download", "hf://org/model", "--concurrency", "4", "--chunk", "1MiB")
	if code != 0 {
		t.Fatalf("download: exit %d: %s", code, errs)
	}
	snap := filepath.Join(cache, "models--org--model", "snapshots", dlCommit)
	if !strings.Contains(out, "hf://org/model @ "+dlCommit[:12]+": 3 files") || !strings.Contains(out, snap) {
		t.Fatalf("output:\n%s", out)
	}
	code, out, _ = runCLI(t, "download", "hf://org/model", "--json")
	var res downloadJSON
	if code != 0 || json.Unmarshal([]byte(out), &res) != nil || res.Moved != 0 || len(res.Files) != 3 || !res.Files[0].Present || res.Commit != dlCommit {
		t.Fatalf("second download: exit %d\n%s", code, out)
	}
	if code, out, _ := runCLI(t, "verify", "hf://org/model"); code != 0 || !strings.Contains(out, "3 files checked") || !strings.Contains(out, ": ok") {
		t.Fatalf("verify: exit %d\n%s", code, out)
	}
	t.Setenv("HF_HUB_OFFLINE", "1")
	s.Close()
	if code, out, errs := runCLI(t, "inspect", "hf://org/model"); code != 0 || !strings.Contains(out, "model.embed_tokens.weight") {
		t.Fatalf("inspect offline from the cache: exit %d\n%s%s", code, out, errs)
	}
	if code, _, errs := runCLI(t, "download", "hf://org/model", "--json"); code != 0 {
		t.Fatalf("download offline, cached: exit %d: %s", code, errs)
	}
	if code, _, errs := runCLI(t, "download", "hf://org/other"); code != 2 || !strings.Contains(errs, "offline") {
		t.Fatalf("download offline, not cached: exit %d: %s", code, errs)
	}
}

// TestDownloadCLIFlipped: a server that flips one byte of one shard: exit
// 1, the file named, nothing in snapshots/; verify finds a blob changed
// afterwards.
func TestDownloadCLIFlipped(t *testing.T) {
	s := hubServer(t, loadSpec, "model-00002-of-00002.safetensors")
	cache := hubEnv(t, s)
	code, _, errs := runCLI(t, "download", "hf://org/model")
	if code != 1 || !strings.Contains(errs, "hf://org/model/model-00002-of-00002.safetensors: sha256 mismatch: expected ") {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if ents, _ := os.ReadDir(filepath.Join(cache, "models--org--model", "snapshots")); len(ents) != 0 {
		t.Fatalf("snapshots/ holds %v", ents)
	}
	repo := filepath.Join(cache, "models--org--model")
	if code, out, _ := runCLI(t, "verify", repo); code != 0 {
		t.Fatalf("verify of the blobs kept: exit %d\n%s", code, out)
	}
	blobs, _ := filepath.Glob(filepath.Join(repo, "blobs", "*"))
	b, _ := os.ReadFile(blobs[0])
	b[0] ^= 1
	os.WriteFile(blobs[0], b, 0o644)
	if code, out, _ := runCLI(t, "verify", repo, "--json"); code != 1 || !strings.Contains(out, `"status": "mismatch"`) {
		t.Fatalf("verify of a changed blob: exit %d\n%s", code, out)
	}
	if code, _, errs := runCLI(t, "download", "https://127.0.0.1:1/x/"); code != 2 || !strings.Contains(errs, "--local-dir") {
		t.Fatalf("HTTP without --local-dir: exit %d %s", code, errs)
	}
}
