package compressed

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/gosafetensors/safetensors"
)

// BenchmarkWalk measures what checking frame positions costs a random
// read: a 1 KiB read in the last frame of a freshly opened 64 MiB seekable
// file (which first walks the frame and block headers of every frame
// before it) against the same read in the first tensor frame (no walk),
// and against the walk alone. From a mapped file (Open) and from an
// io.ReaderAt (32-byte reads per header).
func BenchmarkWalk(b *testing.B) {
	orig := genModel(b, safetensors.BF16, 64<<20, 50)
	for _, codec := range []Codec{Zstd, LZ4} {
		comp := compressBytes(b, orig, WithCodec(codec))
		path := filepath.Join(b.TempDir(), "c")
		if err := os.WriteFile(path, comp, 0o644); err != nil {
			b.Fatal(err)
		}
		ra0, _ := NewReaderAt(bytes.NewReader(comp), int64(len(comp)))
		first, last := ra0.frames[1], ra0.frames[len(ra0.frames)-1]
		b.Logf("%s: %d frames", codec, len(ra0.frames))
		ra0.Close()
		for _, src := range []string{"mapped", "readerat"} {
			open := func() *ReaderAt {
				var ra *ReaderAt
				var err error
				if src == "mapped" {
					ra, err = Open(path, WithCacheFrames(0))
				} else {
					ra, err = NewReaderAt(bytes.NewReader(comp), int64(len(comp)), WithCacheFrames(0))
				}
				if err != nil {
					b.Fatal(err)
				}
				return ra
			}
			buf := make([]byte, 1024)
			for _, tc := range []struct {
				name string
				f    frame
			}{{"first", first}, {"last", last}} {
				b.Run(string(codec)+"/"+src+"/read-"+tc.name, func(b *testing.B) {
					for b.Loop() {
						ra := open()
						if _, err := ra.ReadAt(buf, tc.f.uoff); err != nil {
							b.Fatal(err)
						}
						ra.Close()
					}
				})
			}
			b.Run(string(codec)+"/"+src+"/walk-only", func(b *testing.B) {
				for b.Loop() {
					ra := open()
					if err := ra.walkTo(len(ra.frames) - 1); err != nil {
						b.Fatal(err)
					}
					ra.Close()
				}
			})
		}
	}
	_ = context.Background
}
