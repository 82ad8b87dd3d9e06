package audit_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gosafetensors/safetensors/audit"
)

// Under a root, local paths are relative to it and nothing outside it is
// read: not by "..", not by an absolute path, not through a symbolic link,
// whether named or met in a walk or as an index's shard.
func TestScanRoot(t *testing.T) {
	outside := t.TempDir()
	copyFile(t, evilDir+"torch_zip_os_system.bin", filepath.Join(outside, "evil.bin"))
	rootDir := t.TempDir()
	copyFile(t, torchDir+"tiny_transformer.bin", filepath.Join(rootDir, "ok.bin"))
	if err := os.Symlink(filepath.Join(outside, "evil.bin"), filepath.Join(rootDir, "link.bin")); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(rootDir, "m"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(rootDir, "m", "pytorch_model.bin.index.json"), `{"weight_map": {"a": "link.bin"}}`)
	if err := os.Symlink("../link.bin", filepath.Join(rootDir, "m", "link.bin")); err != nil {
		t.Fatal(err)
	}
	root, err := os.OpenRoot(rootDir)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	opt := audit.WithRoot(root)

	if r := scanAll(t, "ok.bin", opt); len(r) != 1 || r[0].Verdict != audit.Clean || r[0].Path != "ok.bin" {
		t.Fatalf("inside the root: %+v", r[0])
	}
	rel, _ := filepath.Rel(rootDir, filepath.Join(outside, "evil.bin"))
	for _, loc := range []string{rel, filepath.Join(outside, "evil.bin"), "link.bin", "m/pytorch_model.bin.index.json", "../" + filepath.Base(outside) + "/evil.bin"} {
		for _, r := range scanAll(t, loc, opt) {
			if r.Verdict != audit.Error || len(r.Globals) != 0 {
				t.Errorf("%s: %s %+v, want an error and nothing read", loc, r.Verdict, r.Globals)
			}
		}
	}
	got := verdicts(scanAll(t, ".", opt))
	if got["ok.bin"] != "clean" || got["link.bin"] != "error" || got[filepath.Join("m", "link.bin")] != "error" || len(got) != 3 {
		t.Errorf("walk of the root: %v", got)
	}
	for _, r := range scanAll(t, "link.bin", opt) {
		if !strings.Contains(r.Error, "link.bin") {
			t.Errorf("error does not name the file: %s", r.Error)
		}
	}
}
