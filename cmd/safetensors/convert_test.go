package main

import (
	"archive/zip"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gosafetensors/safetensors"
)

func copyTestFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o666); err != nil {
		t.Fatal(err)
	}
}

func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	slices.Sort(names)
	return names
}

func tensorNames(t *testing.T, path string) ([]string, map[string]string) {
	t.Helper()
	f, err := safetensors.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	return f.Names(), f.Metadata
}

func TestConvertCmd(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "pytorch_model.bin")
	copyTestFile(t, torchDir+"tied_weights.pt", in)

	code, out, errOut := runCLI(t, "convert", in)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	want := filepath.Join(dir, "model.safetensors")
	if !strings.Contains(out, "converted "+in+" -> "+want+": 4 tensors, 256 B, 1 alias removed, verified") {
		t.Errorf("stdout %q", out)
	}
	if !strings.Contains(errOut, "model.embed_tokens.weight is the same tensor as lm_head.weight") {
		t.Errorf("stderr %q", errOut)
	}
	names, md := tensorNames(t, want)
	if len(names) != 4 || md["model.embed_tokens.weight"] != "lm_head.weight" || md["format"] != "pt" {
		t.Errorf("output %v %v", names, md)
	}

	// The output exists now: refused with exit 2 unless --force.
	code, _, errOut = runCLI(t, "convert", in)
	if code != 2 || !strings.Contains(errOut, "--force") {
		t.Errorf("existing output: exit %d, %q", code, errOut)
	}
	code, _, errOut = runCLI(t, "convert", "--force", "--keep-aliases", in)
	if code != 0 {
		t.Fatalf("--force: exit %d %s", code, errOut)
	}
	if names, md := tensorNames(t, want); len(names) != 5 || len(md) != 1 {
		t.Errorf("--keep-aliases: %v %v", names, md)
	}
	code, _, errOut = runCLI(t, "convert", "-f", "--prefer", "model.embed_tokens.weight", "--no-verify", in, filepath.Join(dir, "p.safetensors"))
	if code != 0 {
		t.Fatalf("--prefer: exit %d %s", code, errOut)
	}
	if _, md := tensorNames(t, filepath.Join(dir, "p.safetensors")); md["lm_head.weight"] != "model.embed_tokens.weight" {
		t.Errorf("--prefer: metadata %v", md)
	}
	if got := dirNames(t, dir); !slices.Equal(got, []string{"model.safetensors", "p.safetensors", "pytorch_model.bin"}) {
		t.Errorf("dir holds %v", got)
	}
}

func TestConvertCmdOutDirAndKey(t *testing.T) {
	dir := t.TempDir()
	code, out, errOut := runCLI(t, "convert", "--key", "optimizer.state", torchDir+"checkpoint_nested.pt", dir)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if !strings.Contains(out, "from optimizer.state") || !slices.Equal(dirNames(t, dir), []string{"checkpoint_nested.safetensors"}) {
		t.Errorf("stdout %q, dir %v", out, dirNames(t, dir))
	}
	code, _, errOut = runCLI(t, "convert", "--key", "nope", torchDir+"checkpoint_nested.pt", filepath.Join(dir, "x.safetensors"))
	if code != 1 || !strings.Contains(errOut, `no entry "nope"`) {
		t.Errorf("missing key: exit %d %q", code, errOut)
	}
}

func TestConvertCmdDryRun(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "c.pt")
	copyTestFile(t, torchDir+"checkpoint_nested.pt", in)
	code, out, errOut := runCLI(t, "convert", "-n", in)
	if code != 0 {
		t.Fatalf("exit %d %s", code, errOut)
	}
	for _, s := range []string{"would convert", "h.0.q_proj.weight", "skipped 48 entries (optimizer state)", "from state_dict"} {
		if !strings.Contains(out, s) {
			t.Errorf("dry run output lacks %q:\n%s", s, out)
		}
	}
	if got := dirNames(t, dir); len(got) != 1 {
		t.Errorf("dry run wrote %v", got)
	}
}

func TestConvertCmdRefuses(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		in, mention string
		code        int
	}{
		{"../../testdata/malicious/torch_zip_os_system.bin", "posix.system", 1},
		{"../../testdata/malicious/reduce_builtins_eval_p2.pkl", "eval", 1},
		{"../../testdata/unsupported/whole_module.pt", "__main__.TinyConvNet", 1},
		{"../../testdata/unsupported/sparse_coo.pt", "_rebuild_sparse_tensor", 1},
		{"../../testdata/broken/truncated_zip_half.bin", "truncated_zip_half.bin", 1},
		{"../../testdata/broken/empty_file.pt", "empty", 1},
		{filepath.Join(dir, "missing.pt"), "no such file", 2},
	} {
		code, out, errOut := runCLI(t, "convert", tc.in, filepath.Join(dir, "out.safetensors"))
		if code != tc.code || !strings.Contains(errOut, tc.mention) || out != "" {
			t.Errorf("%s: exit %d (want %d), stdout %q, stderr %q (want mention of %q)", tc.in, code, tc.code, out, errOut, tc.mention)
		}
	}
	if got := dirNames(t, dir); len(got) != 0 {
		t.Errorf("refused conversions left %v", got)
	}
	if _, err := os.Stat("/tmp/pwned_marker"); err == nil {
		t.Error("/tmp/pwned_marker exists")
	}
}

