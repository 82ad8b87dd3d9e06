package compressed

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"syscall"
	"testing"
	"time"

	"github.com/gosafetensors/safetensors"
)

// Benchmarks for the targets. The files are generated (1 GiB each
// by default; COMPRESS_BENCH_MB=64 for a quicker run) into a temporary
// directory. Run:
//
//	go test ./compressed/ -run '^$' -bench . -benchtime 1x -timeout 60m
//
// Ratios are reported as custom metrics (ratio = compressed/original,
// speed in MB/s, ×-factors against the CLIs measured in the same run).

func benchSize() int64 {
	if s := os.Getenv("COMPRESS_BENCH_MB"); s != "" {
		var mb int64
		fmt.Sscan(s, &mb)
		if mb > 0 {
			return mb << 20
		}
	}
	return 1 << 30
}

// planeEntropy returns the Shannon entropy bound, in bytes, of the byte
// planes of the tensors of orig when split with groupingFor: the sum over
// planes of n·H(plane) (order-0), plus the header and non-float tensors as
// they are.
func planeEntropy(t testing.TB, orig []byte, rot bool) float64 {
	sr, err := safetensors.NewReader(bytes.NewReader(orig), int64(len(orig)))
	if err != nil {
		t.Fatal(err)
	}
	total := float64(sr.DataOffset())
	for _, ti := range sr.Tensors {
		data := orig[sr.DataOffset()+ti.DataOffsets[0] : sr.DataOffset()+ti.DataOffsets[1]]
		w, r := groupingFor(ti.DType)
		if w == 0 {
			total += float64(len(data))
			continue
		}
		n := len(data) / w
		planes := make([][]byte, w)
		for j := range planes {
			planes[j] = make([]byte, n)
		}
		splitPlanes(planes, data, w, r && rot)
		for _, p := range planes {
			var hist [256]float64
			for _, b := range p {
				hist[b]++
			}
			h := 0.0
			for _, c := range hist {
				if c > 0 {
					q := c / float64(len(p))
					h -= q * math.Log2(q)
				}
			}
			total += h * float64(len(p)) / 8
		}
	}
	return total
}

type benchFile struct {
	path string
	data []byte
}

func writeBenchFile(b *testing.B, dt safetensors.DType) benchFile {
	dir := b.TempDir()
	data := genModel(b, dt, benchSize(), 42)
	p := filepath.Join(dir, "model.safetensors")
	if err := os.WriteFile(p, data, 0o644); err != nil {
		b.Fatal(err)
	}
	return benchFile{p, data}
}

func timeIt(f func()) time.Duration {
	t := time.Now()
	f()
	return time.Since(t)
}

// cpuTime is the CPU time (user+system) this process has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// measure returns the wall time and the CPU time f takes; for a command,
// f returns its own CPU time (child processes are not in RUSAGE_SELF).
func measure(f func() time.Duration) (wall, cpu time.Duration) {
	c0, t0 := cpuTime(), time.Now()
	child := f()
	return time.Since(t0), cpuTime() - c0 + child
}

func median(d []time.Duration) time.Duration {
	sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
	return d[len(d)/2]
}

// runCLI runs a command and returns the CPU time it used.
func runCLI(b *testing.B, name string, args ...string) time.Duration {
	cmd := exec.Command(name, args...)
	cmd.Stderr = io.Discard
	if out, err := cmd.Output(); err != nil {
		b.Fatalf("%s %v: %v %s", name, args, err, out)
	}
	return cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
}

