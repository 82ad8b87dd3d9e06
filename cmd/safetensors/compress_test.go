package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gosafetensors/safetensors/compressed"
)

func TestCompressCmdRoundTrip(t *testing.T) {
	orig, err := os.ReadFile(torchDir + "tiny_transformer.safetensors")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ codec, comp string }{
		{"zstd", "m.safetensors.zst"},
		{"lz4", "m.safetensors.lz4"},
		{"grouped", "m.grouped.safetensors"},
	} {
		t.Run(tc.codec, func(t *testing.T) {
			dir := t.TempDir()
			in := filepath.Join(dir, "m.safetensors")
			if err := os.WriteFile(in, orig, 0o666); err != nil {
				t.Fatal(err)
			}
			code, out, errOut := runCLI(t, "compress", "--codec", tc.codec, "--frame-size", "4KiB", in)
			if code != 0 {
				t.Fatalf("compress: exit %d: %s", code, errOut)
			}
			comp := filepath.Join(dir, tc.comp)
			if !strings.Contains(out, "compressed "+in+" -> "+comp) {
				t.Errorf("stdout %q", out)
			}
			// The existing output is not replaced without --force.
			if code, _, errOut := runCLI(t, "compress", "--codec", tc.codec, in); code != 2 || !strings.Contains(errOut, "--force") {
				t.Errorf("second compress: exit %d, %q", code, errOut)
			}
			if code, _, errOut := runCLI(t, "compress", "--codec", tc.codec, "--force", in); code != 0 {
				t.Errorf("compress --force: exit %d, %q", code, errOut)
			}
			// decompress restores the exact bytes under the default name.
			if err := os.Remove(in); err != nil {
				t.Fatal(err)
			}
			code, out, errOut = runCLI(t, "decompress", comp)
			if code != 0 {
				t.Fatalf("decompress: exit %d: %s", code, errOut)
			}
			if !strings.Contains(out, "decompressed "+comp+" -> "+in) {
				t.Errorf("stdout %q", out)
			}
			got, err := os.ReadFile(in)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, orig) {
				t.Fatal("decompressed file differs from the original")
			}
			if names := dirNames(t, dir); len(names) != 2 {
				t.Errorf("files left in the directory: %v", names)
			}
		})
	}
}

func TestCompressCmdErrors(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.safetensors")
	os.WriteFile(bad, []byte("not a safetensors file at all"), 0o666)
	if code, _, errOut := runCLI(t, "compress", bad); code != 1 {
		t.Errorf("compress of an invalid file: exit %d, %q", code, errOut)
	}
	if code, _, errOut := runCLI(t, "decompress", bad, filepath.Join(dir, "out")); code != 1 || !strings.Contains(errOut, "not a compressed") {
		t.Errorf("decompress of an uncompressed file: exit %d, %q", code, errOut)
	}
	if code, _, _ := runCLI(t, "decompress", bad); code != 2 {
		t.Errorf("decompress without a derivable output name: exit %d", code)
	}
	if code, _, _ := runCLI(t, "compress", "--codec", "gzip", torchDir+"tiny_transformer.safetensors", filepath.Join(dir, "x")); code != 2 {
		t.Errorf("unknown codec: exit %d", code)
	}
	if code, _, _ := runCLI(t, "compress", filepath.Join(dir, "missing.safetensors")); code != 2 {
		t.Errorf("missing input: exit %d", code)
	}
	// --max-size refuses a file that would decompress to more.
	if code, _, errOut := runCLI(t, "compress", torchDir+"tiny_transformer.safetensors", filepath.Join(dir, "t.zst")); code != 0 {
		t.Fatal(errOut)
	}
	if code, _, errOut := runCLI(t, "decompress", "--max-size", "100B", filepath.Join(dir, "t.zst")); code != 1 || !strings.Contains(errOut, "limit of 100") {
		t.Errorf("--max-size: exit %d, %q", code, errOut)
	}
	// A corrupt compressed file: exit 1, no output left behind.
	in := filepath.Join(dir, "m.safetensors")
	copyTestFile(t, torchDir+"tiny_transformer.safetensors", in)
	if code, _, errOut := runCLI(t, "compress", in); code != 0 {
		t.Fatalf("compress: %s", errOut)
	}
	if code, _, errOut := runCLI(t, "compress", in+".zst", filepath.Join(dir, "twice.zst")); code != 1 || !strings.Contains(errOut, "is already compressed") {
		t.Errorf("compressing a compressed file: exit %d, %q", code, errOut)
	}
	b, _ := os.ReadFile(in + ".zst")
	b[len(b)/3] ^= 0x40
	os.WriteFile(in+".zst", b, 0o666)
	os.Remove(in)
	if code, _, errOut := runCLI(t, "decompress", in+".zst"); code != 1 {
		t.Errorf("corrupt input: exit %d, %q", code, errOut)
	}
	if _, err := os.Stat(in); err == nil {
		t.Error("output left behind after an error")
	}
}

