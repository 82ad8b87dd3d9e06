package load_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gosafetensors/safetensors"
	"github.com/gosafetensors/safetensors/compressed"
	"github.com/gosafetensors/safetensors/internal/pacedserver"
	"github.com/gosafetensors/safetensors/load"
	"github.com/gosafetensors/safetensors/remote"
	"github.com/gosafetensors/safetensors/source"
)

func TestLoadLocal(t *testing.T) {
	dir := writeModel(t, small)
	ref := reference(t, dir)
	for _, tc := range []struct {
		conc  int
		chunk int64
	}{{1, 0}, {3, 4 << 10}, {16, 64<<10 + 4096}, {16, 0}} {
		t.Run(fmt.Sprintf("c%d-chunk%d", tc.conc, tc.chunk), func(t *testing.T) {
			opts := []load.Option{load.WithConcurrency(tc.conc)}
			if tc.chunk > 0 {
				opts = append(opts, load.WithChunkSize(tc.chunk))
			}
			l, err := load.Open(context.Background(), dir, opts...)
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			got, st := collect(t, l)
			if len(got) != len(ref) {
				t.Fatalf("%d tensors, want %d", len(got), len(ref))
			}
			for _, g := range got {
				expectPart(t, ref, g)
			}
			if st.Bytes != l.Size() || st.Tensors != len(ref) || st.Requests != 0 {
				t.Fatalf("stats %+v, want %d bytes, %d tensors, no requests", st, l.Size(), len(ref))
			}
			// Chunks span tensors: as many as the bytes need, no more.
			chunk := l.ChunkSize()
			if min := (l.Size() + chunk - 1) / chunk; st.Chunks < min || st.Chunks > min+3 {
				t.Fatalf("%d chunks of at most %d bytes for %d bytes in 3 files", st.Chunks, chunk, l.Size())
			}
		})
	}
}

func TestLoadHTTP(t *testing.T) {
	srv, u, _ := serve(t, small, pacedserver.Config{})
	ref := reference(t, u)
	srv.ResetStats()
	l, err := load.Open(context.Background(), u, load.WithConcurrency(8), load.WithChunkSize(256<<10))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	got, st := collect(t, l)
	for _, g := range got {
		expectPart(t, ref, g)
	}
	if len(got) != len(ref) {
		t.Fatalf("%d tensors, want %d", len(got), len(ref))
	}
	if st.Requests < st.Chunks || st.Requests > st.Chunks+st.Retries {
		t.Fatalf("stats %+v: one request per chunk expected", st)
	}
	// Every data byte crossed the wire once; headers and the index are
	// read by Open, before the load.
	if c := srv.Stats().Content; c < l.Size() || c > l.Size()+3*remote.DefaultPrefetch+64<<10 {
		t.Fatalf("server sent %d content bytes for a %d-byte load", c, l.Size())
	}
}

func TestLoadFilter(t *testing.T) {
	dir := writeModel(t, small)
	ref := reference(t, dir)
	l, err := load.Open(context.Background(), dir, load.WithFilter("*.layers.1.*", "lm_head"))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	got, _ := collect(t, l)
	want := 0
	for name := range ref {
		if strings.Contains(name, ".layers.1.") || strings.Contains(name, "lm_head") {
			want++
			if got[name] == nil {
				t.Errorf("%s not loaded", name)
			}
		}
	}
	if len(got) != want {
		t.Fatalf("%d tensors, want %d", len(got), want)
	}
	for _, g := range got {
		expectPart(t, ref, g)
	}
	if _, err := load.New(nil, load.WithFilter("[")); !errors.Is(err, load.ErrOption) {
		t.Fatalf("bad glob: %v, want ErrOption", err)
	}
}