// BenchmarkSize reports, for BF16 and F32 weights: grouped ratio, zstd -3
// ratio, our zstd ratio, and the per-plane entropy bound (raw byte planes
// and after the exponent rotation).
func BenchmarkSize(b *testing.B) {
	for _, dt := range []safetensors.DType{safetensors.BF16, safetensors.F32} {
		b.Run(dt.String(), func(b *testing.B) {
			f := writeBenchFile(b, dt)
			n := float64(len(f.data))
			for range b.N {
				for _, codec := range allCodecs {
					out := f.path + "." + string(codec)
					res, err := CompressFile(context.Background(), f.path, out, WithCodec(codec), WithOverwrite(true))
					if err != nil {
						b.Fatal(err)
					}
					b.ReportMetric(float64(res.Compressed)/n, "ratio_"+string(codec))
					os.Remove(out)
				}
				if _, err := exec.LookPath("zstd"); err == nil {
					runCLI(b, "zstd", "-3", "-q", "-f", "-T0", f.path, "-o", f.path+".cli.zst")
					st, _ := os.Stat(f.path + ".cli.zst")
					b.ReportMetric(float64(st.Size())/n, "ratio_zstd-3_cli")
					os.Remove(f.path + ".cli.zst")
				}
				b.ReportMetric(planeEntropy(b, f.data, false)/n, "entropy_planes")
				b.ReportMetric(planeEntropy(b, f.data, true)/n, "entropy_rotated_planes")
			}
		})
	}
}

// BenchmarkSpeed compares, interleaved (ours, CLI, ours, CLI, ...), the
// time to compress and decompress the whole file, file to file, without
// fsync on either side: grouped and zstd against `zstd -3 -T0` and
// `zstd -d`, lz4 against `lz4 -1` and `lz4 -d`. The machine is shared, so
// besides wall-clock medians it reports CPU time: MB per CPU-second is the
// one-core speed, and x-ratios compare our median to the CLI's (below 1
// is faster).
func BenchmarkSpeed(b *testing.B) {
	for _, dt := range []safetensors.DType{safetensors.BF16, safetensors.F32} {
		b.Run(dt.String(), func(b *testing.B) {
			f := writeBenchFile(b, dt)
			mb := float64(len(f.data)) / 1e6
			haveZstd := exec.Command("zstd", "--version").Run() == nil
			haveLZ4 := exec.Command("lz4", "--version").Run() == nil
			out := f.path + ".out"
			const rounds = 3
			for range b.N {
				for _, codec := range allCodecs {
					comp := f.path + "." + string(codec)
					var cw, cc, dw, dc, clicw, clicc, clidw, clidc []time.Duration
					add := func(w, c *[]time.Duration, wall, cpu time.Duration) {
						*w = append(*w, wall)
						*c = append(*c, cpu)
					}
					addM := func(w, c *[]time.Duration, f func() time.Duration) {
						wall, cpu := measure(f)
						add(w, c, wall, cpu)
					}
					for range rounds {
						wall, cpu := measure(func() time.Duration {
							if err := fileToFile(f.path, comp, func(dst *os.File, src *os.File, size int64) error {
								_, err := Compress(context.Background(), dst, src, size, WithCodec(codec))
								return err
							}); err != nil {
								b.Fatal(err)
							}
							return 0
						})
						add(&cw, &cc, wall, cpu)
						wall, cpu = measure(func() time.Duration {
							if err := fileToFile(comp, out, func(dst *os.File, src *os.File, size int64) error {
								_, err := Decompress(context.Background(), dst, src, size)
								return err
							}); err != nil {
								b.Fatal(err)
							}
							return 0
						})
						add(&dw, &dc, wall, cpu)
						switch {
						case codec != LZ4 && haveZstd:
							addM(&clicw, &clicc, func() time.Duration { return runCLI(b, "zstd", "-3", "-q", "-f", "-T0", f.path, "-o", f.path+".cli") })
							addM(&clidw, &clidc, func() time.Duration { return runCLI(b, "zstd", "-d", "-q", "-f", f.path+".cli", "-o", out) })
						case codec == LZ4 && haveLZ4:
							addM(&clicw, &clicc, func() time.Duration { return runCLI(b, "lz4", "-1", "-q", "-f", f.path, f.path+".cli") })
							addM(&clidw, &clidc, func() time.Duration { return runCLI(b, "lz4", "-d", "-q", "-f", f.path+".cli", out) })
						}
					}
					name := string(codec)
					b.ReportMetric(mb/median(cw).Seconds(), name+"_compress_MB/s")
					b.ReportMetric(mb/median(cc).Seconds(), name+"_compress_MB/cpu-s")
					b.ReportMetric(mb/median(dw).Seconds(), name+"_decompress_MB/s")
					b.ReportMetric(mb/median(dc).Seconds(), name+"_decompress_MB/cpu-s")
					if len(clicw) > 0 {
						b.ReportMetric(median(cw).Seconds()/median(clicw).Seconds(), name+"_compress_wall_xCLI")
						b.ReportMetric(median(cc).Seconds()/median(clicc).Seconds(), name+"_compress_cpu_xCLI")
						b.ReportMetric(median(dw).Seconds()/median(clidw).Seconds(), name+"_decompress_wall_xCLI")
						b.ReportMetric(median(dc).Seconds()/median(clidc).Seconds(), name+"_decompress_cpu_xCLI")
					}
					os.Remove(comp)
				}
			}
		})
	}
}

