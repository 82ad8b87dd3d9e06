//go:build linux

package load_test

import (
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gosafetensors/safetensors/internal/fetch"
	"github.com/gosafetensors/safetensors/internal/pacedserver"
	"github.com/gosafetensors/safetensors/internal/pagecache"
	"github.com/gosafetensors/safetensors/load"
	"golang.org/x/sys/unix"
)

// localSpec is a 2 GiB Llama-shaped model in 4 shards.
var localSpec = pacedserver.ModelSpec{Hidden: 4096, Intermediate: 11008, Layers: 4, Vocab: 32000, Shards: 4}

// BenchmarkLocal loads a 2 GiB model from local files, cold (every file's
// pages dropped from the cache with posix_fadvise(DONTNEED)) and warm,
// against cat and dd iflag=direct bs=8M on the same files, against mmap
// with parallel copies through the same chunked reader, against the
// loader with WithBufferedIO (every read through the page cache), and, for
// loads into new memory, against os.ReadFile of each file. The best of
// three rounds of each is kept.
func BenchmarkLocal(b *testing.B) {
	dir := os.Getenv("GOSAFETENSORS_BENCH_DIR") // a disk other than the temp one
	if dir == "" {
		dir = b.TempDir()
	} else {
		var err error
		if dir, err = os.MkdirTemp(dir, "load-bench"); err != nil {
			b.Fatal(err)
		}
		defer os.RemoveAll(dir)
	}
	names := writeBenchModel(b, dir, localSpec)
	var total int64
	for _, n := range names {
		st, _ := os.Stat(n)
		total += st.Size()
	}
	ctx := context.Background()
	rate := func(d time.Duration) float64 { return float64(total) / d.Seconds() / 1e6 }
	// timeIt runs f and returns its MB/s and CPU seconds per GB: this
	// process's and its children's (cat, dd) user and system time.
	timeIt := func(f func()) (float64, float64) {
		c0 := selfCPU() + childrenCPU()
		start := time.Now()
		f()
		d := time.Since(start)
		return rate(d), (selfCPU() + childrenCPU() - c0).Seconds() / (float64(total) / 1e9)
	}
	cat := func() { catToNull(b, names) }
	dd := func() {
		for _, n := range names {
			if out, err := exec.Command("dd", "if="+n, "of=/dev/null", "bs=8M", "iflag=direct").CombinedOutput(); err != nil {
				b.Fatalf("dd: %v: %s", err, out)
			}
		}
	}
	loadDiscard := func() {
		l, err := load.Open(ctx, dir)
		if err != nil {
			b.Fatal(err)
		}
		defer l.Close()
		if _, err := l.Discard(ctx); err != nil {
			b.Fatal(err)
		}
	}
	// The loader with every read through the page cache (WithBufferedIO),
	// against its default O_DIRECT for uncached reads, in the same rounds.
	loadBuffered := func() {
		l, err := load.Open(ctx, dir, load.WithBufferedIO())
		if err != nil {
			b.Fatal(err)
		}
		defer l.Close()
		if _, err := l.Discard(ctx); err != nil {
			b.Fatal(err)
		}
	}
	loadMemory := func() {
		l, err := load.Open(ctx, dir)
		if err != nil {
			b.Fatal(err)
		}
		defer l.Close()
		if _, err := l.Load(ctx, func(*load.Tensor) error { return nil }); err != nil {
			b.Fatal(err)
		}
	}
	mmapCopy := func() { mmapDiscard(b, names, 16, load.DefaultLocalChunk) }
	// The peer of load-memory: each file read whole into a new buffer.
	readFile := func() {
		for _, n := range names {
			if _, err := os.ReadFile(n); err != nil {
				b.Fatal(err)
			}
		}
	}
	type result struct{ cold, warm, coldCPU, warmCPU []float64 }
	res := map[string]*result{}
	methods := []struct {
		name string
		f    func()
	}{{"cat", cat}, {"dd", dd}, {"load", loadDiscard}, {"load-buffered", loadBuffered}, {"load-memory", loadMemory}, {"mmap", mmapCopy}, {"readfile", readFile}}
	if only := os.Getenv("GOSAFETENSORS_BENCH_METHODS"); only != "" { // e.g. cat,dd,load
		keep := strings.Split(only, ",")
		methods = slices.DeleteFunc(methods, func(m struct {
			name string
			f    func()
		}) bool {
			return !slices.Contains(keep, m.name)
		})
	}
	for _, m := range methods {
		res[m.name] = &result{}
	}
	rounds := 3
	if n, err := strconv.Atoi(os.Getenv("GOSAFETENSORS_BENCH_ROUNDS")); err == nil && n > 0 {
		rounds = n
	}
	// Ratios are taken within a round (the methods back to back, in an
	// order rotated every round), where the machine and the host's caches
	// are as alike as they get; the median round is reported.
	var coldRatio, warmRatio, memRatio, bufferedRatio []float64
	undropped := 0 // cold runs whose files were not all out of the cache
	for b.Loop() {
		for r := range rounds {
			order := append(slices.Clone(methods[r%len(methods):]), methods[:r%len(methods)]...)
			cold, warm := map[string]float64{}, map[string]float64{}
			for _, m := range order {
				if left := dropCache(b, names); left > 0.001 {
					b.Logf("round %d, %s: %.1f%% of the pages still cached after 5 drops", r, m.name, 100*left)
					undropped++
				}
				var cpu float64
				cold[m.name], cpu = timeIt(m.f)
				res[m.name].cold = append(res[m.name].cold, cold[m.name])
				res[m.name].coldCPU = append(res[m.name].coldCPU, cpu)
			}
			cat() // warm the cache
			for _, m := range order {
				if m.name == "dd" {
					continue // direct I/O does not use the cache
				}
				var cpu float64
				warm[m.name], cpu = timeIt(m.f)
				res[m.name].warm = append(res[m.name].warm, warm[m.name])
				res[m.name].warmCPU = append(res[m.name].warmCPU, cpu)
			}
			if cold["load"] > 0 && max(cold["cat"], cold["dd"]) > 0 {
				coldRatio = append(coldRatio, cold["load"]/max(cold["cat"], cold["dd"]))
			}
			if cold["load-buffered"] > 0 && cold["load"] > 0 {
				bufferedRatio = append(bufferedRatio, cold["load-buffered"]/cold["load"])
			}
			if warm["load"] > 0 && warm["cat"] > 0 {
				warmRatio = append(warmRatio, warm["load"]/warm["cat"])
			}
			if warm["load-memory"] > 0 && warm["readfile"] > 0 {
				memRatio = append(memRatio, warm["load-memory"]/warm["readfile"])
			}
		}
	}
	best := func(v []float64) float64 {
		if len(v) == 0 {
			return 0
		}
		return slices.Max(v)
	}
	for _, m := range methods {
		b.Logf("%-12s cold %v MB/s, warm %v MB/s; CPU s/GB cold %.2f, warm %.2f", m.name, round(res[m.name].cold), round(res[m.name].warm), res[m.name].coldCPU, res[m.name].warmCPU)
		b.ReportMetric(median(res[m.name].coldCPU), "cold_"+m.name+"_CPU_s/GB")
		if m.name != "dd" {
			b.ReportMetric(median(res[m.name].warmCPU), "warm_"+m.name+"_CPU_s/GB")
		}
	}
	b.ReportMetric(loadAverage(), "load_average")
	b.ReportMetric(float64(undropped), "cold_runs_not_dropped")
	b.Logf("per round: cold load/max(cat,dd) %.2f, warm load/cat %.2f, warm load-memory/readfile %.2f", coldRatio, warmRatio, memRatio)
	b.ReportMetric(median(coldRatio), "cold_load/max(cat,dd)")
	if len(bufferedRatio) > 0 {
		b.Logf("per round: cold load-buffered/load %.2f", bufferedRatio)
		b.ReportMetric(median(bufferedRatio), "cold_load-buffered/load")
	}
	b.ReportMetric(median(warmRatio), "warm_load/cat")
	b.ReportMetric(median(memRatio), "warm_load-memory/readfile")
	get := func(name string) *result {
		if r := res[name]; r != nil {
			return r
		}
		return &result{}
	}
	b.ReportMetric(best(get("cat").cold), "best_cold_cat_MB/s")
	b.ReportMetric(best(get("dd").cold), "best_cold_dd_MB/s")
	b.ReportMetric(best(get("load").cold), "best_cold_load_MB/s")
	b.ReportMetric(best(get("mmap").cold), "best_cold_mmap_MB/s")
	b.ReportMetric(best(get("cat").warm), "best_warm_cat_MB/s")
	b.ReportMetric(best(get("load").warm), "best_warm_load_MB/s")
	b.ReportMetric(best(get("mmap").warm), "best_warm_mmap_MB/s")
	b.ReportMetric(best(get("load-memory").warm), "best_warm_load-memory_MB/s")
	b.SetBytes(total)
}

