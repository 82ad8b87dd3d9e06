package download

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"runtime/trace"
	"slices"
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
	// Suffixes of a mode (BenchmarkLoopbackModes' experiments): +bufK a
	// stream buffer of K KiB, +chunkM chunks of M MiB (WithChunkSize),
	// +procsN GOMAXPROCS N, +buffered no O_DIRECT.
	if len(parts) > 3 {
		mode, sfx, _ := strings.Cut(parts[3], "+")
		for sfx != "" {
			var x string
			x, sfx, _ = strings.Cut(sfx, "+")
			if k, err := strconv.Atoi(strings.TrimPrefix(x, "buf")); err == nil && strings.HasPrefix(x, "buf") {
				opts = append(opts, func(c *config) error { c.streamBuf = k << 10; return nil })
			} else if k, err := strconv.Atoi(strings.TrimPrefix(x, "chunk")); err == nil && strings.HasPrefix(x, "chunk") {
				opts = append(opts, WithChunkSize(int64(k)<<20))
			} else if x == "buffered" {
				opts = append(opts, func(c *config) error { c.noDirect = true; return nil })
			} else if k, err := strconv.Atoi(strings.TrimPrefix(x, "procs")); err == nil && strings.HasPrefix(x, "procs") {
				runtime.GOMAXPROCS(k)
			} else {
				t.Fatalf("unknown mode suffix %q", x)
			}
		}
		parts[3] = mode
	}
	if len(parts) > 3 && parts[3] == "nohash" {
		opts = append(opts, withoutHashing())
	}
	if len(parts) > 3 && parts[3] == "earlydirect" {
		opts = append(opts, withEarlyDirect())
	}
	if len(parts) > 3 && parts[3] == "nosync" {
		opts = append(opts, withoutSync())
	}
	if p := os.Getenv("GOSAFETENSORS_BENCH_CPUPROFILE"); p != "" { // to see where the time goes
		if len(parts) > 3 && parts[3] != "" {
			p += "." + parts[3] // one profile per mode: p, p.nohash, p.nosync, p.tmpfs
		}
		f, err := os.Create(p)
		if err != nil {
			t.Fatal(err)
		}
		pprof.StartCPUProfile(f)
		defer pprof.StopCPUProfile()
	}
	if p := os.Getenv("GOSAFETENSORS_BENCH_TRACE"); p != "" { // runtime/trace of the download
		if len(parts) > 3 && parts[3] != "" {
			p += "." + parts[3]
		}
		f, err := os.Create(p)
		if err != nil {
			t.Fatal(err)
		}
		trace.Start(f)
		defer trace.Stop()
	}
	// The head: from the start to the first byte written (the listing,
	// the opens, the first requests); the tail: from the last byte
	// written to the end (the last hashes, syncs and renames).
	var lastMu sync.Mutex
	var first, last time.Time
	start := time.Now()
	opts = append(opts, WithProgress(func(p Progress) {
		lastMu.Lock()
		last = time.Now()
		if first.IsZero() && p.Moved > 0 {
			first = last
		}
		lastMu.Unlock()
	}))
	res, err := Download(context.Background(), "hf://"+testRepo, opts...)
	if err != nil {
		t.Fatal(err)
	}
	lastMu.Lock()
	tail, head := time.Since(last), first.Sub(start)
	lastMu.Unlock()
	json.NewEncoder(os.Stdout).Encode(map[string]any{"moved": res.Moved, "seconds": res.Duration.Seconds(), "readback": res.readBack, "tail": tail.Seconds(), "head": head.Seconds(), "requests": res.Requests})
}

// dlRun is what one measured download process did.
type dlRun struct {
	rate   float64 // MB/s: bytes moved over the download's own time
	rss    float64 // peak RSS, MB
	cpu    float64 // user+system CPU seconds per GB moved, of the download process
	server float64 // CPU seconds per GB of this process meanwhile: the server
	early  float64 // fraction of the bytes hashed by reading them back
	idle   float64 // idle CPU seconds of the machine per GB (/proc/stat)
	tail   float64 // fraction of the time after the last byte was written
	head   float64 // fraction of the time before the first byte was written
	reqs   float64 // HTTP requests made (Result.Requests)
}

