package download

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gosafetensors/safetensors/internal/pacedserver"
	"github.com/gosafetensors/safetensors/remote"
)

const helperEnv = "GOSAFETENSORS_DOWNLOAD_HELPER"

// TestKilledHelper is the process TestResumeAfterKill kills: it downloads
// from the endpoint in its environment and never returns on its own
// before it is killed (it is not a test when run alone).
func TestKilledHelper(t *testing.T) {
	arg := os.Getenv(helperEnv)
	if arg == "" {
		t.Skip("helper process of TestResumeAfterKill")
	}
	endpoint, cache, _ := strings.Cut(arg, "|")
	hub, err := remote.NewHub(append(remoteOptions(&config{concurrency: killConc}), remote.WithEndpoint(endpoint), remote.WithToken(""), remote.WithOffline(false))...)
	if err != nil {
		t.Fatal(err)
	}
	_, err = Download(context.Background(), "hf://"+testRepo, WithHub(hub), WithCacheDir(cache), WithConcurrency(killConc), WithChunkSize(killChunk))
	t.Fatalf("the download ended before it was killed: %v", err)
}

const killConc, killChunk = 4, 256 << 10

// TestResumeAfterKill: a download killed (SIGKILL) at about half its bytes
// continues from what is on disk: the second run moves the bytes the first
// did not, plus at most one chunk per connection (counted on the server),
// and no blob was ever visible under its final name before it was
// complete and checked.
func TestResumeAfterKill(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a process")
	}
	spec := pacedserver.ModelSpec{Hidden: 512, Intermediate: 1024, Layers: 4, Vocab: 2048, Shards: 3}
	h := newHubFixture(t, spec, pacedserver.Config{Rate: 4 << 20})
	var total int64
	for _, p := range h.paths() {
		if h.files[p].Size >= pacedserver.LFSThreshold {
			total += h.files[p].Size
		}
	}
	cache := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestKilledHelper$", "-test.count=1")
	cmd.Env = append(os.Environ(), helperEnv+"="+h.srv.URL+"|"+cache)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(2 * time.Minute)
	for h.dataRead() < total/2 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	first := h.dataRead()
	if first < total/2 || first >= total {
		t.Fatalf("killed after %d of %d bytes", first, total)
	}
	blobs := filepath.Join(cache, "models--org--model", "blobs")
	partial := false
	for _, name := range ls(t, blobs) {
		if strings.HasSuffix(name, partialSuffix) || strings.HasSuffix(name, partialSuffix+".journal") {
			partial = true
			continue
		}
		b, err := os.ReadFile(filepath.Join(blobs, name))
		s := sha256.Sum256(b)
		if err != nil || (len(name) == 64 && hex.EncodeToString(s[:]) != name) {
			t.Fatalf("blobs/%s is visible and not its content", name)
		}
	}
	if !partial {
		t.Fatal("no partial download left by the killed process")
	}
	res, err := Download(context.Background(), "hf://"+testRepo, WithHub(h.hub(t, killConc)), WithCacheDir(cache), WithConcurrency(killConc), WithChunkSize(killChunk))
	if err != nil {
		t.Fatal(err)
	}
	second := h.dataRead() - first
	if limit := total - first + killConc*killChunk; second > limit {
		t.Fatalf("second run moved %d bytes; the first moved %d of %d: want at most %d (missing + one chunk per connection)", second, first, total, limit)
	}
	t.Logf("killed after %d of %d bytes; the second run moved %d (%d resumed from partial files, limit %d)", first, total, second, res.Resumed, total-first+killConc*killChunk)
	checkSnapshot(t, h, cache)
	for _, name := range ls(t, blobs) {
		if strings.Contains(name, partialSuffix) {
			t.Fatalf("blobs/%s left after the download completed", name)
		}
	}
}
