package source

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/gosafetensors/safetensors"
	"github.com/gosafetensors/safetensors/remote"
	"github.com/gosafetensors/safetensors/sharded"
	"github.com/gosafetensors/safetensors/torch"
	"github.com/gosafetensors/safetensors/torch/torchtest"
)

// counted serves dir over HTTP on 127.0.0.1 (http.FileServer, which uses
// http.ServeContent: ranges, multi-ranges, ETags) and counts requests and
// body bytes per path.
type counted struct {
	*httptest.Server
	mu       sync.Mutex
	requests map[string]int
	bytes    atomic.Int64
}

type countingWriter struct {
	http.ResponseWriter
	n *atomic.Int64
}

func (c countingWriter) Write(p []byte) (int, error) {
	c.n.Add(int64(len(p)))
	return c.ResponseWriter.Write(p)
}

// withETag serves dir with a strong ETag made of each file's size and
// modification time, as nginx does (http.FileServer sends only a
// Last-Modified, which does not pin a file written less than a minute ago).
func withETag(dir string) http.Handler {
	fs := http.FileServer(http.Dir(dir))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if st, err := os.Stat(filepath.Join(dir, filepath.FromSlash(r.URL.Path))); err == nil {
			w.Header().Set("ETag", fmt.Sprintf(`"%x-%x"`, st.ModTime().UnixNano(), st.Size()))
		}
		fs.ServeHTTP(w, r)
	})
}

func serveDir(t testing.TB, dir string) *counted {
	c := &counted{requests: map[string]int{}}
	fs := withETag(dir)
	c.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c.mu.Lock()
		c.requests[r.URL.Path]++
		c.mu.Unlock()
		fs.ServeHTTP(countingWriter{w, &c.bytes}, r)
	}))
	t.Cleanup(c.Close)
	return c
}

func (c *counted) total() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, v := range c.requests {
		n += v
	}
	return n
}

func TestRemoteSingleFileOneRequest(t *testing.T) {
	srv := serveDir(t, "../testdata/torch")
	m, err := OpenModel(context.Background(), srv.URL+"/tiny_transformer.safetensors")
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if m.File == nil || len(m.Names()) != 35 {
		t.Fatalf("format %v, %d tensors", m.Format, len(m.Names()))
	}
	if n := srv.total(); n != 1 {
		t.Fatalf("opening a remote file with a small header took %d requests, want 1", n)
	}
	ref, _ := safetensors.Open("../testdata/torch/tiny_transformer.safetensors")
	defer ref.Close()
	for _, name := range ref.Names() {
		a, _ := m.Tensor(name)
		ab, err := a.Copy()
		if err != nil {
			t.Fatal(err)
		}
		b, _ := ref.Tensor(name)
		bb, _ := b.Bytes()
		if !bytes.Equal(ab, bb) {
			t.Fatalf("%s differs", name)
		}
	}
}

// A sharded model over HTTP costs the index plus one request per shard;
// a slice of a tensor moves about the slice, not the tensor.
func TestRemoteShardedModelAndSlice(t *testing.T) {
	dir := t.TempDir()
	// a matrix big enough that a slice of it is worth counting: 512 rows of 2 KiB
	big := make([]byte, 512*512*4)
	for i := range big {
		big[i] = byte(i * 7)
	}
	src := filepath.Join(dir, "src.safetensors")
	err := safetensors.WriteFile(src, []safetensors.TensorData{
		{Name: "a.weight", DType: safetensors.F32, Shape: []int64{512, 512}, Data: big},
		{Name: "b.weight", DType: safetensors.F32, Shape: []int64{512, 512}, Data: big},
		{Name: "c.bias", DType: safetensors.F32, Shape: []int64{4}, Data: make([]byte, 16)},
	}, map[string]string{"format": "pt"})
	if err != nil {
		t.Fatal(err)
	}
	m0, err := OpenModel(context.Background(), src)
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "model")
	if _, err := sharded.Split(context.Background(), m0, out, sharded.WithMaxShardSize(1<<20)); err != nil {
		t.Fatal(err)
	}
	m0.Close()
	shards, _ := filepath.Glob(filepath.Join(out, "model-*.safetensors"))
	if len(shards) < 2 {
		t.Fatalf("%d shards", len(shards))
	}
	srv := serveDir(t, out)
	m, err := OpenModel(context.Background(), srv.URL+"/model.safetensors.index.json")
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if m.Sharded == nil || len(m.Names()) != 3 {
		t.Fatalf("not a sharded model: %v", m.Names())
	}
	if n := srv.total(); n != 1+len(shards) {
		t.Fatalf("opening a %d-shard model took %d requests, want %d", len(shards), n, 1+len(shards))
	}
	before := srv.bytes.Load()
	tt, err := m.Tensor("a.weight")
	if err != nil {
		t.Fatal(err)
	}
	// 1/8 of the rows
	s, err := tt.Slice(safetensors.Range(64, 128))
	if err != nil {
		t.Fatal(err)
	}
	got, _ := s.Bytes()
	if !bytes.Equal(got, big[64*2048:128*2048]) {
		t.Fatal("row slice differs")
	}
	moved := srv.bytes.Load() - before
	if limit := int64(len(got)) + 2048; moved > limit {
		t.Fatalf("a %d-byte slice moved %d bytes (limit: the slice plus one row, %d)", len(got), moved, limit)
	}
	// a column slice: one run per row, a handful of requests
	reqs := srv.total()
	cs, err := tt.Slice(safetensors.All(), safetensors.Range(0, 8))
	if err != nil {
		t.Fatal(err)
	}
	cb, _ := cs.Bytes()
	for r := range 512 {
		if !bytes.Equal(cb[r*32:r*32+32], big[r*2048:r*2048+32]) {
			t.Fatalf("column slice row %d differs", r)
		}
	}
	if n := srv.total() - reqs; n > 8 {
		t.Fatalf("a 512-row column slice took %d requests", n)
	}
}