// subprocessDownload runs TestBenchHelper (mode "", "nohash", "nosync",
// or "tmpfs": into a cache on /dev/shm) and measures it with getrusage: its own CPU from its
// ProcessState, the server's from this process's usage meanwhile (the
// benchmark process does nothing else while it waits).
func subprocessDownload(b *testing.B, url string, n int, mode string) dlRun {
	cache := b.TempDir()
	if mode == "tmpfs" { // the same download into memory: what it does when writing costs nothing
		dir, err := os.MkdirTemp("/dev/shm", "download-bench")
		if err != nil {
			b.Skipf("no tmpfs at /dev/shm: %v", err)
		}
		cache = dir
	}
	defer os.RemoveAll(cache)
	bin := os.Args[0]
	if rest, ok := strings.CutPrefix(mode, "old"); ok { // another build's download: GOSAFETENSORS_BENCH_OLD, a test binary (go test -c)
		if bin = os.Getenv("GOSAFETENSORS_BENCH_OLD"); bin == "" {
			b.Fatal("mode old: set GOSAFETENSORS_BENCH_OLD to a test binary of package download")
		}
		mode = rest
	}
	cmd := exec.Command(bin, "-test.run=^TestBenchHelper$", "-test.count=1")
	cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%s|%s|%d|%s", benchEnv, url, cache, n, mode))
	cmd.Stderr = os.Stderr
	settle()
	self0, idle0 := selfCPU(), idleCPU()
	out, err := cmd.Output()
	server, idle := selfCPU()-self0, idleCPU()-idle0
	if err != nil {
		b.Fatalf("download process: %v\n%s", err, out)
	}
	var res struct{ Moved, Seconds, Readback, Tail, Head, Requests float64 }
	i := strings.IndexByte(string(out), '{')
	if i < 0 || json.NewDecoder(strings.NewReader(string(out[i:]))).Decode(&res) != nil {
		b.Fatalf("download process said %q", out)
	}
	ru := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	gb := res.Moved / 1e9
	return dlRun{
		rate:   res.Moved / res.Seconds / 1e6,
		rss:    float64(ru.Maxrss) * 1024 / 1e6,
		cpu:    processCPU(cmd.ProcessState).Seconds() / gb,
		server: server.Seconds() / gb,
		early:  res.Readback / res.Moved,
		tail:   res.Tail / res.Seconds,
		head:   res.Head / res.Seconds,
		reqs:   res.Requests,
		idle:   idle.Seconds() / gb,
	}
}

// settle writes back every dirty page of the system (sync(2)) before a
// measurement: the bytes the previous one left dirty (curl's files,
// deleted or not) would otherwise be written back during the next one,
// and charged to it. Measured: without it, whichever download ran right
// after the curls took 1.5-2 CPU seconds per GB more than the other.
func settle() { syscall.Sync() }

// idleCPU is the machine's idle time so far, all CPUs (idle and iowait
// in /proc/stat, in USER_HZ = 100 ticks per second); 0 where unknown.
func idleCPU() time.Duration {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 6 || f[0] != "cpu" {
		return 0
	}
	idle, _ := strconv.ParseInt(f[4], 10, 64)
	iowait, _ := strconv.ParseInt(f[5], 10, 64)
	return time.Duration(idle+iowait) * 10 * time.Millisecond
}

// processCPU is a finished process's user and system CPU time.
func processCPU(ps *os.ProcessState) time.Duration { return ps.UserTime() + ps.SystemTime() }

// selfCPU is this process's user and system CPU time so far.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// rounds collects one value per round of a benchmark and reports medians.
type rounds map[string][]float64

func (r rounds) add(name string, v float64) { r[name] = append(r[name], v) }

func (r rounds) median(name string) float64 {
	v := slices.Clone(r[name])
	if len(v) == 0 {
		return 0
	}
	slices.Sort(v)
	return v[len(v)/2]
}

