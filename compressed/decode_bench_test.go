package compressed

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/gosafetensors/safetensors"
)

// BenchmarkDecodeMem measures decompression to io.Discard, on one core and
// on all, for each codec (64 MiB BF16): the codec's own speed, without disk
// writes. The conc sub-benchmarks read the compressed bytes from memory
// (a bytes.Reader: every frame is copied out first); file/conc ones from a
// page-cached file, which Decompress maps and decodes in place. MB/cpu-s is
// the speed per core busy, which the load of a shared machine does not
// distort.
func BenchmarkDecodeMem(b *testing.B) {
	orig := genModel(b, safetensors.BF16, 64<<20, 3)
	for _, codec := range allCodecs {
		comp := compressBytes(b, orig, WithCodec(codec))
		path := filepath.Join(b.TempDir(), "c")
		if err := os.WriteFile(path, comp, 0o644); err != nil {
			b.Fatal(err)
		}
		f, err := os.Open(path)
		if err != nil {
			b.Fatal(err)
		}
		defer f.Close()
		for _, src := range []struct {
			name string
			r    io.ReaderAt
		}{{"", bytes.NewReader(comp)}, {"file/", f}} {
			for _, conc := range []int{1, 2} {
				b.Run(string(codec)+"/"+src.name+"conc"+string(rune('0'+conc)), func(b *testing.B) {
					b.SetBytes(int64(len(orig)))
					c0 := cpuTime()
					defer func() {
						b.ReportMetric(float64(int64(len(orig))*int64(b.N))/1e6/(cpuTime()-c0).Seconds(), "MB/cpu-s")
					}()
					for range b.N {
						if _, err := Decompress(context.Background(), io.Discard, src.r, int64(len(comp)), WithConcurrency(conc)); err != nil {
							b.Fatal(err)
						}
					}
				})
			}
		}
	}
}
