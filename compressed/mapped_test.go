package compressed

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/gosafetensors/safetensors"
	"github.com/gosafetensors/safetensors/internal/fault"
)

// TestMappedTruncated: a compressed file that shrinks while a ReaderAt has
// it mapped fails the read with an I/O error (not a format error), for
// every codec, instead of crashing the process with SIGBUS.
func TestMappedTruncated(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("mapping is only checked on linux")
	}
	orig := genModel(t, safetensors.BF16, 4<<20, 7)
	for _, codec := range allCodecs {
		t.Run(string(codec), func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "m.st")
			if err := os.WriteFile(p, compressBytes(t, orig, WithCodec(codec), WithFrameSize(64<<10)), 0o644); err != nil {
				t.Fatal(err)
			}
			ra, err := Open(p, WithCacheFrames(0))
			if err != nil {
				t.Fatal(err)
			}
			defer ra.Close()
			if ra.mapped == nil {
				t.Fatal("Open did not map the file")
			}
			got := make([]byte, len(orig))
			if _, err := ra.ReadAt(got, 0); err != nil {
				t.Fatal(err)
			}
			if err := os.Truncate(p, 4096); err != nil {
				t.Fatal(err)
			}
			_, err = ra.ReadAt(got, 0)
			if err == nil || err == io.EOF {
				t.Fatalf("read of a truncated mapped file: %v", err)
			}
			if !errors.Is(err, fault.ErrFault) {
				t.Fatalf("want a map fault error, got %v", err)
			}
			if errors.Is(err, ErrCorrupt) || errors.Is(err, ErrChecksum) {
				t.Fatalf("a fault is an I/O error, not a format error: %v", err)
			}
		})
	}
}