// report reports the median of every series as a metric, and logs the
// rounds' values.
func (r rounds) report(b *testing.B) {
	for _, name := range slices.Sorted(maps.Keys(r)) {
		b.ReportMetric(r.median(name), name)
		b.Logf("%-44s median %8.3f  rounds %.3g", name, r.median(name), r[name])
	}
}

// loadAverage is the 1-minute load average, for the record.
func loadAverage() float64 {
	b, _ := os.ReadFile("/proc/loadavg")
	f, _ := strconv.ParseFloat(strings.Fields(string(b) + " 0")[0], 64)
	return f
}

// BenchmarkPacedHub downloads the 1 GiB model from a Hub-shaped loopback
// server that caps each connection at 40 MB/s and delays each request by
// 20 ms, with 16 connections, in a process of its own (its peak RSS and
// CPU are measured). Its limits, in the same rounds: 16 × the cap; the
// machine's loopback (16 plain parallel GETs of the same bytes from an
// unpaced server, discarded); 16 such GETs on the paced link; 16 curl
// processes on the paced link writing to disk (their CPU summed); the
// disk's durable write rate (dd of as many bytes with conv=fdatasync:
// a download is complete when its files are synced); the download
// without fdatasync, and into a cache on tmpfs (/dev/shm), to tell the
// disk's share from the network's. The
// medians over rounds are reported (-benchtime 3x for three rounds).
func BenchmarkPacedHub(b *testing.B) {
	paced, total := benchHub(b, pacedserver.Config{Rate: benchRate, Latency: benchLatency})
	raw, _ := benchHub(b, pacedserver.Config{})
	curl, _ := exec.LookPath("curl")
	r := rounds{}
	capAll := 16 * benchRate / 1e6
	round := 0
	for b.Loop() {
		r.add("load_average", loadAverage())
		loop := plainGETs(b, raw, 16, "")
		link := plainGETs(b, paced, 16, "")
		disk, diskCPU := ddSync(b, total)
		var dl, ed dlRun
		if round%2 == 0 {
			dl = subprocessDownload(b, paced.srv.URL, 16, "")
			ed = subprocessDownload(b, paced.srv.URL, 16, "earlydirect")
		} else {
			ed = subprocessDownload(b, paced.srv.URL, 16, "earlydirect")
			dl = subprocessDownload(b, paced.srv.URL, 16, "")
		}
		round++
		r.add("download16_earlydirect/min(cap,loopback)", ed.rate/min(capAll, loop))
		r.add("download16_earlydirect_CPU_s/GB", ed.cpu)
		r.add("peak_RSS_MB_earlydirect", ed.rss)
		nosync := subprocessDownload(b, paced.srv.URL, 16, "nosync")
		mem := subprocessDownload(b, paced.srv.URL, 16, "tmpfs")
		limit := min(capAll, loop)
		r.add("loopback16_MB/s", loop)
		r.add("curl16_paced_MB/s", link)
		r.add("disk_fdatasync_MB/s", disk)
		r.add("disk_fdatasync_CPU_s/GB", diskCPU)
		r.add("download16_MB/s", dl.rate)
		r.add("download16/min(cap,loopback)", dl.rate/limit)
		r.add("download16/min(cap,loopback,disk)", dl.rate/min(limit, disk))
		r.add("download16/curl16_paced", dl.rate/link)
		r.add("download16_CPU_s/GB", dl.cpu)
		r.add("server_CPU_s/GB", dl.server)
		r.add("peak_RSS_MB", dl.rss)
		r.add("download16_read_back_to_hash", dl.early)
		r.add("download16_nosync/min(cap,loopback)", nosync.rate/limit)
		r.add("download16_nosync_CPU_s/GB", nosync.cpu)
		r.add("download16_tmpfs/min(cap,loopback)", mem.rate/limit)
		r.add("download16_tmpfs_CPU_s/GB", mem.cpu)
		if curl != "" {
			c := curlGETs(b, curl, paced, 16, false)
			r.add("curl16_paced_disk_MB/s", c.rate)
			r.add("curl16_paced_disk_CPU_s/GB", c.cpu)
			r.add("download16/curl16_paced_disk", dl.rate/c.rate)
		}
		b.Logf("round: early bytes written with O_DIRECT and read back from the disk: %.0f MB/s (%.2f CPU s/GB)", ed.rate, ed.cpu)
		b.Logf("round: download %.0f MB/s (%.2f CPU s/GB, server %.2f, RSS %.0f MB), nosync %.0f, tmpfs %.0f (%.2f CPU s/GB), cap %.0f, loopback %.0f, paced GETs %.0f, disk %.0f",
			dl.rate, dl.cpu, dl.server, dl.rss, nosync.rate, mem.rate, mem.cpu, capAll, loop, link, disk)
	}
	b.ReportMetric(capAll, "cap16_MB/s")
	r.report(b)
	b.SetBytes(total)
}

