package compressed

import (
	"bytes"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
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

func median(d []time.Duration) time.Duration {
	sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
	return d[len(d)/2]
}

func runCLI(b *testing.B, name string, args ...string) {
	cmd := exec.Command(name, args...)
	cmd.Stderr = io.Discard
	if out, err := cmd.Output(); err != nil {
		b.Fatalf("%s %v: %v %s", name, args, err, out)
	}
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
					res, err := CompressFile(f.path, out, WithCodec(codec), WithOverwrite(true))
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
// wall time of compressing and decompressing the whole file: grouped and
// zstd against `zstd -3 -T0` and `zstd -d`, lz4 against `lz4 -1` and
// `lz4 -d`. Metrics: MB/s of the original bytes, and ×CLI (our time over
// the CLI's; below 1 is faster).
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
					var ours, cli, dOurs, dCLI, dOne []time.Duration
					for range rounds {
						ours = append(ours, timeIt(func() {
							if _, err := CompressFile(f.path, comp, WithCodec(codec), WithOverwrite(true)); err != nil {
								b.Fatal(err)
							}
						}))
						dOurs = append(dOurs, timeIt(func() {
							if _, err := DecompressFile(comp, out, WithOverwrite(true)); err != nil {
								b.Fatal(err)
							}
						}))
						dOne = append(dOne, timeIt(func() {
							if _, err := DecompressFile(comp, out, WithOverwrite(true), WithConcurrency(1)); err != nil {
								b.Fatal(err)
							}
						}))
						switch {
						case codec != LZ4 && haveZstd:
							cli = append(cli, timeIt(func() { runCLI(b, "zstd", "-3", "-q", "-f", "-T0", f.path, "-o", f.path+".cli") }))
							dCLI = append(dCLI, timeIt(func() { runCLI(b, "zstd", "-d", "-q", "-f", f.path+".cli", "-o", out) }))
						case codec == LZ4 && haveLZ4:
							cli = append(cli, timeIt(func() { runCLI(b, "lz4", "-1", "-q", "-f", f.path, f.path+".cli") }))
							dCLI = append(dCLI, timeIt(func() { runCLI(b, "lz4", "-d", "-q", "-f", f.path+".cli", out) }))
						}
					}
					b.ReportMetric(mb/median(ours).Seconds(), string(codec)+"_compress_MB/s")
					b.ReportMetric(mb/median(dOurs).Seconds(), string(codec)+"_decompress_MB/s")
					b.ReportMetric(mb/median(dOne).Seconds(), string(codec)+"_decompress_1core_MB/s")
					if len(cli) > 0 {
						b.ReportMetric(median(ours).Seconds()/median(cli).Seconds(), string(codec)+"_compress_xCLI")
						b.ReportMetric(median(dOurs).Seconds()/median(dCLI).Seconds(), string(codec)+"_decompress_xCLI")
					}
					os.Remove(comp)
				}
			}
		})
	}
}
