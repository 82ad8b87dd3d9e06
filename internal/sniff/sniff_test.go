package sniff

import (
	"bytes"
	"os"
	"strings"
	"testing"

	"github.com/gosafetensors/safetensors"
)

func TestDiagnose(t *testing.T) {
	for _, tc := range []struct {
		name, content string
		want          []string
	}{
		{"lfs", "version https://git-lfs.github.com/spec/v1\noid sha256:4d7a214614ab2935c943f9e0ff69d22eadbb8f32b1258daaa5e2ca24d17e2393\nsize 548105171\n",
			[]string{"Git LFS pointer, not the file: run git lfs pull", "548105171 bytes (522.7 MiB)", "sha256:4d7a"}},
		{"html", "\n  <!DOCTYPE html>\n<html lang=en><head>\n<title>\n  Hugging Face – Login\n</title>", []string{"HTML page", `"Hugging Face – Login"`}},
		{"html-no-doctype", "<html><body>403 Forbidden</body></html>", []string{"HTML page"}},
		{"json-error", `{"error":"Access to model meta-llama/Llama-2-7b is restricted."}`, []string{"JSON error response", "is restricted"}},
		{"json-index", `{"metadata": {"total_size": 1}, "weight_map": {"a": "model-00001-of-00002.safetensors"}}`, []string{"index of a sharded checkpoint"}},
		{"zip", "PK\x03\x04\x00\x00\x08\x08\x00\x00archive/data.pkl", []string{"PyTorch checkpoint", "safetensors convert"}},
		{"pickle", "\x80\x04\x95\x10\x00\x00\x00\x00\x00\x00\x00}", []string{"pickle (protocol 4)", "safetensors convert"}},
		{"legacy", string(legacyTorchMagic) + ".\x80\x02}", []string{"legacy torch.save format", "safetensors convert"}},
		{"gzip", "\x1f\x8b\x08\x00\x00\x00\x00\x00", []string{"gzip"}},
		{"text", "Entry not found", []string{"text file", `"Entry not found"`}},
		{"short", "abc", []string{"only 3 bytes"}},
	} {
		got := Diagnose([]byte(tc.content), int64(len(tc.content)))
		for _, w := range tc.want {
			if !strings.Contains(got, w) {
				t.Errorf("%s: %q lacks %q", tc.name, got, w)
			}
		}
	}
	if got := Diagnose(nil, 0); !strings.Contains(got, "empty") {
		t.Errorf("empty file: %q", got)
	}
}

func TestDiagnoseQuietOnSafetensors(t *testing.T) {
	for _, f := range []string{"../../testdata/torch/tiny_transformer.safetensors", "../../testdata/safetensors/files/offsets_gap.safetensors"} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if h := Diagnose(b[:min(len(b), PrefixSize)], int64(len(b))); h != "" {
			t.Errorf("%s: unexpected hint %q", f, h)
		}
	}
}

func TestDiagnoseEscapesControlCharacters(t *testing.T) {
	got := Diagnose([]byte(`{"error":"x`+"\x1b[2J"+`"}`), 20)
	if strings.ContainsRune(got, 0x1b) {
		t.Errorf("escape character reached the hint: %q", got)
	}
}

func TestExplainTruncated(t *testing.T) {
	b, err := os.ReadFile("../../testdata/torch/tiny_transformer.safetensors")
	if err != nil {
		t.Fatal(err)
	}
	cut := b[:len(b)-1000]
	_, rerr := safetensors.NewReader(bytes.NewReader(cut), int64(len(cut)))
	if rerr == nil {
		t.Fatal("truncated file accepted")
	}
	got := Explain(bytes.NewReader(cut), int64(len(cut)), rerr)
	for _, w := range []string{"truncated download?", "9112 bytes", "8112 bytes", "1000 bytes"} {
		if !strings.Contains(got, w) {
			t.Errorf("%q lacks %q", got, w)
		}
	}
	// Extra bytes after the data are explained too.
	long := append(bytes.Clone(b), 0, 0, 0)
	_, rerr = safetensors.NewReader(bytes.NewReader(long), int64(len(long)))
	if got := Explain(bytes.NewReader(long), int64(len(long)), rerr); !strings.Contains(got, "3 bytes more") {
		t.Errorf("trailing data: %q", got)
	}
	if Explain(bytes.NewReader(b), int64(len(b)), nil) != "" {
		t.Error("hint without an error")
	}
}

func TestExplainRealFiles(t *testing.T) {
	for f, want := range map[string]string{
		"../../testdata/torch/tiny_transformer.bin":        "PyTorch checkpoint",
		"../../testdata/torch/tiny_transformer_legacy.bin": "legacy torch.save",
		"../../testdata/torch/dtypes.pt":                   "PyTorch checkpoint",
	} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		_, rerr := safetensors.NewReader(bytes.NewReader(b), int64(len(b)))
		if got := Explain(bytes.NewReader(b), int64(len(b)), rerr); !strings.Contains(got, want) {
			t.Errorf("%s: %q lacks %q", f, got, want)
		}
	}
}

func TestTruncatedSizes(t *testing.T) {
	if got := Truncated(2<<30, 1<<30); !strings.Contains(got, "2147483648 bytes (2.0 GiB)") || !strings.Contains(got, "50.0% present") {
		t.Errorf("%q", got)
	}
	if Truncated(10, 10) != "" {
		t.Error("hint for a complete file")
	}
}
