package compressed

import (
	"bytes"
	"io"
	"testing"

	"github.com/gosafetensors/safetensors"
)

// BenchmarkDecodeMem measures decompression from memory to io.Discard, on
// one core and on all, for each codec (64 MiB BF16): the codec's own speed,
// without disk writes.
func BenchmarkDecodeMem(b *testing.B) {
	orig := genModel(b, safetensors.BF16, 64<<20, 3)
	for _, codec := range allCodecs {
		comp := compressBytes(b, orig, WithCodec(codec))
		for _, conc := range []int{1, 2} {
			b.Run(string(codec)+"/conc"+string(rune('0'+conc)), func(b *testing.B) {
				b.SetBytes(int64(len(orig)))
				for range b.N {
					if _, err := Decompress(io.Discard, bytes.NewReader(comp), int64(len(comp)), WithConcurrency(conc)); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
