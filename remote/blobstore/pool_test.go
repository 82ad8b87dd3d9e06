package blobstore

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/gosafetensors/safetensors/remote/blobstore/internal/driver"
)

// countingBucket is a driver that makes up a listing of n objects, page by
// page, and counts opens and requests.
type countingBucket struct {
	n      int
	pages  *atomic.Int64
	closed *atomic.Int64
}

var synth struct {
	opens, pages, closed atomic.Int64
}

func init() {
	driver.Register("synth", func(_ context.Context, u *url.URL, _ driver.Config) (driver.Bucket, error) {
		synth.opens.Add(1)
		n, err := strconv.Atoi(u.Host)
		if err != nil {
			return nil, err
		}
		return &countingBucket{n: n, pages: &synth.pages, closed: &synth.closed}, nil
	})
}

func (b *countingBucket) key(i int) string { return fmt.Sprintf("models/%08d.safetensors", i) }

func (b *countingBucket) NewRangeReader(_ context.Context, key string, off, n int64, _ string) (*driver.Reader, error) {
	data := []byte(key)
	if n < 0 || off+n > int64(len(data)) {
		n = int64(len(data)) - off
	}
	return &driver.Reader{Body: io.NopCloser(bytes.NewReader(data[off : off+n])), Size: int64(len(data))}, nil
}

func (b *countingBucket) ListPage(_ context.Context, prefix, token string, pageSize int) (driver.Page, error) {
	b.pages.Add(1)
	start := 0
	if token != "" {
		start, _ = strconv.Atoi(token)
	}
	var p driver.Page
	for i := start; i < b.n && len(p.Objects) < pageSize; i++ {
		p.Objects = append(p.Objects, driver.Object{Key: b.key(i), Size: int64(len(b.key(i)))})
	}
	if end := start + len(p.Objects); end < b.n {
		p.Next = strconv.Itoa(end)
	}
	return p, nil
}

func (b *countingBucket) Close() error { b.closed.Add(1); return nil }

func heapAfterGC() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// TestStreamedListingBoundedMemory: a 100,000-object listing streamed by
// Objects holds no more than a couple of pages: the live heap measured
// after 10,000 objects and after 90,000 differs by less than what 10,000
// retained ObjectInfo would take (each holds a URL and a key, ~100 bytes).
func TestStreamedListingBoundedMemory(t *testing.T) {
	const n = 100_000
	pool, err := NewPool()
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	opens, pages := synth.opens.Load(), synth.pages.Load()
	var at10k, at90k uint64
	count := 0
	for o, err := range pool.Objects(context.Background(), "synth://100000/models/") {
		if err != nil {
			t.Fatal(err)
		}
		if want := fmt.Sprintf("models/%08d.safetensors", count); o.Key != want {
			t.Fatalf("object %d is %q, want %q", count, o.Key, want)
		}
		count++
		switch count {
		case 10_000:
			at10k = heapAfterGC()
		case 90_000:
			at90k = heapAfterGC()
		}
	}
	if count != n {
		t.Fatalf("%d objects listed, want %d", count, n)
	}
	if p := synth.pages.Load() - pages; p != n/pageSize {
		t.Errorf("%d list requests, want %d", p, n/pageSize)
	}
	if o := synth.opens.Load() - opens; o != 1 {
		t.Errorf("%d bucket clients opened, want 1", o)
	}
	grew := int64(at90k) - int64(at10k)
	t.Logf("live heap after 10k objects %d B, after 90k %d B", at10k, at90k)
	if grew > 1<<20 {
		t.Errorf("live heap grew %d bytes over 80,000 objects: the listing is retained", grew)
	}
}

// TestPoolOneClientPerBucket: objects and listings of one bucket share one
// client, closed once with the pool; another bucket gets its own.
func TestPoolOneClientPerBucket(t *testing.T) {
	opens, closed := synth.opens.Load(), synth.closed.Load()
	pool, err := NewPool(WithPrefetch(4))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var wg sync.WaitGroup
	var failed atomic.Int64
	for i := range 200 {
		wg.Go(func() {
			o, err := Open(ctx, fmt.Sprintf("synth://500/models/%08d.safetensors", i), WithPool(pool))
			if err != nil {
				failed.Add(1)
				return
			}
			o.Close()
		})
	}
	wg.Wait()
	for range pool.Objects(ctx, "synth://500/models/") {
	}
	for range pool.Objects(ctx, "synth://7/models/") {
	}
	if failed.Load() != 0 {
		t.Fatalf("%d opens failed", failed.Load())
	}
	if o := synth.opens.Load() - opens; o != 2 {
		t.Errorf("%d clients opened for 2 buckets", o)
	}
	if c := synth.closed.Load() - closed; c != 0 {
		t.Errorf("%d clients closed before the pool", c)
	}
	pool.Close()
	if c := synth.closed.Load() - closed; c != 2 {
		t.Errorf("%d clients closed with the pool, want 2", c)
	}
	if _, err := pool.Open(ctx, "synth://500/models/00000001.safetensors"); err == nil {
		t.Error("a closed pool opened an object")
	}
}

// TestManyObjectsFewFiles audits 3,000 tiny objects on gofakes3 through
// the real AWS SDK in a child process limited to 256 open files (client
// and server share the limit): one client, bounded and reused connections,
// no failure. The child reports its time and peak RSS.
func TestManyObjectsFewFiles(t *testing.T) {
	if os.Getenv("BLOBSTORE_CHILD") == "many" {
		manyObjectsChild(t)
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestManyObjectsFewFiles$", "-test.v")
	cmd.Env = append(os.Environ(), "BLOBSTORE_CHILD=many")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "audited 3000 objects") {
		t.Fatalf("child: %v\n%s", err, out)
	}
	for _, l := range strings.Split(string(out), "\n") {
		if strings.Contains(l, "audited") {
			t.Log(strings.TrimSpace(l))
		}
	}
}

func manyObjectsChild(t *testing.T) {
	lim := syscall.Rlimit{Cur: 256, Max: 256}
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	const n, workers = 3000, 16
	s3 := newFakeS3(t)
	for i := range n {
		s3.put(t, fmt.Sprintf("up/%05d.bin", i), []byte(fmt.Sprintf("object %05d, 128 bytes%0103d", i, 0)))
	}
	start := time.Now()
	ctx := context.Background()
	pool, err := NewPool(WithMaxConns(32))
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	keys := make(chan ObjectInfo)
	var failed, done atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for info := range keys {
				o, err := pool.Open(ctx, info.URL)
				if err != nil {
					if failed.Add(1) < 5 {
						t.Errorf("%s: %v", info.Key, err)
					}
					continue
				}
				b := make([]byte, o.Size())
				if _, err := o.ReadAt(b, 0); err != nil || !bytes.HasPrefix(b, []byte("object "+info.Key[3:8])) {
					failed.Add(1)
					t.Errorf("%s: %q %v", info.Key, b, err)
				}
				o.Close()
				done.Add(1)
			}
		})
	}
	for info, err := range pool.Objects(ctx, s3.url("up/")) {
		if err != nil {
			t.Fatal(err)
		}
		keys <- info
	}
	close(keys)
	wg.Wait()
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	if failed.Load() != 0 || done.Load() != n {
		t.Fatalf("%d of %d objects failed, %d done", failed.Load(), n, done.Load())
	}
	fmt.Printf("audited %d objects under ulimit -n 256 in %v, peak RSS %d MB (client and gofakes3 server in one process)\n", done.Load(), time.Since(start).Round(time.Millisecond), ru.Maxrss/1024)
}
