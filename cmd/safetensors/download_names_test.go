package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gosafetensors/safetensors/internal/pacedserver"
	"github.com/gosafetensors/safetensors/internal/s3test"
)

// TestDownloadUnsafeNames: one rule for every source (docs/download.md):
// a file selected for download whose server-chosen name may not be
// written (.git/config, out of the folder) fails the download, exit 2,
// naming it, in text and --json, before anything is written; the user's
// .git/config is untouched.
func TestDownloadUnsafeNames(t *testing.T) {
	const cfg = "[core]\n\tbare = false\n"
	newDir := func(t *testing.T) (dir, gitCfg string) {
		dir = t.TempDir()
		gitCfg = filepath.Join(dir, ".git", "config")
		os.MkdirAll(filepath.Dir(gitCfg), 0o777)
		os.WriteFile(gitCfg, []byte(cfg), 0o666)
		return dir, gitCfg
	}
	check := func(t *testing.T, what, name, dir, gitCfg string, args ...string) {
		t.Helper()
		for _, js := range []bool{false, true} {
			a := append([]string{"download"}, args...)
			a = append(a, "--local-dir", dir)
			if js {
				a = append(a, "--json")
			}
			code, out, errs := runCLI(t, a...)
			if code != 2 || !strings.Contains(errs, `"`+name+`"`) || !strings.Contains(errs, "unsafe file name") {
				t.Fatalf("%s %s (json %v): exit %d, want 2 naming it\n%s%s", what, name, js, code, out, errs)
			}
			if b, _ := os.ReadFile(gitCfg); string(b) != cfg {
				t.Fatalf("%s %s: .git/config changed: %q", what, name, b)
			}
			entries, _ := os.ReadDir(dir)
			if len(entries) != 1 {
				t.Fatalf("%s %s: the download wrote into %s", what, name, dir)
			}
		}
	}
	for _, name := range []string{".git/config", "../../escaped.json"} {
		files := map[string]pacedserver.File{
			"/model.safetensors": {Content: strings.NewReader("m"), Size: 1},
			"/" + name:           {Content: strings.NewReader("[core]\n"), Size: 7},
		}
		served, err := pacedserver.Hub("org/model", dlCommit, files)
		if err != nil {
			t.Fatal(err)
		}
		s, err := pacedserver.Start(pacedserver.Config{}, served)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		hubEnv(t, s)
		dir, gitCfg := newDir(t)
		check(t, "hub", name, dir, gitCfg, "hf://org/model")
	}
	srv := s3test.Start(t, "bkt")
	srv.Put(t, "bkt", "up/model.safetensors", []byte("m"))
	for _, name := range []string{".git/config", "../../escaped.json"} {
		srv.Put(t, "bkt", "up/"+name, []byte("[core]\n"))
		dir, gitCfg := newDir(t)
		check(t, "bucket", name, dir, gitCfg, "s3://bkt/up/?"+srv.Query())
		srv.Backend.DeleteObject("bkt", "up/"+name)
	}
}
