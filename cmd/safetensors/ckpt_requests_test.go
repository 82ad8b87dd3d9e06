package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gosafetensors/safetensors/torch/torchtest"
)

// holeWriter writes to a file, leaving holes where it is given zeros: a
// checkpoint of a GB on a few MB of disk.
type holeWriter struct {
	f   *os.File
	off int64
}

var zeroBlock [4096]byte

func (h *holeWriter) Write(p []byte) (int, error) {
	for i := 0; i < len(p); i += len(zeroBlock) {
		b := p[i:min(i+len(zeroBlock), len(p))]
		if !bytes.Equal(b, zeroBlock[:len(b)]) {
			if _, err := h.f.WriteAt(b, h.off); err != nil {
				return i, err
			}
		}
		h.off += int64(len(b))
	}
	return len(p), nil
}

// sparseCheckpoint writes a checkpoint of n F32 tensors of size bytes each
// (zeros) to path with write (torchtest.WriteZip or WriteLegacy).
func sparseCheckpoint(t *testing.T, path string, n int, size int64, write func(io.Writer, []torchtest.Tensor, torchtest.Options) error) {
	t.Helper()
	tensors := make([]torchtest.Tensor, n)
	for i := range tensors {
		tensors[i] = torchtest.Tensor{Name: "model.layers." + strconv.Itoa(i) + ".weight", DType: "F32", Shape: []int64{size / 4},
			DataSize: size, Fill: func(w io.Writer) error {
				_, err := io.CopyN(w, zeroReader{}, size)
				return err
			}}
	}
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h := &holeWriter{f: f}
	if err := write(h, tensors, torchtest.Options{}); err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(h.off); err != nil {
		t.Fatal(err)
	}
}

type zeroReader struct{}

func (zeroReader) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

// TestInspectRemoteCheckpointRequests: inspect and scan of a remote
// PyTorch checkpoint of 10,000 tensors (1 GB) through hf:// cost at most 8
// requests each, on a Hub-shaped server whose file host answers
// multi-range requests and on one that answers only the first range asked
// for, and scan's verdict is the local one. inspect reads no storage
// record; scan checks every record: a few MB on the multi-range host, the
// storages read through with one request on the other (their headers lie
// 100 KB apart: cheaper to read than to ask for one by one). get of one
// tensor costs a few more. (The process's Hub client remembers that a
// server answers single ranges only: the multi-range runs come first.
// remote.TestRemoteCheckpointRequests also has a server answering 200.)
func TestInspectRemoteCheckpointRequests(t *testing.T) {
	const n, size = 10_000, 100_000
	dir := t.TempDir()
	sparseCheckpoint(t, filepath.Join(dir, "zip.bin"), n, size, torchtest.WriteZip)
	sparseCheckpoint(t, filepath.Join(dir, "legacy.bin"), n, size, torchtest.WriteLegacy)
	const commit = "0123456789abcdef0123456789abcdef01234567"
	var requests, moved atomic.Int64
	var firstOnly atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		if repo, ok := strings.CutPrefix(r.URL.Path, "/api/models/org/"); ok {
			repo, _, _ = strings.Cut(repo, "/")
			json.NewEncoder(w).Encode(map[string]any{"id": "org/" + repo, "sha": commit, "siblings": []map[string]string{{"rfilename": "pytorch_model.bin"}}})
			return
		}
		rest, ok := strings.CutPrefix(r.URL.Path, "/org/")
		repo, rest, _ := strings.Cut(rest, "/resolve/")
		_, file, _ := strings.Cut(rest, "/")
		f, err := os.Open(filepath.Join(dir, repo+".bin"))
		if !ok || file != "pytorch_model.bin" || err != nil {
			w.Header().Set("X-Error-Code", "EntryNotFound")
			http.Error(w, "no such file", http.StatusNotFound)
			return
		}
		defer f.Close()
		if rng := r.Header.Get("Range"); strings.Contains(rng, ",") && firstOnly.Load() {
			r.Header.Set("Range", rng[:strings.IndexByte(rng, ',')])
		}
		w.Header().Set("X-Repo-Commit", commit)
		w.Header().Set("ETag", `"`+repo+`"`)
		http.ServeContent(countingResponse{ResponseWriter: w, n: &moved}, r, "", time.Time{}, f)
	}))
	defer srv.Close()
	t.Setenv("HF_ENDPOINT", srv.URL)
	t.Setenv("HF_TOKEN", "")
	t.Setenv("HF_HOME", t.TempDir())
	for _, single := range []bool{false, true} {
		firstOnly.Store(single)
		server := map[bool]string{false: "multi-range server", true: "single-range server"}[single]
		for _, repo := range []string{"zip", "legacy"} {
			loc := "hf://org/" + repo + "/pytorch_model.bin"
			fi, err := os.Stat(filepath.Join(dir, repo+".bin"))
			if err != nil {
				t.Fatal(err)
			}
			count := func(what string, limit, maxBytes int64, args ...string) string {
				t.Helper()
				requests.Store(0)
				moved.Store(0)
				code, out, errOut := runCLI(t, args...)
				got := requests.Load()
				t.Logf("%s checkpoint, %s: %s: %d requests, %d bytes", repo, server, what, got, moved.Load())
				if code != 0 {
					t.Fatalf("%s: exit %d %s", what, code, errOut)
				}
				if got > limit || moved.Load() > maxBytes {
					t.Errorf("%s checkpoint, %s: %s took %d requests and %d bytes, want at most %d and %d", repo, server, what, got, moved.Load(), limit, maxBytes)
				}
				return out
			}
			if out := count("inspect", 8, 4<<20, "inspect", loc); !strings.Contains(out, "tensors     10,000") {
				t.Fatalf("inspect:\n%s", out)
			}
			count("get of one tensor", 11, 4<<20, "get", loc, "model.layers.5000.weight", "--slice", "0:3")
			_, local, _ := runCLI(t, "scan", "--json", filepath.Join(dir, repo+".bin"))
			// the central directory, data.pkl and every record's header; on
			// the single-range host, the storages read through
			scanBytes := int64(8 << 20)
			if single {
				scanBytes = fi.Size() + fi.Size()/100
			}
			if out := count("scan", 8, scanBytes, "scan", "--json", loc); verdictOf(t, out) != "clean" || verdictOf(t, out) != verdictOf(t, local) {
				t.Fatalf("scan:\n%s\nlocal:\n%s", out, local)
			}
		}
	}
}

// verdictOf returns the verdict of a one-file scan --json output.
func verdictOf(t *testing.T, out string) string {
	t.Helper()
	var res []scanResult
	if err := json.Unmarshal([]byte(out), &res); err != nil || len(res) != 1 {
		t.Fatalf("scan --json: %v\n%s", err, out)
	}
	return res[0].Verdict
}
