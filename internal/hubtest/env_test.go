package hubtest_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gosafetensors/safetensors/hfcache"
	"github.com/gosafetensors/safetensors/internal/hubtest"
)

func TestHermetic(t *testing.T) {
	for _, k := range append(hubtest.Variables, "XDG_CACHE_HOME") {
		t.Setenv(k, "/user/real/"+k)
	}
	cleanup, err := hubtest.Hermetic()
	if err != nil {
		t.Fatal(err)
	}
	home := os.Getenv("HF_HOME")
	for _, k := range hubtest.Variables {
		if v := os.Getenv(k); strings.HasPrefix(v, "/user/real/") {
			t.Errorf("%s=%s survived Hermetic", k, v)
		}
	}
	if v := os.Getenv("XDG_CACHE_HOME"); v != "/user/real/XDG_CACHE_HOME" {
		t.Errorf("XDG_CACHE_HOME=%q, want it untouched (GOCACHE derives from it)", v)
	}
	dir, err := hfcache.Dir()
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(home, "hub"); dir != want {
		t.Errorf("hfcache.Dir() = %s, want %s", dir, want)
	}
	if !strings.HasPrefix(home, os.TempDir()) {
		t.Errorf("HF_HOME=%s is not under %s", home, os.TempDir())
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	cleanup()
	if _, err := os.Stat(home); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("cleanup left %s: %v", home, err)
	}
}

// hfPackages are the module's packages that read the Hugging Face
// environment (cache, token, endpoint, offline mode).
var hfPackages = []string{"hfcache", "remote", "source", "download"}

// TestEveryHubPackageIsHermetic fails for a package whose tests link a
// package that reads the Hugging Face environment but whose TestMain does
// not run them in [hubtest.Hermetic]: `go test ./...` must never read or
// write the user's ~/.cache/huggingface nor send the user's token.
func TestEveryHubPackageIsHermetic(t *testing.T) {
	goCmd, err := exec.LookPath("go")
	if err != nil {
		if g := os.Getenv("GOROOT"); g != "" {
			goCmd = filepath.Join(g, "bin", "go")
		}
		if _, err := os.Stat(goCmd); goCmd == "" || err != nil {
			t.Skip("the go command is not on PATH: cannot run go list")
		}
	}
	cmd := exec.Command(goCmd, "list", "-test", "-json=ImportPath,Dir,Deps,TestGoFiles,XTestGoFiles,ForTest,Module", "github.com/gosafetensors/safetensors/...")
	cmd.Dir = "../.."
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.String())
	}
	type pkg struct {
		ImportPath, Dir, ForTest  string
		Deps                      []string
		TestGoFiles, XTestGoFiles []string
		Module                    *struct{ Path string }
	}
	var mod string
	dirs := map[string]pkg{}     // import path → the package (with its test files)
	reaches := map[string]bool{} // import path → its test binary links an hfPackage
	for dec := json.NewDecoder(bytes.NewReader(out)); ; {
		var p pkg
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		if p.Module != nil {
			mod = p.Module.Path
		}
		if base, ok := strings.CutSuffix(p.ImportPath, ".test"); ok {
			for _, d := range p.Deps {
				d, _, _ = strings.Cut(d, " ")
				for _, h := range hfPackages {
					if d == mod+"/"+h {
						reaches[base] = true
					}
				}
			}
			continue
		}
		if p.ForTest == "" && !strings.Contains(p.ImportPath, " ") {
			dirs[p.ImportPath] = p
		}
	}
	if len(reaches) == 0 {
		t.Fatalf("go list found no test binary linking %v: the check is broken", hfPackages)
	}
	for ip := range reaches {
		p := dirs[ip]
		if p.ImportPath == mod+"/internal/hubtest" {
			continue // its own test sets the variables itself
		}
		ok := false
		for _, f := range append(p.TestGoFiles, p.XTestGoFiles...) {
			b, err := os.ReadFile(filepath.Join(p.Dir, f))
			if err != nil {
				t.Fatal(err)
			}
			if bytes.Contains(b, []byte("func TestMain(")) && (bytes.Contains(b, []byte("hubtest.Main(")) || bytes.Contains(b, []byte("hubtest.Hermetic("))) {
				ok = true
			}
		}
		if !ok {
			t.Errorf("%s: its tests link a package reading HF_HOME/HF_HUB_CACHE/HF_TOKEN but have no TestMain calling hubtest.Main or hubtest.Hermetic (add hermetic_test.go: func TestMain(m *testing.M) { os.Exit(hubtest.Main(m)) })", strings.TrimPrefix(ip, mod+"/"))
		}
	}
}