// ddSync writes n bytes to a new file with dd bs=8M conv=fdatasync and
// returns MB/s and dd's CPU seconds per GB: the disk's durable write rate.
func ddSync(b *testing.B, n int64) (rate, cpu float64) {
	dir := b.TempDir()
	defer os.RemoveAll(dir)
	const bs = 8 << 20
	cmd := exec.Command("dd", "if=/dev/zero", "of="+filepath.Join(dir, "dd"), fmt.Sprintf("bs=%d", bs), fmt.Sprintf("count=%d", (n+bs-1)/bs), "conv=fdatasync", "status=none")
	settle()
	start := time.Now()
	if out, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("dd: %v: %s", err, out)
	}
	gb := float64(n) / 1e9
	return gb * 1e3 / time.Since(start).Seconds(), processCPU(cmd.ProcessState).Seconds() / gb
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
	client.CloseIdleConnections()
	return float64(total) / time.Since(start).Seconds() / 1e6
}

// BenchmarkLoopbackHub downloads the 1 GiB model from an uncapped
// Hub-shaped loopback server, against 16 curl processes fetching the same
// files (a quarter of a shard each, to disk, one range request each) in
// the same rounds, and without hashing (a benchmark-only switch) to
// measure what verification costs in wall time and in CPU. The hashes'
// own rates are measured too: sha256sum over curl's files, and Go's
// crypto/sha256 (what download uses) over a buffer in memory.
func BenchmarkLoopbackHub(b *testing.B) {
	curl, err := exec.LookPath("curl")
	if err != nil {
		b.Skip("curl not found")
	}
	raw, total := benchHub(b, pacedserver.Config{})
	r := rounds{}
	round := 0
	for b.Loop() {
		r.add("load_average", loadAverage())
		c := curlGETs(b, curl, raw, 16, true)
		var dl, nohash, ed dlRun
		modes := []string{"", "nohash", "earlydirect"}
		for k := range modes {
			switch m := modes[(k+round)%len(modes)]; m { // each first in turn
			case "":
				dl = subprocessDownload(b, raw.srv.URL, 16, m)
			case "nohash":
				nohash = subprocessDownload(b, raw.srv.URL, 16, m)
			default:
				ed = subprocessDownload(b, raw.srv.URL, 16, m)
			}
		}
		round++
		r.add("download16_read_back_to_hash", dl.early)
		r.add("peak_RSS_MB", dl.rss)
		r.add("download16_earlydirect/curl16", ed.rate/c.rate)
		r.add("download16_earlydirect_CPU_s/GB", ed.cpu)
		r.add("hashing_extra_time_earlydirect", nohash.rate/ed.rate-1)
		goHash := goSHA256CPU()
		r.add("curl16_MB/s", c.rate)
		r.add("curl16_then_fdatasync_MB/s", c.durable)
		r.add("download16/curl16_then_fdatasync", dl.rate/c.durable)
		r.add("download16_earlydirect/curl16_then_fdatasync", ed.rate/c.durable)
		r.add("curl16_CPU_s/GB", c.cpu)
		r.add("sha256sum_CPU_s/GB", c.sha256sum)
		r.add("go_sha256_CPU_s/GB", goHash)
		r.add("download16_MB/s", dl.rate)
		r.add("download16/curl16", dl.rate/c.rate)
		r.add("download16_CPU_s/GB", dl.cpu)
		r.add("server_CPU_s/GB", dl.server)
		r.add("download16_nohash_MB/s", nohash.rate)
		r.add("download16_nohash_CPU_s/GB", nohash.cpu)
		r.add("hashing_extra_time", nohash.rate/dl.rate-1)
		r.add("hashing_extra_CPU_s/GB", dl.cpu-nohash.cpu)
		// What verification must add to the wall time: the hash's CPU
		// (Go's rate) beyond what the machine left idle during the
		// hashless run, at the rate the hashless run got CPU (its client
		// and server CPU over its wall time); and the same on an
		// otherwise idle 2-core machine (idle = 2 cores × wall − used).
		wall := 1e3 / nohash.rate // seconds per GB
		used := nohash.cpu + nohash.server
		r.add("hashing_extra_time_bound", max(0, goHash-nohash.idle)/used)
		r.add("hashing_extra_time_bound_idle_2cores", max(0, goHash-max(0, 2*wall-used))/2/wall)
		r.add("machine_idle_CPU_s/GB_nohash", nohash.idle)
		b.Logf("round: early bytes written with O_DIRECT and read back from the disk: %.0f MB/s (%.2f CPU s/GB)", ed.rate, ed.cpu)
		b.Logf("round: download %.0f MB/s (%.2f CPU s/GB, server %.2f), nohash %.0f (%.2f, server %.2f), curl %.0f (%.2f; %.0f with its files synced), sha256sum %.2f s/GB, Go sha256 %.2f s/GB, load %.1f",
			dl.rate, dl.cpu, dl.server, nohash.rate, nohash.cpu, nohash.server, c.rate, c.cpu, c.durable, c.sha256sum, goHash, loadAverage())
	}
	r.report(b)
	b.SetBytes(total)
}

