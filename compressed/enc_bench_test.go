package compressed

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/gosafetensors/safetensors"
)

// BenchmarkEncodeMem measures compression from memory to a file (64 MiB
// BF16), per codec; MB/cpu-s is the speed per busy core.
func BenchmarkEncodeMem(b *testing.B) {
	orig := genModel(b, safetensors.BF16, 64<<20, 3)
	for _, codec := range allCodecs {
		b.Run(string(codec), func(b *testing.B) {
			f, err := os.Create(filepath.Join(b.TempDir(), "c"))
			if err != nil {
				b.Fatal(err)
			}
			defer f.Close()
			b.SetBytes(int64(len(orig)))
			c0 := cpuTime()
			for range b.N {
				if _, err := Compress(context.Background(), f, bytes.NewReader(orig), int64(len(orig)), WithCodec(codec)); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(int64(len(orig))*int64(b.N))/1e6/(cpuTime()-c0).Seconds(), "MB/cpu-s")
		})
	}
}
