package compressed

import (
	"bytes"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/gosafetensors/safetensors"
)

func testFiles(t *testing.T) map[string][]byte {
	t.Helper()
	files := map[string][]byte{
		"gen_bf16": genModel(t, safetensors.BF16, 1<<20, 1),
		"gen_f32":  genModel(t, safetensors.F32, 1<<20, 2),
	}
	paths, err := filepath.Glob("../testdata/torch/*.safetensors")
	if err != nil || len(paths) == 0 {
		t.Fatalf("no testdata: %v", err)
	}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		files[filepath.Base(p)] = b
	}
	return files
}

func TestRoundTrip(t *testing.T) {
	for name, orig := range testFiles(t) {
		for _, codec := range allCodecs {
			t.Run(name+"/"+string(codec), func(t *testing.T) {
				comp := compressBytes(t, orig, WithCodec(codec), WithFrameSize(64<<10))
				f, err := Detect(bytes.NewReader(comp), int64(len(comp)))
				if err != nil || !f.Seekable() {
					t.Fatalf("Detect = %v, %v", f, err)
				}
				got, err := decompressBytes(comp)
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got, orig) {
					t.Fatalf("decompressed %d bytes differ from the original %d", len(got), len(orig))
				}
				ra, err := NewReaderAt(bytes.NewReader(comp), int64(len(comp)), WithCacheFrames(2))
				if err != nil {
					t.Fatal(err)
				}
				defer ra.Close()
				if ra.Size() != int64(len(orig)) {
					t.Fatalf("Size = %d, want %d", ra.Size(), len(orig))
				}
				checkRandomReads(t, ra, orig)
				checkTensors(t, ra, orig)
			})
		}
	}
}

// checkRandomReads compares random ranges read through ra with orig,
// including reads that run past the end.
func checkRandomReads(t *testing.T, ra *ReaderAt, orig []byte) {
	t.Helper()
	r := rand.New(rand.NewPCG(7, 7))
	for range 200 {
		off := r.Int64N(int64(len(orig)))
		n := r.IntN(min(len(orig), 300<<10)) + 1
		buf := make([]byte, n)
		got, err := ra.ReadAt(buf, off)
		want := min(int64(n), int64(len(orig))-off)
		if int64(got) != want || (want < int64(n)) != (err != nil) {
			t.Fatalf("ReadAt(%d, %d) = %d, %v; want %d bytes", n, off, got, err, want)
		}
		if !bytes.Equal(buf[:got], orig[off:off+int64(got)]) {
			t.Fatalf("ReadAt(%d, %d): wrong bytes", n, off)
		}
	}
}

// checkTensors reads every tensor through safetensors.NewReader over ra.
func checkTensors(t *testing.T, ra *ReaderAt, orig []byte) {
	t.Helper()
	want, err := safetensors.NewReader(bytes.NewReader(orig), int64(len(orig)))
	if err != nil {
		t.Fatal(err)
	}
	sr, err := safetensors.NewReader(ra, ra.Size())
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range want.Names() {
		a, err := sr.Tensor(name)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := want.Tensor(name)
		ab, err := a.Copy()
		if err != nil {
			t.Fatal(err)
		}
		bb, _ := b.Copy()
		if !bytes.Equal(ab, bb) {
			t.Fatalf("tensor %q differs", name)
		}
	}
}