func round(v []float64) []int {
	out := make([]int, len(v))
	for i, x := range v {
		out[i] = int(x + 0.5)
	}
	return out
}

// writeBenchModel writes the spec's files into dir and returns the shard
// paths, flushed to disk.
func writeBenchModel(b *testing.B, dir string, spec pacedserver.ModelSpec) []string {
	files, err := spec.Model()
	if err != nil {
		b.Fatal(err)
	}
	var names []string
	for name, f := range files {
		p := filepath.Join(dir, name)
		out, err := os.Create(p)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := io.Copy(out, io.NewSectionReader(f.Content, 0, f.Size)); err != nil {
			b.Fatal(err)
		}
		if err := out.Sync(); err != nil {
			b.Fatal(err)
		}
		out.Close()
		if strings.HasSuffix(name, ".safetensors") {
			names = append(names, p)
		}
	}
	slices.Sort(names)
	return names
}

// childrenCPU is the user and system CPU time of this process's waited-for
// children so far.
func childrenCPU() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_CHILDREN, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// dropCache evicts the files' pages from the page cache and checks with
// mincore(2) that they are out: posix_fadvise(DONTNEED) is advice, and
// pages still on another CPU's LRU batch, or under writeback, stay. It
// tries again (up to 5 times) while more than 0.1% of the pages are
// resident, and returns the fraction that was left.
func dropCache(b *testing.B, names []string) float64 {
	var left float64
	for try := range 5 {
		if err := pagecache.Drop(names...); err != nil {
			b.Fatal(err)
		}
		var err error
		if left, err = pagecache.Resident(names...); err != nil {
			b.Fatal(err)
		}
		if left <= 0.001 {
			break
		}
		time.Sleep(time.Duration(try+1) * 50 * time.Millisecond)
	}
	return left
}

