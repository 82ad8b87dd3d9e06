package download

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gosafetensors/safetensors/internal/pacedserver"
	"github.com/gosafetensors/safetensors/load"
	"github.com/gosafetensors/safetensors/remote"
)

// The benchmarks compare, in one run, download with the limits it works
// against; run them on demand:
//
//	go test ./download -run '^$' -bench Paced -benchtime 1x
//	go test ./download -run '^$' -bench Loopback -benchtime 1x
//
// Throughputs are in MB/s (10^6 bytes); the ratios are what counts.

// benchSpec is a 1 GiB Llama-shaped model in 4 shards.
var benchSpec = pacedserver.ModelSpec{Hidden: 2048, Intermediate: 5632, Layers: 8, Vocab: 32000, Shards: 4}

const (
	benchRate    = 40e6 // bytes per second per connection
	benchLatency = 20 * time.Millisecond
	benchEnv     = "GOSAFETENSORS_DOWNLOAD_BENCH"
)

// benchHub serves benchSpec as a Hub repository.
func benchHub(b *testing.B, cfg pacedserver.Config) (*hubFixture, int64) {
	files, err := benchSpec.Model()
	if err != nil {
		b.Fatal(err)
	}
	h := startHub(b, files, cfg)
	var total int64
	for _, f := range files {
		total += f.Size
	}
	return h, total
}

// TestBenchHelper is the download process BenchmarkPacedHub measures (its
// time and peak RSS): it downloads from the endpoint in its environment
// and prints the result. It is not a test when run alone.
func TestBenchHelper(t *testing.T) {
	arg := os.Getenv(benchEnv)
	if arg == "" {
		t.Skip("helper process of BenchmarkPacedHub")
	}
	parts := strings.Split(arg, "|")
	n, _ := strconv.Atoi(parts[2])
	hub, err := remote.NewHub(append(remoteOptions(&config{concurrency: n}), remote.WithEndpoint(parts[0]), remote.WithToken(""), remote.WithOffline(false))...)
	if err != nil {
		t.Fatal(err)
	}
	opts := []Option{WithHub(hub), WithCacheDir(parts[1]), WithConcurrency(n)}
	if len(parts) > 3 && parts[3] == "nohash" {
		opts = append(opts, withoutHashing())
	}
	if p := os.Getenv("GOSAFETENSORS_BENCH_CPUPROFILE"); p != "" { // to see where the time goes
		f, err := os.Create(p)
		if err != nil {
			t.Fatal(err)
		}
		pprof.StartCPUProfile(f)
		defer pprof.StopCPUProfile()
	}
	res, err := Download(context.Background(), "hf://"+testRepo, opts...)
	if err != nil {
		t.Fatal(err)
	}
	json.NewEncoder(os.Stdout).Encode(map[string]any{"moved": res.Moved, "seconds": res.Duration.Seconds()})
}

// subprocessDownloadCPU runs TestBenchHelper and returns its MB/s (moved
// bytes over the download's own time), peak RSS in MB and CPU seconds
// (user and system) per GB moved.
func subprocessDownloadCPU(b *testing.B, url string, n int, mode string) (rate, rss, cpu float64) {
	cache := b.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestBenchHelper$", "-test.count=1")
	cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%s|%s|%d|%s", benchEnv, url, cache, n, mode))
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		b.Fatalf("download process: %v\n%s", err, out)
	}
	var res struct{ Moved, Seconds float64 }
	i := strings.IndexByte(string(out), '{')
	if i < 0 || json.NewDecoder(strings.NewReader(string(out[i:]))).Decode(&res) != nil {
		b.Fatalf("download process said %q", out)
	}
	ru := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	os.RemoveAll(cache)
	cpu = (time.Duration(ru.Utime.Nano()) + time.Duration(ru.Stime.Nano())).Seconds() / (res.Moved / 1e9)
	return res.Moved / res.Seconds / 1e6, float64(ru.Maxrss) * 1024 / 1e6, cpu
}

// BenchmarkPacedHub downloads the 1 GiB model from a Hub-shaped loopback
// server that caps each connection at 40 MB/s and delays each request by
// 20 ms, with 16 connections, in a process of its own (its peak RSS is
// measured). Its limits, in the same run: 16 × the cap, the machine's
// loopback (16 plain parallel GETs of the same bytes from an unpaced
// server, discarded) and what the paced link gives 16 such GETs.
func BenchmarkPacedHub(b *testing.B) {
	paced, total := benchHub(b, pacedserver.Config{Rate: benchRate, Latency: benchLatency})
	raw, _ := benchHub(b, pacedserver.Config{})
	var best struct{ loop, link, curl, dl, rss float64 }
	best.rss = 1e18
	curl, _ := exec.LookPath("curl")
	for b.Loop() {
		best.loop = max(best.loop, plainGETs(b, raw, 16, ""))
		best.link = max(best.link, plainGETs(b, paced, 16, ""))
		if curl != "" {
			best.curl = max(best.curl, curlGETs(b, curl, paced, 16))
		}
		rate, rss, cpu := subprocessDownloadCPU(b, paced.srv.URL, 16, "")
		best.dl = max(best.dl, rate)
		best.rss = min(best.rss, rss)
		b.Logf("download, 16 connections: %.0f MB/s, peak RSS %.0f MB, %.2f CPU s/GB", rate, rss, cpu)
	}
	capAll := 16 * benchRate / 1e6
	b.ReportMetric(capAll, "cap16_MB/s")
	b.ReportMetric(best.loop, "loopback16_MB/s")
	b.ReportMetric(best.link, "curl16_paced_MB/s")
	b.ReportMetric(best.dl, "download16_MB/s")
	b.ReportMetric(best.dl/min(capAll, best.loop), "download16/min(cap,loopback)")
	b.ReportMetric(best.dl/min(capAll, best.loop, best.link), "download16/min(cap,loopback,curl16_paced)")
	b.ReportMetric(best.rss, "peak_RSS_MB")
	if best.curl > 0 {
		b.ReportMetric(best.curl, "curl16_paced_disk_MB/s")
		b.ReportMetric(best.dl/best.curl, "download16/curl16_paced_disk")
	}
	b.SetBytes(total)
}

