package compressed

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/gosafetensors/safetensors"
)

// TestCancel: cancelling the context stops CompressFile and DecompressFile
// with ctx's error, and nothing is left in the output directory (no
// output, no temporary file).
func TestCancel(t *testing.T) {
	orig := genModel(t, safetensors.BF16, 4<<20, 40)
	dir := t.TempDir()
	in := filepath.Join(dir, "m.safetensors")
	if err := os.WriteFile(in, orig, 0o644); err != nil {
		t.Fatal(err)
	}
	comp := filepath.Join(dir, "m.safetensors.zst")
	if _, err := CompressFile(context.Background(), in, comp, WithFrameSize(64<<10)); err != nil {
		t.Fatal(err)
	}
	for _, conc := range []int{1, 2} {
		for _, tc := range []struct {
			name string
			run  func(ctx context.Context, out string, conc, progress Option) (*Result, error)
		}{
			{"compress", func(ctx context.Context, out string, conc, progress Option) (*Result, error) {
				return CompressFile(ctx, in, out, WithCodec(Grouped), WithFrameSize(64<<10), conc, progress)
			}},
			{"decompress", func(ctx context.Context, out string, conc, progress Option) (*Result, error) {
				return DecompressFile(ctx, comp, out, conc, progress)
			}},
		} {
			outDir := t.TempDir()
			out := filepath.Join(outDir, "out")
			ctx, cancel := context.WithCancel(context.Background())
			calls := 0
			_, err := tc.run(ctx, out, WithConcurrency(conc), WithProgress(func(done, total int64) {
				calls++
				if done > 0 && done < total {
					cancel()
				}
			}))
			cancel()
			if !errors.Is(err, context.Canceled) {
				t.Errorf("%s, %d goroutines: %v after %d progress calls, want context.Canceled", tc.name, conc, err, calls)
			}
			if left, _ := os.ReadDir(outDir); len(left) != 0 {
				t.Errorf("%s, %d goroutines: %d files left behind (%s)", tc.name, conc, len(left), left[0].Name())
			}
		}
	}
}