// goSHA256CPU hashes 256 MiB with crypto/sha256 (SHA-NI or AVX2 where the
// CPU has them, as download uses it) on one goroutine and returns CPU
// seconds per GB.
func goSHA256CPU() float64 {
	buf := make([]byte, 1<<20)
	for i := range buf {
		buf[i] = byte(i * 7)
	}
	h := sha256.New()
	c0 := selfCPU()
	for range 256 {
		h.Write(buf)
	}
	return (selfCPU() - c0).Seconds() / (256 << 20 / 1e9)
}

// curlRun is what the curl baseline did.
type curlRun struct {
	rate      float64 // MB/s
	durable   float64 // MB/s until the files are also synced (fdatasync each), as a download's are
	cpu       float64 // CPU seconds per GB, all curl processes
	sha256sum float64 // CPU seconds per GB of sha256sum over the files
}

// curlGETs runs n curl processes, each fetching a range of a shard to a
// file of its own, and returns MB/s and their CPU per GB; with hash, also
// sha256sum's CPU per GB over the files they wrote.
func curlGETs(b *testing.B, curl string, h *hubFixture, n int, hash bool) curlRun {
	dir := b.TempDir()
	defer os.RemoveAll(dir)
	var big, outs []string
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
			outs = append(outs, out)
			cmds = append(cmds, exec.Command(curl, "-sfL", "-r", fmt.Sprintf("%d-%d", off, min(off+per, size)-1), "-o", out, url))
		}
	}
	settle()
	start := time.Now()
	for _, c := range cmds {
		if err := c.Start(); err != nil {
			b.Fatal(err)
		}
	}
	var cpu time.Duration
	for _, c := range cmds {
		if err := c.Wait(); err != nil {
			b.Fatalf("curl: %v", err)
		}
		cpu += processCPU(c.ProcessState)
	}
	gb := float64(total) / 1e9
	res := curlRun{rate: gb * 1e3 / time.Since(start).Seconds(), cpu: cpu.Seconds() / gb}
	// curl leaves its bytes in the page cache (a GiB is far below the
	// dirty limits); a download is done when its files are durable.
	for _, out := range outs {
		f, err := os.OpenFile(out, os.O_RDWR, 0)
		if err != nil {
			b.Fatal(err)
		}
		if err := datasync(f); err != nil {
			b.Fatal(err)
		}
		f.Close()
	}
	res.durable = gb * 1e3 / time.Since(start).Seconds()
	if hash {
		if sum, err := exec.LookPath("sha256sum"); err == nil {
			cmd := exec.Command(sum, outs...)
			if out, err := cmd.CombinedOutput(); err != nil {
				b.Fatalf("sha256sum: %v: %s", err, out)
			}
			res.sha256sum = processCPU(cmd.ProcessState).Seconds() / gb
		}
	}
	return res
}