// plainGETs fetches every LFS file of h with n parallel plain range GETs
// (like n curl processes), about n requests in all, into dir ("" to
// discard), and returns MB/s.
func plainGETs(b *testing.B, h *hubFixture, n int, dir string) float64 {
	type job struct {
		name     string
		off, end int64
	}
	var jobs []job
	var total int64
	var big []string
	for _, p := range h.paths() {
		if h.files[p].Size >= pacedserver.LFSThreshold {
			big = append(big, p)
		}
	}
	parts := int64(max(1, n/len(big)))
	for _, p := range big {
		size := h.files[p].Size
		total += size
		per := (size + parts - 1) / parts
		for off := int64(0); off < size; off += per {
			jobs = append(jobs, job{p, off, min(off+per, size)})
		}
	}
	client := load.HTTPClient(n)
	ch := make(chan job)
	var wg sync.WaitGroup
	start := time.Now()
	for range n {
		wg.Go(func() {
			for j := range ch {
				req, _ := httpRange(h.srv.URL+"/"+testRepo+"/resolve/"+testCommit+j.name, j.off, j.end)
				resp, err := client.Do(req)
				if err != nil {
					b.Error(err)
					continue
				}
				var w interface{ Write([]byte) (int, error) } = discard{}
				var f *os.File
				if dir != "" {
					f, err = os.Create(filepath.Join(dir, fmt.Sprintf("%s.%d", filepath.Base(j.name), j.off)))
					if err != nil {
						b.Fatal(err)
					}
					w = f
				}
				if _, err := copyBody(w, resp); err != nil {
					b.Error(err)
				}
				resp.Body.Close()
				if f != nil {
					f.Close()
				}
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

// BenchmarkLoopbackHub downloads the 1 GiB model from an uncapped
// Hub-shaped loopback server, against 16 curl processes fetching the same
// files (a quarter of a shard each, to disk, one range request each) in
// the same run, and without hashing (a benchmark-only switch) to measure
// what verification costs.
func BenchmarkLoopbackHub(b *testing.B) {
	curl, err := exec.LookPath("curl")
	if err != nil {
		b.Skip("curl not found")
	}
	raw, total := benchHub(b, pacedserver.Config{})
	var best struct{ curl, dl, nohash, cpu, cpuNohash float64 }
	for b.Loop() {
		best.curl = max(best.curl, curlGETs(b, curl, raw, 16))
		rate, _, cpu := subprocessDownloadCPU(b, raw.srv.URL, 16, "")
		best.dl = max(best.dl, rate)
		best.cpu = cpu
		rate, _, cpu = subprocessDownloadCPU(b, raw.srv.URL, 16, "nohash")
		best.nohash = max(best.nohash, rate)
		best.cpuNohash = cpu
	}
	b.ReportMetric(best.curl, "curl16_MB/s")
	b.ReportMetric(best.dl, "download16_MB/s")
	b.ReportMetric(best.nohash, "download16_nohash_MB/s")
	b.ReportMetric(best.dl/best.curl, "download16/curl16")
	b.ReportMetric(best.nohash/best.dl-1, "hashing_extra_time")
	b.ReportMetric(best.cpu, "download_CPU_s/GB")
	b.ReportMetric(best.cpuNohash, "download_nohash_CPU_s/GB")
	b.SetBytes(total)
}

// curlGETs runs n curl processes, each fetching a range of a shard to a
// file of its own, and returns MB/s.
func curlGETs(b *testing.B, curl string, h *hubFixture, n int) float64 {
	dir := b.TempDir()
	defer os.RemoveAll(dir)
	var big []string
	var total int64
	for _, p := range h.paths() {
		if h.files[p].Size >= pacedserver.LFSThreshold {
			big = append(big, p)
			total += h.files[p].Size
		}
	}
	parts := int64(max(1, n/len(big)))
	var cmds []*exec.Cmd
	for _, p := range big {
		size := h.files[p].Size
		per := (size + parts - 1) / parts
		for off := int64(0); off < size; off += per {
			url := h.srv.URL + "/" + testRepo + "/resolve/" + testCommit + p
			out := filepath.Join(dir, fmt.Sprintf("%s.%d", filepath.Base(p), off))
			cmds = append(cmds, exec.Command(curl, "-sfL", "-r", fmt.Sprintf("%d-%d", off, min(off+per, size)-1), "-o", out, url))
		}
	}
	start := time.Now()
	for _, c := range cmds {
		if err := c.Start(); err != nil {
			b.Fatal(err)
		}
	}
	for _, c := range cmds {
		if err := c.Wait(); err != nil {
			b.Fatalf("curl: %v", err)
		}
	}
	return float64(total) / time.Since(start).Seconds() / 1e6
}
