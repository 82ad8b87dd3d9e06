//go:build linux

package main

import (
	"path/filepath"
	"testing"

	"github.com/gosafetensors/safetensors/internal/pagecache"
)

// TestLoadBufferedIO: by default a cold local model is read with O_DIRECT
// (its pages stay out of the page cache); with --buffered-io through the
// cache (they are in it afterwards).
func TestLoadBufferedIO(t *testing.T) {
	dir := writeLoadModel(t)
	names, _ := filepath.Glob(filepath.Join(dir, "*.safetensors"))
	cached := func() float64 {
		c, err := pagecache.Resident(names...)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	drop := func() {
		if err := pagecache.Drop(names...); err != nil {
			t.Fatal(err)
		}
		if c := cached(); c > 0.1 {
			t.Skipf("the page cache keeps %.0f%% of the files after POSIX_FADV_DONTNEED", 100*c)
		}
	}
	for _, tc := range []struct {
		args   []string
		cached bool
	}{
		{nil, false},
		{[]string{"--buffered-io"}, true},
	} {
		drop()
		if code, _, errOut := runCLI(t, append([]string{"load", dir, "--chunk", "1MiB"}, tc.args...)...); code != 0 {
			t.Fatalf("%v: exit %d: %s", tc.args, code, errOut)
		}
		if c := cached(); (c > 0.5) != tc.cached {
			t.Errorf("load %v: %.0f%% of the model's pages cached afterwards", tc.args, 100*c)
		}
	}
}