func TestConvertCmdDir(t *testing.T) {
	dir := t.TempDir()
	copyTestFile(t, torchDir+"tiny_transformer.bin", filepath.Join(dir, "pytorch_model.bin"))
	copyTestFile(t, "../../testdata/malicious/raw_pickle_os_system.bin", filepath.Join(dir, "training_args.bin"))
	code, out, errOut := runCLI(t, "convert", dir)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if !strings.Contains(out, "model.safetensors: 35 tensors") || !strings.Contains(errOut, "not converted: "+filepath.Join(dir, "training_args.bin")) {
		t.Errorf("stdout %q stderr %q", out, errOut)
	}
	if got := dirNames(t, dir); !slices.Equal(got, []string{"model.safetensors", "pytorch_model.bin", "training_args.bin"}) {
		t.Errorf("dir holds %v", got)
	}
}

func TestConvertCmdUsage(t *testing.T) {
	for _, args := range [][]string{{"convert"}, {"convert", "a", "b", "c"}, {"convert", "--bogus", "x"}} {
		if code, _, _ := runCLI(t, args...); code != 2 {
			t.Errorf("%v: exit %d, want 2", args, code)
		}
	}
}

// TestConvertCmdBadOptions: flag values convert refuses are usage errors
// (exit 2) worded with the flags, and nothing is written.
func TestConvertCmdBadOptions(t *testing.T) {
	in := torchDir + "tied_weights.pt"
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--sha256", "--no-verify"}, "cannot go with --no-verify"},
		{[]string{"--prefer", ""}, "--prefer: empty name"},
		{[]string{"--discard", "lm_head.weight", "--discard", "lm_head.weight"}, `--discard: "lm_head.weight" given twice`},
		{[]string{"--prefer", "lm_head.weight", "--discard", "lm_head.weight"}, `"lm_head.weight" is both preferred and discarded`},
		{[]string{"--max-output", "0"}, "--max-output"},
		{[]string{"--max-output", "-2"}, "--max-output"},
	} {
		dir := t.TempDir()
		args := append(append([]string{"convert"}, tc.args...), in, filepath.Join(dir, "x.safetensors"))
		code, _, errOut := runCLI(t, args...)
		if code != 2 || !strings.Contains(errOut, tc.want) {
			t.Errorf("%v: exit %d %q, want 2 and %q", tc.args, code, errOut, tc.want)
		}
		if got := dirNames(t, dir); len(got) != 0 {
			t.Errorf("%v: wrote %v", tc.args, got)
		}
	}
}

func TestConvertJSON(t *testing.T) {
	out := filepath.Join(t.TempDir(), "tw.safetensors")
	code, stdout, stderr := runCLI(t, "convert", "--json", "--sha256", "../../testdata/torch/tied_weights.pt", out)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var got []struct {
		Output  string `json:"output"`
		Tensors []struct {
			Name   string `json:"name"`
			SHA256 string `json:"sha256"`
		} `json:"tensors"`
		Removed []struct {
			Name string `json:"name"`
			Kept string `json:"kept"`
		} `json:"removed"`
		Verified bool `json:"verified"`
	}
	if err := json.Unmarshal([]byte(stdout), &got); err != nil {
		t.Fatalf("%v\n%s", err, stdout)
	}
	if len(got) != 1 || got[0].Output != out || !got[0].Verified || len(got[0].Removed) != 1 {
		t.Fatalf("%+v", got)
	}
	// Digests agree with the sidecar torch's own bytes were hashed into.
	want := map[string]string{"lm_head.bias": "d3b862b76b53a2f65a9ea5e158bc558439acae2cd6c5a97b0aab2de3e7b8b4f8"}
	for _, tn := range got[0].Tensors {
		if w, ok := want[tn.Name]; ok && tn.SHA256 != w {
			t.Errorf("%s: sha256 %s, sidecar %s", tn.Name, tn.SHA256, w)
		}
	}
}

// A zip member nothing refers to is not converted, and convert says so.
func TestConvertNotesUnreferencedMembers(t *testing.T) {
	src, err := zip.OpenReader(torchDir + "tiny_transformer.bin")
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	dir := t.TempDir()
	in := filepath.Join(dir, "extra.bin")
	f, err := os.Create(in)
	if err != nil {
		t.Fatal(err)
	}
	zw := zip.NewWriter(f)
	for _, e := range src.File {
		raw, err := e.OpenRaw()
		if err != nil {
			t.Fatal(err)
		}
		w, err := zw.CreateRaw(&e.FileHeader)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(w, raw)
	}
	w, _ := zw.CreateHeader(&zip.FileHeader{Name: "tiny_transformer/data/notes.bin", Method: zip.Store})
	w.Write([]byte("not a storage"))
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	code, _, errOut := runCLI(t, "convert", in, filepath.Join(dir, "out.safetensors"))
	if code != 0 || !strings.Contains(errOut, "tiny_transformer/data/notes.bin") || !strings.Contains(errOut, "not converted") {
		t.Fatalf("exit %d\n%s", code, errOut)
	}
}

// Inputs that are not checkpoints get plain words, the same hints as
// validate, and no opcode jargon.
func TestConvertSaysWhatTheInputIs(t *testing.T) {
	dir := t.TempDir()
	page := filepath.Join(dir, "pytorch_model.bin")
	os.WriteFile(page, []byte("<!DOCTYPE html><html><head><title>Sign in</title></head></html>"), 0o644)
	lfs := filepath.Join(dir, "model.pt")
	os.WriteFile(lfs, []byte("version https://git-lfs.github.com/spec/v1\noid sha256:abc\nsize 123456789\n"), 0o644)
	for _, c := range []struct{ in, want string }{
		{page, "HTML page"},
		{lfs, "Git LFS pointer"},
		{torchDir + "tiny_transformer.safetensors", "already a safetensors file"},
	} {
		code, _, errOut := runCLI(t, "convert", c.in, filepath.Join(dir, "out.safetensors"))
		if code != 1 || !strings.Contains(errOut, c.want) || strings.Contains(errOut, "opcode") {
			t.Errorf("convert %s: exit %d\n%s", c.in, code, errOut)
		}
	}
}
