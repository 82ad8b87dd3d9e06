package download

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
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
	endpoint, rest, _ := strings.Cut(arg, "|")
	cache, mode, _ := strings.Cut(rest, "|")
	hub, err := remote.NewHub(append(remoteOptions(&config{concurrency: killConc}), remote.WithEndpoint(endpoint), remote.WithToken(""), remote.WithOffline(false))...)
	if err != nil {
		t.Fatal(err)
	}
	// Tell the test, on descriptor 3, how many bytes are written to the
	// partial files (Progress.Moved counts a piece once written).
	report := os.NewFile(3, "progress")
	var mu sync.Mutex
	var last int64
	progress := func(p Progress) {
		mu.Lock()
		defer mu.Unlock()
		if p.Moved > last {
			last = p.Moved
			fmt.Fprintf(report, "%d\n", last)
		}
	}
	_, err = Download(context.Background(), "hf://"+testRepo, WithHub(hub), WithCacheDir(cache), WithConcurrency(killConc), killChunkOption(mode == "sized"), WithProgress(progress))
	t.Fatalf("the download ended before it was killed: %v", err)
}

const killConc, killChunk = 4, 256 << 10

// killChunkOption makes killChunk the chunk: given (WithChunkSize), or
// sized, the default chunk of ranges sized to the link, which grow
// beyond it where the link has latency while the bound of what a kill
// loses stays made of it.
func killChunkOption(sized bool) Option {
	if sized {
		return func(c *config) error { c.chunk = killChunk; return nil }
	}
	return WithChunkSize(killChunk)
}

// TestResumeAfterKill: a download killed (SIGKILL) at about half its bytes
// continues from what is on disk: the second run moves the bytes the
// journals of the partial files do not record, plus at most one chunk per
// connection (counted on the server); the kill lost at most a chunk per
// connection of the bytes the killed process had written; and no blob was
// ever visible under its final name before it was complete and checked.
//
// What the server sent the killed process but it never wrote (the kernel's
// socket buffers, a stream buffer being filled, a piece the server read
// for a connection already gone) is neither on disk nor the client's to
// bound: it is counted, logged, and not held against the resume.
//
// "chunk" gives the chunk; "sized" lets ranges be sized to a link with 20
// ms per request (about 3 MiB: twelve chunks) with the chunk as the
// default, and holds the kill to the same bound.
func TestResumeAfterKill(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a process")
	}
	t.Run("chunk", func(t *testing.T) { testResumeAfterKill(t, false) })
	t.Run("sized", func(t *testing.T) { testResumeAfterKill(t, true) })
}

