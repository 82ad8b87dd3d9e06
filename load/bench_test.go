package load_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gosafetensors/safetensors/internal/pacedserver"
	"github.com/gosafetensors/safetensors/load"
)

// The benchmarks compare, in one run, the loader with the limit it works
// against; run them on demand:
//
//	go test ./load -run '^$' -bench Paced -benchtime 1x
//	go test ./load -run '^$' -bench Local -benchtime 1x
//
// They report throughputs in MB/s (10^6 bytes) and the ratios.

// pacedSpec is a 1 GiB Llama-shaped model in 4 shards.
var pacedSpec = pacedserver.ModelSpec{Hidden: 2048, Intermediate: 5632, Layers: 8, Vocab: 32000, Shards: 4}

const (
	pacedRate    = 40e6 // bytes per second per connection
	pacedLatency = 20 * time.Millisecond
)

// BenchmarkPacedHTTP loads the model from a loopback server that caps each
// connection at 40 MB/s and delays each request by 20 ms, with 16
// connections and with 1. Its limits, measured in the same run: the
// machine's loopback (16 plain parallel GETs, like 16 curls, of the same
// bytes from an unpaced server), and what the paced link gives 16 such
// GETs, one request each (the cap as this machine can serve it: on a busy
// machine, pacing 16 connections costs wake-ups the cap does not count).
func BenchmarkPacedHTTP(b *testing.B) {
	files, err := pacedSpec.Model()
	if err != nil {
		b.Fatal(err)
	}
	paced, err := pacedserver.Start(pacedserver.Config{Rate: pacedRate, Latency: pacedLatency}, files)
	if err != nil {
		b.Fatal(err)
	}
	defer paced.Close()
	raw, err := pacedserver.Start(pacedserver.Config{}, files)
	if err != nil {
		b.Fatal(err)
	}
	defer raw.Close()
	ctx := context.Background()
	var best struct{ loop, link, load16, load1 float64 }
	var total int64
	for b.Loop() {
		total = 0
		for name, f := range files {
			if strings.HasSuffix(name, ".safetensors") {
				total += f.Size
			}
		}
		best.loop = max(best.loop, loopback(b, raw.URL, files, 16))
		best.link = max(best.link, loopback(b, paced.URL, files, 16))

		l, err := load.Open(ctx, paced.URL+"/model.safetensors.index.json", load.WithConcurrency(16))
		if err != nil {
			b.Fatal(err)
		}
		st, err := l.Discard(ctx)
		l.Close()
		if err != nil {
			b.Fatal(err)
		}
		best.load16 = max(best.load16, st.Rate()/1e6)
		b.Logf("16 connections: %d bytes, %d chunks, %d requests in %v", st.Bytes, st.Chunks, st.Requests, st.Duration)

		// One connection: a few layers (about 100 MB) are enough to
		// see its rate.
		l, err = load.Open(ctx, paced.URL+"/model.safetensors.index.json", load.WithConcurrency(1), load.WithFilter("*.layers.3.*"))
		if err != nil {
			b.Fatal(err)
		}
		st, err = l.Discard(ctx)
		l.Close()
		if err != nil {
			b.Fatal(err)
		}
		best.load1 = max(best.load1, st.Rate()/1e6)
		b.Logf("1 connection: %d bytes, %d chunks in %v", st.Bytes, st.Chunks, st.Duration)
	}
	capAll := 16 * pacedRate / 1e6
	b.ReportMetric(capAll, "cap16_MB/s")
	b.ReportMetric(best.loop, "loopback16_MB/s")
	b.ReportMetric(best.link, "curl16_paced_MB/s")
	b.ReportMetric(best.load16, "load16_MB/s")
	b.ReportMetric(best.load16/min(capAll, best.loop), "load16/min(cap,loopback)")
	b.ReportMetric(best.load16/min(capAll, best.loop, best.link), "load16/min(cap,loopback,curl16_paced)")
	b.ReportMetric(best.load1, "load1_MB/s")
	b.ReportMetric(best.load1/(pacedRate/1e6), "load1/cap1")
	b.ReportMetric(best.load16/best.load1, "load16/load1")
	b.SetBytes(total)
}

// loopback fetches every shard with n parallel plain range GETs (like n
// curl processes), about n requests in all, and returns MB/s.
func loopback(b *testing.B, base string, files map[string]pacedserver.File, n int) float64 {
	type job struct {
		name     string
		off, end int64
	}
	var jobs []job
	var total int64
	shards := 0
	for name := range files {
		if strings.HasSuffix(name, ".safetensors") {
			shards++
		}
	}
	parts := int64(max(1, n/shards))
	for name, f := range files {
		if !strings.HasSuffix(name, ".safetensors") {
			continue
		}
		total += f.Size
		per := (f.Size + parts - 1) / parts
		for off := int64(0); off < f.Size; off += per {
			jobs = append(jobs, job{name, off, min(off+per, f.Size)})
		}
	}
	client := load.HTTPClient(n)
	ch := make(chan job)
	var wg sync.WaitGroup
	start := time.Now()
	for range n {
		wg.Go(func() {
			for j := range ch {
				req, _ := http.NewRequest("GET", base+j.name, nil)
				req.Header.Set("Range", fmt.Sprintf("bytes=%d-%d", j.off, j.end-1))
				resp, err := client.Do(req)
				if err != nil {
					b.Error(err)
					continue
				}
				if _, err := io.Copy(io.Discard, resp.Body); err != nil {
					b.Error(err)
				}
				resp.Body.Close()
			}
		})
	}
	for _, j := range jobs {
		ch <- j
	}
	close(ch)
	wg.Wait()
	return float64(total) / time.Since(start).Seconds() / 1e6
}
