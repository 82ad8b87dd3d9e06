package compressed_test

import (
	"bytes"
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gosafetensors/safetensors"
	"github.com/gosafetensors/safetensors/compressed"
)

// Importing the package makes safetensors.Open read compressed files as
// the originals: every tensor and slice as in the uncompressed file.
func TestOpenReadsCompressedTransparently(t *testing.T) {
	const orig = "../testdata/torch/tiny_transformer.safetensors"
	want, err := safetensors.Open(orig)
	if err != nil {
		t.Fatal(err)
	}
	defer want.Close()
	for _, codec := range []compressed.Codec{compressed.Zstd, compressed.LZ4, compressed.Grouped} {
		out := filepath.Join(t.TempDir(), "m."+string(codec))
		if _, err := compressed.CompressFile(context.Background(), orig, out, compressed.WithCodec(codec)); err != nil {
			t.Fatal(err)
		}
		f, err := safetensors.Open(out)
		if err != nil {
			t.Fatalf("%s: %v", codec, err)
		}
		if !slices.Equal(f.Names(), want.Names()) {
			t.Fatalf("%s: names %v", codec, f.Names())
		}
		for _, name := range want.Names() {
			a, _ := f.Tensor(name)
			b, _ := want.Tensor(name)
			ab, err := a.Copy()
			if err != nil {
				t.Fatal(err)
			}
			bb, _ := b.Bytes()
			if !bytes.Equal(ab, bb) {
				t.Fatalf("%s: %s differs", codec, name)
			}
			if len(b.Shape) > 0 && b.Shape[0] > 1 {
				as, err := a.Slice(safetensors.Range(1, b.Shape[0]))
				if err != nil {
					t.Fatal(err)
				}
				bs, _ := b.Slice(safetensors.Range(1, b.Shape[0]))
				x, _ := as.Bytes()
				y, _ := bs.Bytes()
				if !bytes.Equal(x, y) {
					t.Fatalf("%s: slice of %s differs", codec, name)
				}
			}
		}
		f.Close()
		if codec == compressed.Grouped {
			raw, err := safetensors.Open(out, safetensors.WithoutDecompression())
			if err != nil {
				t.Fatal(err)
			}
			if len(raw.Names()) == 0 || !strings.HasPrefix(raw.Names()[0], "000000/") {
				t.Fatalf("raw grouped container lists %v", raw.Names())
			}
			raw.Close()
		}
	}
}