func testResumeAfterKill(t *testing.T, sized bool) {
	var latency time.Duration
	mode := "chunk"
	if sized {
		latency, mode = 20*time.Millisecond, "sized"
	}
	spec := pacedserver.ModelSpec{Hidden: 512, Intermediate: 1024, Layers: 4, Vocab: 2048, Shards: 3}
	// The second run's requests for the CDN's files, for the failure message.
	var (
		second atomic.Bool
		askMu  sync.Mutex
		asked  []string
	)
	h := newHubFixture(t, spec, pacedserver.Config{Rate: 4 << 20, Latency: latency, Fault: func(r *http.Request) int {
		if second.Load() && strings.HasPrefix(r.URL.Path, "/cdn/") {
			askMu.Lock()
			asked = append(asked, path.Base(r.URL.Path)+" "+r.Header.Get("Range"))
			askMu.Unlock()
		}
		return 0
	}})
	var total int64
	for _, p := range h.paths() {
		if h.files[p].Size >= pacedserver.LFSThreshold {
			total += h.files[p].Size
		}
	}
	cache := t.TempDir()
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestKilledHelper$", "-test.count=1")
	cmd.Env = append(os.Environ(), helperEnv+"="+h.srv.URL+"|"+cache+"|"+mode)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	cmd.ExtraFiles = []*os.File{pw}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pw.Close()
	var written atomic.Int64 // bytes the killed process reported written
	reported := make(chan struct{})
	go func() {
		defer close(reported)
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			if n, err := strconv.ParseInt(sc.Text(), 10, 64); err == nil && n > written.Load() {
				written.Store(n)
			}
		}
	}()
	deadline := time.Now().Add(2 * time.Minute)
	for h.dataRead() < total/2 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	<-reported // every line the process wrote before it died is read
	pr.Close()
	// The server may still be answering the dead process's connections (a
	// piece read, its write failing): count their bytes in the first run.
	for h.srv.Stats().Open > 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	first, wrote := h.dataRead(), written.Load()
	if first < total/2 || first >= total {
		t.Fatalf("killed after %d of %d bytes", first, total)
	}
	blobs := filepath.Join(cache, "models--org--model", "blobs")
	partial := false
	// What is on disk: bytes the partial files' journals record, and
	// complete blobs; of all files, and of the LFS files the server counts.
	var partialAll, partialLFS, completeAll, completeLFS int64
	for _, name := range ls(t, blobs) {
		if strings.HasSuffix(name, partialSuffix+".journal") {
			n, size := journalBytes(t, filepath.Join(blobs, name))
			partialAll += n
			if size >= pacedserver.LFSThreshold {
				partialLFS += n
			}
		}
		if strings.HasSuffix(name, partialSuffix) || strings.HasSuffix(name, partialSuffix+".journal") {
			partial = true
			continue
		}
		b, err := os.ReadFile(filepath.Join(blobs, name))
		s := sha256.Sum256(b)
		if err != nil || (len(name) == 64 && hex.EncodeToString(s[:]) != name) {
			t.Fatalf("blobs/%s is visible and not its content", name)
		}
		completeAll += int64(len(b))
		if len(name) == 64 { // an LFS blob, named by its sha256
			completeLFS += int64(len(b))
		}
	}
	if !partial {
		t.Fatal("no partial download left by the killed process")
	}
	// The bytes on disk are at most those written, which are at most those
	// sent (the small files are not the CDN's); the kill loses, of those
	// written, less than a chunk per connection (the writers wait while
	// half a chunk per connection is not journalled; each adds at most a
	// stream buffer, a quarter chunk).
	const perConn = killConc * killChunk
	var small int64
	for _, f := range h.files {
		if f.Size < pacedserver.LFSThreshold {
			small += f.Size
		}
	}
	// A writer reports its piece (a stream buffer, at most a quarter
	// chunk) after the committer may have journalled it: the reports lag
	// the journals by at most a piece per connection.
	journalled := partialAll + completeAll
	if journalled > wrote+killConc*killChunk/4 || wrote-small > first {
		t.Fatalf("the journals and blobs hold %d bytes; the killed process wrote %d; the server sent %d (and %d of small files)", journalled, wrote, first, small)
	}
	if lost := wrote - journalled; lost > perConn {
		t.Fatalf("the kill lost %d written bytes (written %d, journalled %d): want at most %d (one chunk per connection)", lost, wrote, journalled, perConn)
	}
	second.Store(true)
	res, err := Download(context.Background(), "hf://"+testRepo, WithHub(h.hub(t, killConc)), WithCacheDir(cache), WithConcurrency(killConc), killChunkOption(sized))
	if err != nil {
		t.Fatal(err)
	}
	moved := h.dataRead() - first
	missing := total - partialLFS - completeLFS
	t.Logf("killed after %d of %d bytes sent, %d written, %d on disk (%d sent and never written); the second run moved %d in %d requests, missing %d, limit %d",
		first, total, wrote, journalled, first+small-wrote, moved, res.Requests, missing, missing+perConn)
	if res.Resumed != partialAll {
		t.Errorf("the second run resumed %d bytes; the journals record %d", res.Resumed, partialAll)
	}
	if moved > missing+perConn {
		askMu.Lock()
		t.Fatalf("second run moved %d bytes; %d were missing from the partial files: want at most %d (missing + one chunk per connection); it asked for:\n%s", moved, missing, missing+perConn, strings.Join(asked, "\n"))
	}
	checkSnapshot(t, h, cache)
	for _, name := range ls(t, blobs) {
		if strings.Contains(name, partialSuffix) {
			t.Fatalf("blobs/%s left after the download completed", name)
		}
	}
}

// journalBytes returns the bytes a partial file's journal records, and the
// file's size.
func journalBytes(t *testing.T, p string) (n, size int64) {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	line, _, _ := strings.Cut(string(b), "\n")
	text, _ := checkLine(line + "\n")
	var hdr journalHeader
	if err := json.Unmarshal([]byte(text), &hdr); err != nil {
		t.Fatalf("%s: %v", p, err)
	}
	set, err := readJournal(p, hdr.Object, hdr.Size)
	if err != nil {
		t.Fatal(err)
	}
	return set.bytes(), hdr.Size
}
