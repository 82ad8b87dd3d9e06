package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// validateResult is one element of validate --json as its schema spells
// it (docs/json.md).
type validateResult struct {
	File        string   `json:"file"`
	Status      string   `json:"status"`
	Valid       bool     `json:"valid"`
	Error       *string  `json:"error"`
	Variant     *string  `json:"variant"`
	Tensor      *string  `json:"tensor"`
	Offset      *int64   `json:"offset"`
	Hint        *string  `json:"hint"`
	FileSize    *int64   `json:"file_size"`
	TensorCount *int     `json:"tensor_count"`
	DataBytes   *int64   `json:"data_bytes"`
	Warnings    []string `json:"warnings"`
}

// TestValidateVerdicts runs validate over every verdict case: exit 0 for
// the valid ones, 1 for the invalid ones, naming the variant.
func TestValidateVerdicts(t *testing.T) {
	b, err := os.ReadFile("../../testdata/safetensors/expected.json")
	if err != nil {
		t.Fatal(err)
	}
	var cases map[string]struct{ Expect, Variant string }
	if err := json.Unmarshal(b, &cases); err != nil {
		t.Fatal(err)
	}
	for name, c := range cases {
		code, out, errOut := runCLI(t, "validate", filesDir+name+".safetensors")
		switch c.Expect {
		case "ok":
			if code != 0 || !strings.HasPrefix(out, "ok   ") {
				t.Errorf("%s: exit %d, %q %q", name, code, out, errOut)
			}
		case "error":
			if code != 1 || !strings.HasPrefix(out, "FAIL ") || !strings.Contains(out, c.Variant) {
				t.Errorf("%s: exit %d, want 1 naming %s: %q %q", name, code, c.Variant, out, errOut)
			}
		}
	}
}

func TestValidateExitCodes(t *testing.T) {
	good := filesDir + "single_f32.safetensors"
	bad := filesDir + "offsets_gap.safetensors"
	missing := filesDir + "does_not_exist.safetensors"
	for _, tc := range []struct {
		args []string
		code int
	}{
		{[]string{good, torchDir + "tiny_transformer.safetensors"}, 0},
		{[]string{good, bad}, 1},
		{[]string{missing}, 2},
		{[]string{bad, missing, good}, 1}, // invalid outranks unreadable, as in every command
		{[]string{missing, good}, 2},
		{[]string{"--full", torchDir + "dtypes.safetensors"}, 0},
	} {
		code, out, errOut := runCLI(t, append([]string{"validate"}, tc.args...)...)
		if code != tc.code {
			t.Errorf("validate %v: exit %d, want %d\n%s%s", tc.args, code, tc.code, out, errOut)
		}
	}
	code, out, _ := runCLI(t, "validate", good, bad, missing)
	want := []string{
		"ok   " + good + " (1 tensor, 88 B)",
		"FAIL " + bad + `: tensor "b": data_offsets [8 12] leave a gap after byte 4 (InvalidOffset at byte 61)`,
		"ERR  " + missing + ": no such file or directory",
	}
	if code != 1 || strings.TrimSpace(out) != strings.Join(want, "\n") {
		t.Errorf("exit %d, output:\n%s\nwant:\n%s", code, out, strings.Join(want, "\n"))
	}
	// A directory is searched for *.safetensors files.
	code, out, _ = runCLI(t, "validate", "-q", torchDir)
	if code != 0 || out != "" {
		t.Errorf("validate -q %s: exit %d, %q", torchDir, code, out)
	}
}