// catToNull runs cat on the files with its output on /dev/null.
func catToNull(b *testing.B, names []string) {
	null, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		b.Fatal(err)
	}
	defer null.Close()
	var stderr strings.Builder
	cmd := exec.Command("cat", names...)
	cmd.Stdout, cmd.Stderr = null, &stderr
	if err := cmd.Run(); err != nil {
		b.Fatalf("cat: %v: %s", err, stderr.String())
	}
}

// mmapDiscard maps every file and copies it out in parallel chunks into a
// pool of buffers: the alternative to pread for local files.
func mmapDiscard(b *testing.B, names []string, conc int, chunk int64) {
	var srcs []fetch.Source
	var es []fetch.Extent
	var total int64
	for i, n := range names {
		f, err := os.Open(n)
		if err != nil {
			b.Fatal(err)
		}
		st, _ := f.Stat()
		m, err := unix.Mmap(int(f.Fd()), 0, int(st.Size()), unix.PROT_READ, unix.MAP_SHARED)
		f.Close()
		if err != nil {
			b.Fatal(err)
		}
		defer unix.Munmap(m)
		srcs = append(srcs, fetch.Source{R: mapped(m), Name: n})
		es = append(es, fetch.Extent{Src: i, Len: st.Size(), Item: i})
		total += st.Size()
	}
	pool, _ := fetch.NewPool(conc+1, chunk)
	_, err := fetch.Run(context.Background(), srcs, slices.Values(es), total, fetch.Config{
		Concurrency: conc, MaxChunk: chunk, Buffers: pool.Buffers,
		Done: func(c *fetch.Chunk, bufs [][]byte) error { pool.PutChunk(bufs); return nil },
	})
	if err != nil {
		b.Fatal(err)
	}
}

type mapped []byte

func (m mapped) ReadAt(p []byte, off int64) (int, error) {
	n := copy(p, m[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}
