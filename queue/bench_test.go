package queue_test

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/gosafetensors/safetensors/audit"
	"github.com/gosafetensors/safetensors/queue"
	"github.com/gosafetensors/safetensors/remote/blobstore"
	"github.com/gosafetensors/safetensors/source"
)

// BenchmarkPool measures what a pool of workers audits per second when
// the store answers each GET after a latency (20 ms, an object store's
// time to first byte), against the limit: the same objects audited
// directly, three at a time, with no queue, no result lookup and no result
// written. Each worker audits one object at a time (WithConcurrency(1)),
// so "workers=3" is three workers sharing one consumer. Results go to a
// local directory (each write synced twice: file and directory) or to the
// S3 store (a lookup is a GET, so it pays the latency too).
//
//	go test -run '^$' -bench Pool -benchtime 300x ./queue/
func BenchmarkPool(b *testing.B) {
	fx := fixtures(b)
	s := newStore(b, "uploads")
	s.delay.Store(int64(20 * time.Millisecond))
	const objects = 100
	type obj struct{ key, etag string }
	var objs []obj
	for i := range objects {
		f := fx[i%len(fx)]
		key := fmt.Sprintf("in/%03d-%s.bin", i, f.kind)
		objs = append(objs, obj{key, s.put(b, "uploads", key, f.data)})
	}
	size := func(i int) int { return len(fx[i%len(fx)].data) }
	for _, c := range []struct {
		results string
		workers int
	}{{"file", 1}, {"file", 3}, {"s3", 1}, {"s3", 3}} {
		workers := c.workers
		b.Run(fmt.Sprintf("results=%s/workers=%d", c.results, c.workers), func(b *testing.B) {
			srv := startNATS(b)
			_, js := connect(b, srv)
			ensureStream(b, js, queue.DefaultSubject)
			for i := range b.N {
				o := objs[i%objects]
				// a new sequencer each time: an audit of its own, not a result reused
				publish(b, js, queue.DefaultSubject, s3Event("uploads", o.key, o.etag, size(i%objects), i))
			}
			results := "file://" + filepath.ToSlash(b.TempDir())
			if c.results == "s3" {
				bucket := fmt.Sprintf("results%d", time.Now().UnixNano())
				if err := s.Backend.CreateBucket(bucket); err != nil {
					b.Fatal(err)
				}
				results = "s3://" + bucket + "/?" + s.Query()
			}
			b.ResetTimer()
			ctx, cancel := context.WithCancel(context.Background())
			var ws []*queue.Worker
			var wg sync.WaitGroup
			for range workers {
				nc, _ := connect(b, srv)
				w, err := queue.New(nc, queue.WithResults(results), queue.WithEventLocation(s.location()),
					queue.WithConcurrency(1), queue.WithPollWait(50*time.Millisecond), queue.WithLogger(quiet))
				if err != nil {
					b.Fatal(err)
				}
				ws = append(ws, w)
				wg.Add(1)
				go func() { defer wg.Done(); w.Run(ctx) }()
			}
			waitFor(b, 10*time.Minute, "the audits", func() bool {
				n := int64(0)
				for _, w := range ws {
					n += w.Stats().Results // durable: each audit's result written
				}
				return n >= int64(b.N)
			})
			b.StopTimer()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "objects/s")
			cancel()
			wg.Wait()
			for _, w := range ws {
				w.Close()
			}
		})
	}
	b.Run("direct=3", func(b *testing.B) {
		pool, err := blobstore.NewPool()
		if err != nil {
			b.Fatal(err)
		}
		defer pool.Close()
		next := make(chan int)
		var wg sync.WaitGroup
		for range 3 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range next {
					o := objs[i%objects]
					loc := blobstore.JoinURL("s3://uploads/?"+s.Query(), o.key)
					bo, err := pool.OpenVersion(context.Background(), loc, `"`+o.etag+`"`)
					if err != nil {
						b.Error(err)
						continue
					}
					so, err := source.NewObject(bo.Name(), bo, bo.Size(), bo, nil)
					if err != nil {
						b.Error(err)
						continue
					}
					if r := audit.ScanObject(context.Background(), loc, so); r.Verdict == audit.Error {
						b.Error(r.Error)
					}
					so.Close()
				}
			}()
		}
		for i := range b.N {
			next <- i
		}
		close(next)
		wg.Wait()
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "objects/s")
	})
}
