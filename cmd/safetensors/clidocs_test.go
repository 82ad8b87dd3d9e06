package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/gosafetensors/safetensors/cmd/safetensors/internal/clidoc"
)

// TestCLIDocs fails while docs/cli differs from the reference the commands
// generate, naming the stale pages and the command that regenerates them.
func TestCLIDocs(t *testing.T) {
	dir := filepath.Join("..", "..", "docs", "cli")
	tmp := t.TempDir()
	clidoc.SetEnvironment(func(k, v string) error { t.Setenv(k, v); return nil })
	if err := clidoc.Write(newRootCmd(), tmp); err != nil {
		t.Fatal(err)
	}
	stale, err := clidoc.Stale(newRootCmd(), dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range stale {
		want, _ := os.ReadFile(filepath.Join(tmp, name))
		got, _ := os.ReadFile(filepath.Join(dir, name))
		t.Errorf("docs/cli/%s is stale (%s); run: go generate ./cmd/safetensors", name, firstDifference(got, want))
	}
}

// firstDifference describes where the committed page got first differs
// from the generated one want.
func firstDifference(got, want []byte) string {
	switch {
	case want == nil:
		return "no command has this page"
	case got == nil:
		return "missing"
	}
	g, w := strings.Split(string(got), "\n"), strings.Split(string(want), "\n")
	for i := 0; i < len(g) || i < len(w); i++ {
		var gl, wl string
		if i < len(g) {
			gl = g[i]
		}
		if i < len(w) {
			wl = w[i]
		}
		if gl != wl {
			return "line " + strconv.Itoa(i+1) + ": committed " + strconv.Quote(gl) + ", generated " + strconv.Quote(wl)
		}
	}
	return "differs"
}
