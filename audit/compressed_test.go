package audit_test

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/gosafetensors/safetensors/audit"
	"github.com/gosafetensors/safetensors/compressed"
)

// corruptContainers are compressed files whose header and seek table (or
// chunk index) are fine but whose frames or chunks every read of the data
// refuses: frames swapped, duplicated, sizes shifted, a chunk byte
// flipped (made by compressed/crafted_test.go).
var corruptContainers = []string{
	"zstd_frames_swapped.safetensors.zst", "zstd_frame_duplicated.safetensors.zst", "zstd_sizes_shifted.safetensors.zst",
	"lz4_frames_swapped.safetensors.lz4", "lz4_frame_duplicated.safetensors.lz4", "lz4_sizes_shifted.safetensors.lz4",
	"grouped_chunk_byte_flipped.grouped.safetensors", "grouped_chunks_swapped.grouped.safetensors",
}

// frameAt is how a verdict names the frame and the byte offset.
var frameAt = regexp.MustCompile(`frame \d+: .*\(at byte \d+\)`)

// TestCorruptContainer: validate (without --full) and scan of a compressed
// file that every read refuses are invalid, naming the frame and the
// offset; the same files' originals, compressed, are valid and clean.
func TestCorruptContainer(t *testing.T) {
	dir := t.TempDir()
	for _, name := range corruptContainers {
		copyFile(t, filepath.Join("../testdata/compressed", name), filepath.Join(dir, name))
	}
	for _, name := range corruptContainers {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(dir, name)
			for r := range audit.Validate(context.Background(), path) {
				if r.Status != audit.StatusInvalid || r.Error == nil || !frameAt.MatchString(*r.Error) || r.Offset == nil {
					t.Errorf("validate: %s %v offset %v", r.Status, deref(r.Error), r.Offset)
				}
			}
			for _, r := range scanAll(t, path) {
				if r.Verdict != audit.Invalid || !frameAt.MatchString(strings.Join(r.Problems, "\n")) {
					t.Errorf("scan: %s %q %s", r.Verdict, r.Problems, r.Error)
				}
			}
		})
	}
	t.Run("intact", func(t *testing.T) {
		for _, codec := range []compressed.Codec{compressed.Zstd, compressed.LZ4, compressed.Grouped} {
			out := filepath.Join(dir, "ok."+string(codec))
			if _, err := compressed.CompressFile(context.Background(), "../testdata/torch/tiny_transformer.safetensors", out, compressed.WithCodec(codec), compressed.WithFrameSize(4096)); err != nil {
				t.Fatal(err)
			}
			for r := range audit.Validate(context.Background(), out) {
				if r.Status != audit.OK {
					t.Errorf("%s: validate: %s %v", codec, r.Status, deref(r.Error))
				}
			}
			for _, r := range scanAll(t, out) {
				if r.Verdict != audit.Clean {
					t.Errorf("%s: scan: %s %q", codec, r.Verdict, r.Problems)
				}
			}
			os.Remove(out)
		}
	})
}

func deref(s *string) string {
	if s == nil {
		return "<nil>"
	}
	return *s
}
