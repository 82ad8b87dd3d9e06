package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// BenchmarkHelp measures issue 15's start-up budget: the built CLI's
// `safetensors --help` against `cat` of a small file, run alternately
// b.N times each (so a loaded machine slows both alike). It reports the
// median of each, their ratio (budget ≤ 3), the largest peak RSS of
// --help over 20 runs (budget ≤ 20 MB; measured with /usr/bin/time where
// it exists) and the 1-minute load average at the end.
// The binary is built with the benchmark's own GOFLAGS (e.g.
// GOFLAGS=-tags=nos3).
//
//	go test -run '^$' -bench BenchmarkHelp -benchtime 200x ./cmd/safetensors/
func BenchmarkHelp(b *testing.B) {
	goCmd, err := exec.LookPath("go")
	if err != nil {
		b.Skip("the go command is not on PATH: cannot build the CLI")
	}
	cat, err := exec.LookPath("cat")
	if err != nil {
		b.Skip("cat is not on PATH: no baseline")
	}
	dir := b.TempDir()
	bin := filepath.Join(dir, "safetensors")
	if out, err := exec.Command(goCmd, "build", "-o", bin, ".").CombinedOutput(); err != nil {
		b.Fatalf("go build: %v\n%s", err, out)
	}
	small := filepath.Join(dir, "small.txt")
	if err := os.WriteFile(small, []byte(strings.Repeat("safetensors\n", 64)), 0o644); err != nil {
		b.Fatal(err)
	}
	run := func(name string, args ...string) time.Duration {
		cmd := exec.Command(name, args...)
		t0 := time.Now()
		if err := cmd.Run(); err != nil {
			b.Fatalf("%s %v: %v", name, args, err)
		}
		return time.Since(t0)
	}
	run(cat, small)
	run(bin, "--help")
	var tc, th []time.Duration
	b.ResetTimer()
	for range b.N {
		tc = append(tc, run(cat, small))
		th = append(th, run(bin, "--help"))
	}
	b.StopTimer()
	// Peak RSS through GNU time, which forks: a child started by os/exec
	// (vfork) would report this test binary's peak instead of its own.
	var rssHelp, rssCat int64
	if gnuTime, err := exec.LookPath("/usr/bin/time"); err == nil {
		rss := func(name string, args ...string) int64 {
			f := filepath.Join(dir, "rss")
			if err := exec.Command(gnuTime, append([]string{"-f", "%M", "-o", f, name}, args...)...).Run(); err != nil {
				b.Fatalf("time %s: %v", name, err)
			}
			out, err := os.ReadFile(f)
			if err != nil {
				b.Fatal(err)
			}
			kb, err := strconv.ParseInt(strings.TrimSpace(string(out)), 10, 64)
			if err != nil {
				b.Fatalf("time %s: %q: %v", name, out, err)
			}
			return kb * 1024
		}
		for range 20 {
			rssHelp, rssCat = max(rssHelp, rss(bin, "--help")), max(rssCat, rss(cat, small))
		}
	}
	mc, mh := median(tc), median(th)
	b.ReportMetric(float64(mc.Microseconds()), "cat-µs")
	b.ReportMetric(float64(mh.Microseconds()), "help-µs")
	b.ReportMetric(mh.Seconds()/mc.Seconds(), "ratio")
	if rssHelp > 0 {
		b.ReportMetric(float64(rssHelp)/1e6, "help-RSS-MB")
		b.ReportMetric(float64(rssCat)/1e6, "cat-RSS-MB")
	}
	if la, err := os.ReadFile("/proc/loadavg"); err == nil {
		if f := strings.Fields(string(la)); len(f) > 0 {
			if v, err := strconv.ParseFloat(f[0], 64); err == nil {
				b.ReportMetric(v, "load1")
			}
		}
	}
}

func median(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}

// initBudget is the most a package of this module may allocate while it
// is initialised: package initialisation runs before every command, so
// work there (a regexp with a 221-fold repetition took 230 kB and a
// millisecond) belongs behind sync.OnceValue.
const initBudget = 64 << 10

// TestInitCost runs the built CLI's --help with GODEBUG=inittrace=1 and
// checks, by bytes allocated rather than by time, that no package of the
// module does heavy work at initialisation.
func TestInitCost(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the CLI")
	}
	goCmd, err := exec.LookPath("go")
	if err != nil {
		t.Skip("the go command is not on PATH: cannot build the CLI")
	}
	bin := filepath.Join(t.TempDir(), "safetensors")
	if out, err := exec.Command(goCmd, "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	cmd := exec.Command(bin, "--help")
	cmd.Env = append(os.Environ(), "GODEBUG=inittrace=1")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("--help: %v\n%s", err, stderr.String())
	}
	const mod = "github.com/gosafetensors/safetensors"
	var total, ours, n int64
	for _, line := range strings.Split(stderr.String(), "\n") {
		// init PKG @T ms, C ms clock, B bytes, N allocs
		f := strings.Fields(line)
		if len(f) != 11 || f[0] != "init" || f[8] != "bytes," {
			continue
		}
		bytes, err := strconv.ParseInt(f[7], 10, 64)
		if err != nil {
			t.Fatalf("inittrace line %q: %v", line, err)
		}
		n++
		total += bytes
		if f[1] == mod || strings.HasPrefix(f[1], mod+"/") || f[1] == "main" {
			ours += bytes
			if bytes > initBudget {
				t.Errorf("package %s allocates %d bytes at initialisation (budget %d): move the work behind sync.OnceValue", f[1], bytes, initBudget)
			}
		}
	}
	if n == 0 {
		t.Fatalf("no inittrace lines in --help's stderr:\n%s", stderr.String())
	}
	t.Logf("%d packages initialised, %d bytes allocated, %d of them by this module's packages", n, total, ours)
}