// BenchmarkLoopbackModes (experiments): the download modes of
// GOSAFETENSORS_BENCH_MODES (comma-separated: "" the download, nohash,
// nosync, earlydirect, tmpfs, each with optional suffixes +bufK,
// +chunkM, +procsN, +buffered: no O_DIRECT; a mode prefixed "old" is run
// by the test binary GOSAFETENSORS_BENCH_OLD names, another build's
// download, e.g. main's; and "curl": the 16 curls of
// BenchmarkLoopbackHub, to which every mode's rate is then compared),
// each first in turn, uncapped, with their rates and CPU per GB.
func BenchmarkLoopbackModes(b *testing.B) { benchModes(b, pacedserver.Config{}) }

// BenchmarkPacedModes (experiments): the modes of BenchmarkLoopbackModes
// on the paced link of BenchmarkPacedHub, each compared to min(cap,
// loopback) (the loopback measured in each round: 16 plain GETs).
func BenchmarkPacedModes(b *testing.B) {
	benchModes(b, pacedserver.Config{Rate: benchRate, Latency: benchLatency})
}

func benchModes(b *testing.B, cfg pacedserver.Config) {
	env := os.Getenv("GOSAFETENSORS_BENCH_MODES")
	if env == "" {
		b.Skip("set GOSAFETENSORS_BENCH_MODES, e.g. ',nohash,+buf512,+procs8,curl'")
	}
	modes := strings.Split(env, ",")
	srv, total := benchHub(b, cfg)
	paced := cfg.Rate > 0
	var raw *hubFixture
	if paced {
		raw, _ = benchHub(b, pacedserver.Config{})
	}
	curl, _ := exec.LookPath("curl")
	r := rounds{}
	round := 0
	for b.Loop() {
		r.add("load_average", loadAverage())
		limit := 0.0
		if paced {
			limit = min(16*cfg.Rate/1e6, plainGETs(b, raw, 16, ""))
		}
		rates := map[string]float64{}
		for k := range modes {
			m := modes[(k+round)%len(modes)]
			if m == "curl" {
				if curl == "" {
					b.Skip("curl not found")
				}
				c := curlGETs(b, curl, srv, 16, false)
				r.add("curl16_MB/s", c.rate)
				r.add("curl16_then_fdatasync_MB/s", c.durable)
				rates[m] = c.rate
				continue
			}
			d := subprocessDownload(b, srv.srv.URL, 16, m)
			name := cmp.Or(m, "download")
			r.add(name+"_MB/s", d.rate)
			r.add(name+"_CPU_s/GB", d.cpu)
			r.add(name+"_peak_RSS_MB", d.rss)
			r.add(name+"_tail", d.tail)
			r.add(name+"_head", d.head)
			r.add(name+"_requests", d.reqs)
			r.add(name+"_machine_idle_CPU_s/GB", d.idle)
			r.add(name+"_server_CPU_s/GB", d.server)
			rates[name] = d.rate
		}
		for m, v := range rates {
			if c, ok := rates["curl"]; ok && m != "curl" {
				r.add(m+"/curl16", v/c)
			}
			if paced {
				r.add(m+"/min(cap,loopback)", v/limit)
			}
		}
		b.Logf("round %d: load %.1f, MB/s %v", round, loadAverage(), rates)
		round++
	}
	r.report(b)
	b.SetBytes(total)
}
