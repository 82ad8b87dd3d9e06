package compressed

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gosafetensors/safetensors"
)

func needTool(t *testing.T, name string) {
	t.Helper()
	if _, err := exec.LookPath(name); err != nil {
		t.Skipf("%s not installed", name)
	}
}

func run(t *testing.T, name string, args ...string) {
	t.Helper()
	if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
		t.Fatalf("%s %v: %v\n%s", name, args, err, out)
	}
}

// TestToolsRestoreOurFiles: `zstd -d` and `lz4 -d` restore the original
// from our seekable files.
func TestToolsRestoreOurFiles(t *testing.T) {
	orig := genModel(t, safetensors.BF16, 512<<10, 8)
	for _, tc := range []struct {
		codec Codec
		tool  string
		args  func(in, out string) []string
	}{
		{Zstd, "zstd", func(in, out string) []string { return []string{"-d", "-q", "-f", in, "-o", out} }},
		{LZ4, "lz4", func(in, out string) []string { return []string{"-d", "-q", "-f", in, out} }},
	} {
		t.Run(tc.tool, func(t *testing.T) {
			needTool(t, tc.tool)
			dir := t.TempDir()
			in := filepath.Join(dir, "c")
			os.WriteFile(in, compressBytes(t, orig, WithCodec(tc.codec), WithFrameSize(64<<10)), 0o644)
			out := filepath.Join(dir, "out")
			run(t, tc.tool, tc.args(in, out)...)
			got, err := os.ReadFile(out)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, orig) {
				t.Fatalf("%s -d output differs from the original", tc.tool)
			}
		})
	}
}

// TestToolStreams: files written by the zstd and lz4 tools (no seek table)
// are detected as streams, refused for random access with ErrNotSeekable,
// and decompressed whole.
func TestToolStreams(t *testing.T) {
	orig := genModel(t, safetensors.F32, 256<<10, 9)
	for _, tc := range []struct {
		tool string
		want Format
		args func(in, out string) []string
	}{
		{"zstd", ZstdStream, func(in, out string) []string { return []string{"-q", "-f", in, "-o", out} }},
		{"lz4", LZ4Stream, func(in, out string) []string { return []string{"-q", "-f", in, out} }},
	} {
		t.Run(tc.tool, func(t *testing.T) {
			needTool(t, tc.tool)
			dir := t.TempDir()
			in := filepath.Join(dir, "m.safetensors")
			os.WriteFile(in, orig, 0o644)
			out := filepath.Join(dir, "c")
			run(t, tc.tool, tc.args(in, out)...)
			comp, _ := os.ReadFile(out)
			if f, err := Detect(bytes.NewReader(comp), int64(len(comp))); f != tc.want || err != nil {
				t.Fatalf("Detect = %v, %v; want %v", f, err, tc.want)
			}
			_, err := NewReaderAt(bytes.NewReader(comp), int64(len(comp)))
			if !errors.Is(err, ErrNotSeekable) {
				t.Fatalf("NewReaderAt: %v, want ErrNotSeekable", err)
			}
			got, err := decompressBytes(comp)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, orig) {
				t.Fatal("decompressed stream differs from the original")
			}
		})
	}
}

// TestGroupedIsSafetensors: any safetensors reader can list a grouped
// container: its tensors are the chunks, named after the original tensors,
// and its metadata carries the original header and the chunk index.
func TestGroupedIsSafetensors(t *testing.T) {
	orig := genModel(t, safetensors.BF16, 256<<10, 10)
	comp := compressBytes(t, orig, WithCodec(Grouped), WithFrameSize(64<<10))
	sr, err := safetensors.NewReader(bytes.NewReader(comp), int64(len(comp)), safetensors.WithoutDecompression())
	if err != nil {
		t.Fatal(err)
	}
	if sr.Metadata[groupedKey] != groupedVersion {
		t.Errorf("metadata %q = %q", groupedKey, sr.Metadata[groupedKey])
	}
	o, _ := safetensors.NewReader(bytes.NewReader(orig), int64(len(orig)))
	if got := sr.Metadata[groupedHeaderKey]; got != string(orig[8:o.DataOffset()]) {
		t.Error("the original header is not kept exactly")
	}
	chunks := 0
	for _, n := range sr.Names() {
		if strings.HasSuffix(n, "/layers.0.weight") {
			chunks++
		}
	}
	if w, _ := o.Info("layers.0.weight"); int64(chunks) != w.Size()/(64<<10) {
		t.Errorf("%d chunk tensors for layers.0.weight (%d bytes): %v", chunks, w.Size(), sr.Names())
	}
}