// fileToFile runs f from the file in to a new file out (no fsync, like the
// CLIs it is compared with).
func fileToFile(in, out string, f func(dst, src *os.File, size int64) error) error {
	src, err := os.Open(in)
	if err != nil {
		return err
	}
	defer src.Close()
	st, err := src.Stat()
	if err != nil {
		return err
	}
	dst, err := os.Create(out)
	if err != nil {
		return err
	}
	if err := f(dst, src, st.Size()); err != nil {
		dst.Close()
		return err
	}
	return dst.Close()
}

// BenchmarkRandomAccess reads one 1 MiB tensor (small.weight, BF16), a 1/8
// row slice and a 1/8 column slice of an 8 MiB tensor, from the compressed
// file and from the uncompressed one (both through safetensors.NewReader
// over a page-cached *os.File), interleaved; x-ratios are compressed time
// over uncompressed time (medians), frames the chunks decompressed per read.
func BenchmarkRandomAccess(b *testing.B) {
	f := writeBenchFile(b, safetensors.BF16)
	plain, err := os.Open(f.path)
	if err != nil {
		b.Fatal(err)
	}
	defer plain.Close()
	pr, err := safetensors.NewReader(plain, int64(len(f.data)))
	if err != nil {
		b.Fatal(err)
	}
	reads := []struct {
		name string
		read func(r *safetensors.Reader) error
	}{
		{"tensor_1MiB", func(r *safetensors.Reader) error {
			t, err := r.Tensor("small.weight")
			if err == nil {
				_, err = t.Copy()
			}
			return err
		}},
		{"rows_1of8", func(r *safetensors.Reader) error {
			t, err := r.Tensor("layers.1.weight")
			if err == nil {
				_, err = t.Slice(safetensors.Range(512, 1024))
			}
			return err
		}},
		{"cols_1of8", func(r *safetensors.Reader) error {
			t, err := r.Tensor("layers.1.weight")
			if err == nil {
				_, err = t.Slice(safetensors.All(), safetensors.Range(0, 128))
			}
			return err
		}},
	}
	for _, codec := range allCodecs {
		comp := f.path + "." + string(codec)
		if _, err := CompressFile(context.Background(), f.path, comp, WithCodec(codec), WithOverwrite(true)); err != nil {
			b.Fatal(err)
		}
		ra, err := Open(comp, WithCacheFrames(0))
		if err != nil {
			b.Fatal(err)
		}
		cr, err := safetensors.NewReader(ra, ra.Size())
		if err != nil {
			b.Fatal(err)
		}
		for _, rd := range reads {
			b.Run(string(codec)+"/"+rd.name, func(b *testing.B) {
				var tc, tp []time.Duration
				before := ra.Stats().FramesDecoded
				for range max(b.N, 15) {
					tc = append(tc, timeIt(func() {
						if err := rd.read(cr); err != nil {
							b.Fatal(err)
						}
					}))
					tp = append(tp, timeIt(func() {
						if err := rd.read(pr); err != nil {
							b.Fatal(err)
						}
					}))
				}
				b.ReportMetric(float64(ra.Stats().FramesDecoded-before)/float64(len(tc)), "frames/read")
				b.ReportMetric(median(tc).Seconds()/median(tp).Seconds(), "x_uncompressed")
				b.ReportMetric(float64(median(tc).Microseconds()), "us_compressed")
				b.ReportMetric(float64(median(tp).Microseconds()), "us_uncompressed")
			})
		}
		ra.Close()
		os.Remove(comp)
	}
}