func TestLoadDestination(t *testing.T) {
	dir := writeModel(t, small)
	ref := reference(t, dir)
	m, err := source.OpenModel(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	var arena []byte
	var offs = map[string]int{}
	var calls atomic.Int32
	l, err := load.New(m, load.WithChunkSize(8<<10), load.WithDestination(func(p load.Part) ([]byte, error) {
		calls.Add(1)
		offs[p.Name] = len(arena)
		arena = append(arena, make([]byte, p.Size)...) // grows: each part gets its own, stable range
		return arena[offs[p.Name] : offs[p.Name]+int(p.Size) : offs[p.Name]+int(p.Size)], nil
	}))
	if err != nil {
		t.Fatal(err)
	}
	// Preallocate so that append never moves earlier parts.
	arena = make([]byte, 0, l.Size())
	got, _ := collect(t, l)
	if int(calls.Load()) != len(ref) {
		t.Fatalf("destination called %d times for %d tensors", calls.Load(), len(ref))
	}
	for name, g := range got {
		expectPart(t, ref, g)
		if &g.Data[0] != &arena[offs[name]] {
			t.Fatalf("%s: not delivered in its destination", name)
		}
	}
	// A destination of the wrong size is refused.
	l2, _ := load.New(m, load.WithDestination(func(p load.Part) ([]byte, error) { return make([]byte, p.Size+1), nil }))
	if _, err := l2.Load(context.Background(), func(*load.Tensor) error { return nil }); !errors.Is(err, load.ErrOption) {
		t.Fatalf("wrong-size destination: %v", err)
	}
	// A destination's error stops the load and names the tensor.
	boom := errors.New("out of pinned memory")
	l3, _ := load.New(m, load.WithDestination(func(p load.Part) ([]byte, error) { return nil, boom }))
	if _, err := l3.Load(context.Background(), func(*load.Tensor) error { return nil }); !errors.Is(err, boom) || !strings.Contains(err.Error(), "tensor") {
		t.Fatalf("destination error: %v", err)
	}
}

func TestLoadAllIterator(t *testing.T) {
	dir := writeModel(t, small)
	ref := reference(t, dir)
	l, err := load.Open(context.Background(), dir, load.WithChunkSize(16<<10))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	n := 0
	for tt, err := range l.All(context.Background()) {
		if err != nil {
			t.Fatal(err)
		}
		expectPart(t, ref, tt)
		n++
	}
	if n != len(ref) {
		t.Fatalf("%d tensors, want %d", n, len(ref))
	}
	// Stopping early cancels the rest.
	n = 0
	for _, err := range l.All(context.Background()) {
		if err != nil {
			t.Fatal(err)
		}
		if n++; n == 2 {
			break
		}
	}
}

func TestLoadDiscard(t *testing.T) {
	dir := writeModel(t, small)
	var last load.Progress
	var calls int
	l, err := load.Open(context.Background(), dir, load.WithChunkSize(64<<10), load.WithProgress(func(p load.Progress) { last = p; calls++ }))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	st, err := l.Discard(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if st.Bytes != l.Size() || st.Tensors != len(l.Parts()) {
		t.Fatalf("stats %+v for %d bytes, %d parts", st, l.Size(), len(l.Parts()))
	}
	if int64(calls) != st.Chunks || last.Bytes != l.Size() || last.Tensors != len(l.Parts()) || last.Total != l.Size() {
		t.Fatalf("%d progress calls for %d chunks, last %+v", calls, st.Chunks, last)
	}
}

func TestLoadCallbackError(t *testing.T) {
	dir := writeModel(t, small)
	l, err := load.Open(context.Background(), dir, load.WithChunkSize(8<<10), load.WithConcurrency(2))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	stop := errors.New("enough")
	var n int
	st, err := l.Load(context.Background(), func(*load.Tensor) error {
		if n++; n == 3 {
			return stop
		}
		return nil
	})
	if !errors.Is(err, stop) {
		t.Fatalf("err %v, want the callback's", err)
	}
	if st.Tensors != 2 || st.Bytes >= l.Size() {
		t.Fatalf("stats %+v after refusing the third tensor", st)
	}
}

func TestLoadCancel(t *testing.T) {
	// A slow server: the load is cancelled after the first tensor, long
	// before it could finish.
	_, u, _ := serve(t, small, pacedserver.Config{Rate: 2 << 20, Latency: 5e6})
	l, err := load.Open(context.Background(), u, load.WithChunkSize(64<<10), load.WithConcurrency(4))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ctx, cancel := context.WithCancel(context.Background())
	st, err := l.Load(ctx, func(*load.Tensor) error { cancel(); return nil })
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v, want context.Canceled", err)
	}
	if st.Bytes > l.Size()/2 {
		t.Fatalf("read %d of %d bytes after cancelling at the first tensor", st.Bytes, l.Size())
	}
}

func TestLoadFileChanged(t *testing.T) {
	dir := writeModel(t, small)
	l, err := load.Open(context.Background(), dir, load.WithChunkSize(8<<10), load.WithConcurrency(1))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	shard := filepath.Join(dir, "model-00001-of-00003.safetensors")
	once := sync.Once{}
	_, err = l.Load(context.Background(), func(*load.Tensor) error {
		once.Do(func() {
			f, err := os.OpenFile(shard, os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := f.WriteAt([]byte{1}, 100); err != nil {
				t.Fatal(err)
			}
			f.Close()
			st, _ := os.Stat(shard)
			os.Chtimes(shard, st.ModTime(), st.ModTime().Add(1e9)) // coarse clocks
		})
		return nil
	})
	if !errors.Is(err, load.ErrChanged) || !strings.Contains(err.Error(), shard) {
		t.Fatalf("err %v, want ErrChanged naming %s", err, shard)
	}
}

func TestLoadTruncated(t *testing.T) {
	dir := writeModel(t, small)
	l, err := load.Open(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	shard := filepath.Join(dir, "model-00003-of-00003.safetensors")
	st, _ := os.Stat(shard)
	if err := os.Truncate(shard, st.Size()-10); err != nil {
		t.Fatal(err)
	}
	_, err = l.Load(context.Background(), func(*load.Tensor) error { return nil })
	if err == nil || !strings.Contains(err.Error(), shard) || !strings.Contains(err.Error(), "tensor") || !strings.Contains(err.Error(), "short read") {
		t.Fatalf("err %v, want a short read naming the file and tensor", err)
	}
}

func TestLoadObjectChanged(t *testing.T) {
	files, err := small.Model()
	if err != nil {
		t.Fatal(err)
	}
	var reads atomic.Int64
	var srv *pacedserver.Server
	name := "/model-00002-of-00003.safetensors"
	srv, err = pacedserver.Start(pacedserver.Config{OnRead: func(string, int64, int64) { reads.Add(1) }}, files)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	l, err := load.Open(context.Background(), srv.URL+"/model.safetensors.index.json", load.WithChunkSize(8<<10), load.WithConcurrency(1))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	// The shard is replaced (a new ETag) once the load is under way.
	f := files[name]
	f.ETag = `"replaced"`
	var once sync.Once
	_, err = l.Load(context.Background(), func(*load.Tensor) error {
		once.Do(func() { srv.Replace(name, f) })
		return nil
	})
	if !errors.Is(err, remote.ErrObjectChanged) {
		t.Fatalf("err %v, want ErrObjectChanged", err)
	}
}

func TestNewRejects(t *testing.T) {
	for _, o := range []load.Option{
		load.WithConcurrency(0), load.WithChunkSize(100), load.WithTensorParallel(2, 2),
		load.WithTensorParallel(0, 0), load.WithDestination(nil), load.WithSelect(nil), nil,
	} {
		if _, err := load.New(nil, o); !errors.Is(err, load.ErrOption) {
			t.Errorf("option: %v, want ErrOption", err)
		}
	}
	if _, err := load.New(nil, load.WithRules(load.Rule{Pattern: "x", Split: load.Rows})); !errors.Is(err, load.ErrOption) {
		t.Errorf("rules without tensor parallelism: %v", err)
	}
	var _ safetensors.Source = (*source.Model)(nil)
}

// TestLoadHub reads hf://org/model from a loopback server that answers as
// the Hub (HF_ENDPOINT), through the Hub reader load.Open configures.
func TestLoadHub(t *testing.T) {
	files, err := small.Model()
	if err != nil {
		t.Fatal(err)
	}
	srv, err := pacedserver.Start(pacedserver.Config{Repo: "org/model"}, files)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	t.Setenv("HF_ENDPOINT", srv.URL)
	t.Setenv("HF_TOKEN", "")
	t.Setenv("HF_HOME", t.TempDir())
	ref := reference(t, srv.URL+"/model.safetensors.index.json")
	l, err := load.Open(context.Background(), "hf://org/model", load.WithTensorParallel(1, 2), load.WithChunkSize(64<<10))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	got, st := collect(t, l)
	if len(got) != len(ref) || st.Requests == 0 {
		t.Fatalf("%d tensors, %d requests", len(got), st.Requests)
	}
	for _, g := range got {
		expectPart(t, ref, g)
	}
}

// TestLoadBucket reads a sharded model from a file:// bucket.
func TestLoadBucket(t *testing.T) {
	dir := writeModel(t, small)
	ref := reference(t, dir)
	l, err := load.Open(context.Background(), "file://"+filepath.ToSlash(dir)+"/model.safetensors.index.json", load.WithChunkSize(64<<10), load.WithConcurrency(4))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	got, st := collect(t, l)
	if len(got) != len(ref) || st.Requests == 0 || st.Requests > st.Chunks {
		t.Fatalf("%d tensors, stats %+v", len(got), st)
	}
	for _, g := range got {
		expectPart(t, ref, g)
	}
}

// TestLoadRetries: a server that answers the first request for every range
// with a 503 is read whole, each failed request retried by the reader.
func TestLoadRetries(t *testing.T) {
	files, err := small.Model()
	if err != nil {
		t.Fatal(err)
	}
	var seen sync.Map
	srv, err := pacedserver.Start(pacedserver.Config{Fault: func(r *http.Request) int {
		if rng := r.Header.Get("Range"); rng != "" {
			if _, again := seen.LoadOrStore(r.URL.Path+" "+rng, true); !again {
				return http.StatusServiceUnavailable
			}
		}
		return 0
	}}, files)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	u := srv.URL + "/model.safetensors.index.json"
	l, err := load.Open(context.Background(), u, load.WithChunkSize(256<<10),
		load.WithSourceOptions(source.WithRemote(remote.WithBackoff(time.Millisecond, 5*time.Millisecond))))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	got, st := collect(t, l)
	if st.Retries < st.Chunks || st.Requests < st.Chunks+st.Retries {
		t.Fatalf("stats %+v: want retries", st)
	}
	ref := map[string]*safetensors.Tensor{}
	for name, f := range files {
		if g, ok := f.Content.(*pacedserver.Generated); ok {
			r, err := safetensors.NewReader(g, g.Size, safetensors.WithName(name))
			if err != nil {
				t.Fatal(err)
			}
			for tt, err := range r.All() {
				if err != nil {
					t.Fatal(err)
				}
				b, _ := tt.Copy()
				ref[tt.Name] = safetensors.NewTensorBytes(tt.TensorInfo, b, name)
			}
		}
	}
	if len(got) != len(ref) {
		t.Fatalf("%d tensors, want %d", len(got), len(ref))
	}
	for _, g := range got {
		expectPart(t, ref, g)
	}
}

// TestLoadOtherSources: PyTorch checkpoints (strided views included) and
// compressed files load like safetensors files, byte for byte what the
// opener's tensors hold.
func TestLoadOtherSources(t *testing.T) {
	locs := []string{"../testdata/torch/tiny_transformer.bin", "../testdata/torch/shared_views.pt", "../testdata/torch/tiny_transformer_legacy.bin"}
	// A seekable zstd file of a small model, in frames of 64 KiB.
	dir := writeModel(t, pacedserver.ModelSpec{Hidden: 64, Intermediate: 128, Layers: 1, Vocab: 100, Shards: 1})
	zst := filepath.Join(t.TempDir(), "model.safetensors.zst")
	if _, err := compressed.CompressFile(context.Background(), filepath.Join(dir, "model.safetensors"), zst, compressed.WithFrameSize(64<<10)); err != nil {
		t.Fatal(err)
	}
	locs = append(locs, zst)
	for _, loc := range locs {
		ref := reference(t, loc)
		l, err := load.Open(context.Background(), loc, load.WithConcurrency(3), load.WithChunkSize(4<<10))
		if err != nil {
			t.Fatalf("%s: %v", loc, err)
		}
		got, _ := collect(t, l)
		l.Close()
		if len(got) != len(ref) || len(got) == 0 {
			t.Fatalf("%s: %d tensors, want %d", loc, len(got), len(ref))
		}
		for _, g := range got {
			expectPart(t, ref, g)
		}
	}
}

func TestLoadHTTPSingleFile(t *testing.T) {
	spec := small
	spec.Shards = 1
	_, u, _ := serve(t, spec, pacedserver.Config{})
	ref := reference(t, u)
	l, err := load.Open(context.Background(), u, load.WithChunkSize(128<<10), load.WithTensorParallel(0, 4))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	got, st := collect(t, l)
	if len(got) != len(ref) || st.Requests == 0 {
		t.Fatalf("%d tensors, stats %+v", len(got), st)
	}
	for _, g := range got {
		expectPart(t, ref, g)
	}
}
