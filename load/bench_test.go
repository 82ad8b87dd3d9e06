//go:build unix

package load_test

import (
	"context"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
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
	var total int64
	for name, f := range files {
		if strings.HasSuffix(name, ".safetensors") {
			total += f.Size
		}
	}
	gb := float64(total) / 1e9
	capAll := 16 * pacedRate / 1e6
	r := map[string][]float64{}
	add := func(name string, v float64) { r[name] = append(r[name], v) }
	for b.Loop() {
		add("load_average", loadAverage())
		c0 := selfCPU()
		loop := loopback(b, raw.URL, files, 16)
		c1 := selfCPU()
		link := loopback(b, paced.URL, files, 16)
		c2 := selfCPU()

		l, err := load.Open(ctx, paced.URL+"/model.safetensors.index.json", load.WithConcurrency(16))
		if err != nil {
			b.Fatal(err)
		}
		st, err := l.Discard(ctx)
		l.Close()
		if err != nil {
			b.Fatal(err)
		}
		c3 := selfCPU()
		load16 := st.Rate() / 1e6
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
		load1 := st.Rate() / 1e6
		add("loopback16_MB/s", loop)
		add("curl16_paced_MB/s", link)
		add("load16_MB/s", load16)
		add("load16/min(cap,loopback)", load16/min(capAll, loop))
		add("load16/min(cap,loopback,curl16_paced)", load16/min(capAll, loop, link))
		add("load1/cap1", load1/(pacedRate/1e6))
		add("load16/load1", load16/load1)
		// CPU of this process (server and client) per GB: the loader
		// against the plain GETs on the same paced link.
		add("load16+server_CPU_s/GB", (c3-c2).Seconds()/gb)
		add("curl16_paced+server_CPU_s/GB", (c2-c1).Seconds()/gb)
		add("loopback16+server_CPU_s/GB", (c1-c0).Seconds()/gb)
		b.Logf("round: load16 %.0f MB/s (%.2f CPU s/GB with the server), 16 plain GETs on the paced link %.0f (%.2f), loopback %.0f (%.2f), load1 %.1f",
			load16, (c3-c2).Seconds()/gb, link, (c2-c1).Seconds()/gb, loop, (c1-c0).Seconds()/gb, load1)
	}
	b.ReportMetric(capAll, "cap16_MB/s")
	for _, name := range slices.Sorted(maps.Keys(r)) {
		b.ReportMetric(median(r[name]), name)
		b.Logf("%-40s median %8.3f  rounds %.3g", name, median(r[name]), r[name])
	}
	b.SetBytes(total)
}

// selfCPU is this process's user and system CPU time so far.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// loadAverage is the 1-minute load average, for the record.
func loadAverage() float64 {
	b, _ := os.ReadFile("/proc/loadavg")
	f, _ := strconv.ParseFloat(strings.Fields(string(b) + " 0")[0], 64)
	return f
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

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/2]
}
