package torchoracle

import (
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/gosafetensors/safetensors/torch/pickle"
)

// Count returns the count the environment variable name sets (such as
// GOSAFETENSORS_ORACLE_MUTANTS), def when it is unset; anything but a
// non-negative integer fails the test.
func Count(tb testing.TB, name string, def int) int {
	tb.Helper()
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		tb.Fatalf("%s=%q: want a count", name, s)
	}
	return n
}

// ImportableGlobal reports whether module.name, as the oracle reports a
// global (module, a dot, name; the module may itself hold dots, so every
// split is tried), may have imported a module (pickle.MayImport, as the
// pickle walker judges): find_class fails on any other module right after
// the audit event, before importing anything. The name does not matter:
// the module's code runs before getattr looks it up.
func ImportableGlobal(g string) bool {
	for i := strings.IndexByte(g, '.'); i >= 0; {
		if pickle.MayImport(g[:i]) {
			return true
		}
		j := strings.IndexByte(g[i+1:], '.')
		if j < 0 {
			break
		}
		i += 1 + j
	}
	return false
}
