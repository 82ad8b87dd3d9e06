package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// get -o never replaces the file it reads, even with --force: by name,
// through a symbolic link or a hard link (red-team round 5).
func TestGetRefusesToOverwriteItsInput(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "in.safetensors")
	orig, err := os.ReadFile(torchDir + "tiny_transformer.safetensors")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(in, orig, 0o644); err != nil {
		t.Fatal(err)
	}
	sym := filepath.Join(dir, "sym.safetensors")
	hard := filepath.Join(dir, "hard.safetensors")
	if err := os.Symlink(in, sym); err != nil {
		t.Skip(err)
	}
	if err := os.Link(in, hard); err != nil {
		t.Skip(err)
	}
	for _, c := range [][2]string{{in, in}, {sym, in}, {in, sym}, {hard, in}} {
		code, _, errOut := runCLI(t, "get", c[0], "h.0.fc_in.bias", "-o", c[1], "--force", "--raw")
		if code != 2 || !strings.Contains(errOut, "which get reads") {
			t.Errorf("get %s -o %s: exit %d, %s", c[0], c[1], code, errOut)
		}
		if now, _ := os.ReadFile(in); !bytes.Equal(now, orig) {
			t.Fatalf("get %s -o %s changed the input", c[0], c[1])
		}
	}
	// another file is still written with --force
	other := filepath.Join(dir, "other.npy")
	os.WriteFile(other, []byte("old"), 0o644)
	if code, _, errOut := runCLI(t, "get", in, "h.0.fc_in.bias", "-o", other, "--force"); code != 0 {
		t.Fatalf("get -o other --force: exit %d %s", code, errOut)
	}
}
