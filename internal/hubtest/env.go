package hubtest

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// Variables lists the environment variables through which the module (and
// huggingface_hub in a child python3) finds a Hugging Face cache, token,
// endpoint or offline mode. [Hermetic] sets or clears every one of them.
// XDG_CACHE_HOME is not among them: HF_HOME takes precedence over it, and
// the go command that tests run derives GOCACHE from it (a fresh one would
// rebuild the standard library in every such test).
var Variables = []string{
	"HF_HOME", "HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE",
	"HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HF_TOKEN_PATH",
	"HF_ENDPOINT", "HF_HUB_OFFLINE", "HF_XET_CACHE", "HF_ASSETS_CACHE",
}

// Hermetic points the process's Hugging Face environment at a new
// temporary directory, so that a test never reads or writes the user's
// real cache (~/.cache/huggingface, $HF_HOME, $HF_HUB_CACHE) or sends
// the user's token: HF_HOME names a fresh empty folder, every other
// variable of [Variables] is cleared (a test sets what it needs with
// t.Setenv) and HF_HUB_DISABLE_TELEMETRY is 1. HOME and XDG_CACHE_HOME
// are left alone: the go command run by tests keeps its caches.
//
// It is meant for TestMain, before m.Run; cleanup removes the directory.
func Hermetic() (cleanup func(), err error) {
	dir, err := os.MkdirTemp("", "hubtest-env-")
	if err != nil {
		return nil, fmt.Errorf("hubtest: hermetic environment: %w", err)
	}
	for _, k := range Variables {
		if err := os.Unsetenv(k); err != nil {
			os.RemoveAll(dir)
			return nil, fmt.Errorf("hubtest: hermetic environment: %w", err)
		}
	}
	set := map[string]string{
		"HF_HOME":                  filepath.Join(dir, "hf-home"),
		"HF_HUB_DISABLE_TELEMETRY": "1",
	}
	for k, v := range set {
		if err := os.Setenv(k, v); err != nil {
			os.RemoveAll(dir)
			return nil, fmt.Errorf("hubtest: hermetic environment: %w", err)
		}
	}
	return func() { os.RemoveAll(dir) }, nil
}

// Main is a TestMain for a package with no other set-up: it runs m in a
// [Hermetic] environment and returns the exit code.
//
//	func TestMain(m *testing.M) { os.Exit(hubtest.Main(m)) }
func Main(m *testing.M) int {
	cleanup, err := Hermetic()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	defer cleanup()
	return m.Run()
}