// Auditing a remote checkpoint reads its directory and pickles, not its
// storages.
func TestRemoteScanMovesLittle(t *testing.T) {
	dir := t.TempDir()
	const storage = 16 << 20
	p := filepath.Join(dir, "pytorch_model.bin")
	if err := writeBigCheckpoint(p, 6, storage); err != nil {
		t.Fatal(err)
	}
	st, _ := os.Stat(p)
	srv := serveDir(t, dir)
	o, err := Open(context.Background(), srv.URL+"/pytorch_model.bin")
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	rep, err := torch.Scan(o, o.Size, o.Name)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Verdict() != torch.VerdictClean {
		t.Fatalf("verdict %s: %v", rep.Verdict(), rep.Problems)
	}
	if moved := srv.bytes.Load(); moved > 1<<20 {
		t.Fatalf("scanning a %d-byte checkpoint moved %d bytes", st.Size(), moved)
	}
}

// writeBigCheckpoint writes a torch zip checkpoint of n F32 tensors of
// size bytes each, streamed (never held in memory).
func writeBigCheckpoint(path string, n int, size int64) error {
	var tensors []torchtest.Tensor
	for i := range n {
		tensors = append(tensors, torchtest.Tensor{Name: "layers." + strconv.Itoa(i) + ".weight", DType: "F32", Shape: []int64{size / 4},
			DataSize: size, Fill: func(w io.Writer) error {
				buf := make([]byte, 1<<20)
				for left := size; left > 0; left -= int64(len(buf)) {
					if _, err := w.Write(buf[:min(int64(len(buf)), left)]); err != nil {
						return err
					}
				}
				return nil
			}})
	}
	return torchtest.WriteFile(path, tensors, torchtest.Options{})
}

// A Hub repository (a loopback server shaped like the Hub) opens as one
// model: the file list resolves the revision, then the index and one
// request per shard, all at the pinned commit.
func TestHubRepoModel(t *testing.T) {
	dir := t.TempDir()
	m0, err := OpenModel(context.Background(), "../testdata/torch/tiny_transformer.safetensors")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sharded.Split(context.Background(), m0, dir, sharded.WithMaxShardSize(2000)); err != nil {
		t.Fatal(err)
	}
	m0.Close()
	shards, _ := filepath.Glob(filepath.Join(dir, "model-*.safetensors"))
	srv := serveHub(t, dir)
	hub, err := remote.NewHub(remote.WithEndpoint(srv.URL), remote.WithToken(""))
	if err != nil {
		t.Fatal(err)
	}
	m, err := OpenModel(context.Background(), "hf://org/model", WithHub(hub))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if m.Sharded == nil || len(m.Names()) != 35 {
		t.Fatalf("hf://org/model: %v tensors", len(m.Names()))
	}
	if revs := srv.Requests(); revs["main"] != 1 || revs[hubCommit] != len(shards)+1 {
		t.Fatalf("requests by revision %v: want the file list at main once, then the index and %d shards at the commit", revs, len(shards))
	}
	if _, err := OpenModel(context.Background(), "hf://org/nope", WithHub(hub)); err == nil || !IsIOError(err) {
		t.Fatalf("missing repo: %v", err)
	}
}