// TestCompressCmdZstdCLI: the real zstd tool restores our output, and we
// decompress the zstd tool's plain output.
func TestCompressCmdZstdCLI(t *testing.T) {
	if _, err := exec.LookPath("zstd"); err != nil {
		t.Skip("zstd not installed")
	}
	dir := t.TempDir()
	in := filepath.Join(dir, "m.safetensors")
	copyTestFile(t, torchDir+"tiny_transformer.safetensors", in)
	if code, _, errOut := runCLI(t, "compress", in, filepath.Join(dir, "ours.zst")); code != 0 {
		t.Fatal(errOut)
	}
	if out, err := exec.Command("zstd", "-d", "-q", filepath.Join(dir, "ours.zst"), "-o", filepath.Join(dir, "back")).CombinedOutput(); err != nil {
		t.Fatalf("zstd -d: %v %s", err, out)
	}
	if out, err := exec.Command("zstd", "-q", in, "-o", filepath.Join(dir, "plain.zst")).CombinedOutput(); err != nil {
		t.Fatalf("zstd: %v %s", err, out)
	}
	if code, _, errOut := runCLI(t, "decompress", filepath.Join(dir, "plain.zst"), filepath.Join(dir, "back2")); code != 0 {
		t.Fatal(errOut)
	}
	orig, _ := os.ReadFile(in)
	for _, f := range []string{"back", "back2"} {
		got, _ := os.ReadFile(filepath.Join(dir, f))
		if !bytes.Equal(got, orig) {
			t.Errorf("%s differs from the original", f)
		}
	}
}

// TestCompressCmdOutputFlag: -o names the output like get's; it may not
// contradict the second argument; --frame-size's stated default is the
// library's.
func TestCompressCmdOutputFlag(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "m.safetensors")
	copyTestFile(t, torchDir+"tiny_transformer.safetensors", in)
	out := filepath.Join(dir, "packed.lz4")
	if code, stdout, errOut := runCLI(t, "compress", "-c", "lz4", in, "-o", out); code != 0 || !strings.Contains(stdout, "-> "+out) {
		t.Fatalf("compress -o: exit %d %s %s", code, stdout, errOut)
	}
	back := filepath.Join(dir, "back.safetensors")
	if code, _, errOut := runCLI(t, "decompress", out, "--output", back); code != 0 {
		t.Fatalf("decompress --output: exit %d %s", code, errOut)
	}
	a, _ := os.ReadFile(in)
	if b, _ := os.ReadFile(back); !bytes.Equal(a, b) {
		t.Error("round trip through -o differs")
	}
	if code, _, errOut := runCLI(t, "compress", in, filepath.Join(dir, "x.zst"), "-o", filepath.Join(dir, "y.zst")); code != 2 || !strings.Contains(errOut, "two outputs") {
		t.Errorf("two outputs: exit %d %q", code, errOut)
	}
	if n, err := parseSize(defaultFrameSize); err != nil || n != compressed.DefaultFrameSize {
		t.Errorf("--frame-size default %q = %d, %v; the library's is %d", defaultFrameSize, n, err, compressed.DefaultFrameSize)
	}
	_, help, _ := runCLI(t, "compress", "--help")
	if !strings.Contains(help, `(default "`+defaultFrameSize+`")`) {
		t.Errorf("help does not state the default %s:\n%s", defaultFrameSize, help)
	}
}

// TestCompressedOutOfPlaceRefused: the crafted files of testdata/compressed
// (frames swapped, duplicated, hidden inside another frame, cut at a frame
// boundary, dropped) are refused by every command that reads them, with
// exit 1, and decompress leaves no output.
func TestCompressedOutOfPlaceRefused(t *testing.T) {
	const dir = "../../testdata/compressed/"
	b, err := os.ReadFile(dir + "INDEX.json")
	if err != nil {
		t.Fatal(err)
	}
	var idx []struct {
		Name string `json:"name"`
	}
	if err := json.Unmarshal(b, &idx); err != nil || len(idx) == 0 {
		t.Fatalf("INDEX.json: %v", err)
	}
	for _, e := range idx {
		t.Run(e.Name, func(t *testing.T) {
			in := dir + e.Name
			out := filepath.Join(t.TempDir(), "out.safetensors")
			if code, _, errOut := runCLI(t, "decompress", in, "-o", out); code != 1 {
				t.Errorf("decompress: exit %d %s", code, errOut)
			}
			if _, err := os.Stat(out); err == nil {
				t.Error("decompress left an output")
			}
			if code, stdout, errOut := runCLI(t, "stats", in); code == 0 {
				t.Errorf("stats: exit 0\n%s%s", stdout, errOut)
			}
			// The tensor whose frame is out of place is refused (the
			// other may be read: its frame is where it belongs).
			refused := 0
			for _, name := range []string{"a", "b"} {
				if code, _, _ := runCLI(t, "get", in, name, "--slice", "100:200"); code != 0 {
					refused++
				}
			}
			if refused == 0 {
				t.Error("get --slice read both tensors")
			}
		})
	}
}