func TestValidateJSON(t *testing.T) {
	code, out, _ := runCLI(t, "validate", "--json", filesDir+"single_f32.safetensors", filesDir+"offsets_gap.safetensors",
		filesDir+"nope.safetensors", filesDir+"short_data.safetensors")
	if code != 1 {
		t.Errorf("exit %d", code)
	}
	var raw []map[string]json.RawMessage
	if err := json.Unmarshal([]byte(out), &raw); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, r := range raw {
		for _, k := range []string{"file", "status", "valid", "error", "variant", "tensor", "offset", "hint", "file_size", "tensor_count", "data_bytes", "warnings"} {
			if _, ok := r[k]; !ok {
				t.Errorf("result lacks %q: %s", k, out)
			}
		}
	}
	var res []validateResult
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatal(err)
	}
	if len(res) != 4 {
		t.Fatalf("%d results", len(res))
	}
	if r := res[0]; !r.Valid || r.Status != "ok" || r.Error != nil || *r.TensorCount != 1 {
		t.Errorf("valid file: %+v", r)
	}
	if r := res[1]; r.Valid || r.Status != "invalid" || *r.Variant != "InvalidOffset" || *r.Tensor != "b" || *r.Offset != 61 {
		t.Errorf("invalid file: %+v", r)
	}
	if r := res[2]; r.Valid || r.Status != "unreadable" || r.Error == nil {
		t.Errorf("missing file: %+v", r)
	}
	if r := res[3]; r.Hint == nil || !strings.Contains(*r.Hint, "truncated download?") ||
		!strings.Contains(*r.Hint, "84 bytes") || !strings.Contains(*r.Hint, "83 bytes") {
		t.Errorf("truncated file: %+v", r)
	}
}

func TestValidateHints(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	lfs := write("lfs.safetensors", "version https://git-lfs.github.com/spec/v1\noid sha256:4d7a214614ab2935c943f9e0ff69d22eadbb8f32b1258daaa5e2ca24d17e2393\nsize 548105171\n")
	html := write("html.safetensors", "<!DOCTYPE html>\n<html><head><title>Access to model is restricted</title></head></html>")
	jsonErr := write("json.safetensors", `{"error":"Repository Not Found for url: https://huggingface.co/x/y/resolve/main/model.safetensors."}`)
	for _, tc := range []struct{ file, want string }{
		{lfs, "Git LFS pointer, not the file: run git lfs pull"},
		{lfs, "548105171 bytes (522.7 MiB)"},
		{html, "HTML page"},
		{html, "Access to model is restricted"},
		{jsonErr, "JSON error response"},
		{torchDir + "tiny_transformer.bin", "PyTorch checkpoint"},
		{torchDir + "tiny_transformer_legacy.bin", "use `safetensors convert`"},
		{filesDir + "short_data.safetensors", "truncated download?"},
		{filesDir + "empty_file.safetensors", "empty"},
	} {
		code, out, _ := runCLI(t, "validate", tc.file)
		first, rest, _ := strings.Cut(out, "\n")
		if code != 1 || !strings.Contains(first, tc.want) || !strings.HasPrefix(rest, "     details: ") {
			t.Errorf("%s: exit %d, want the diagnosis %q first, then the details:\n%s", tc.file, code, tc.want, out)
		}
	}
}

func TestValidateFullCountsNaN(t *testing.T) {
	code, out, _ := runCLI(t, "validate", "--full", torchDir+"dtypes.safetensors")
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	if !strings.Contains(out, "warn "+torchDir+"dtypes.safetensors: tensor f32: 1 NaN and 2 infinite of 8 values") {
		t.Errorf("no NaN warning:\n%s", out)
	}
	if !strings.Contains(out, "tensor c64: 0 NaN and 1 infinite of 3 values") {
		t.Errorf("complex values not counted as pairs:\n%s", out)
	}
}

func TestValidateWarnsUnknownFields(t *testing.T) {
	// A file whose tensor entry has an unknown field is valid, with a warning.
	dir := t.TempDir()
	hdr := `{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1],"extra":1}}`
	for len(hdr)%8 != 0 {
		hdr += " "
	}
	b := []byte{byte(len(hdr)), 0, 0, 0, 0, 0, 0, 0}
	b = append(append(b, hdr...), 7)
	p := filepath.Join(dir, "extra.safetensors")
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, _ := runCLI(t, "validate", p)
	if code != 0 || !strings.Contains(out, "\nwarn "+p+": ") {
		t.Errorf("exit %d, want a warn line:\n%s", code, out)
	}
}
