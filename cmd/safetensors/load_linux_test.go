//go:build linux

package main

import (
	"os"
	"path/filepath"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// TestLoadBufferedIO: by default a cold local model is read with O_DIRECT
// (its pages stay out of the page cache); with --buffered-io through the
// cache (they are in it afterwards).
func TestLoadBufferedIO(t *testing.T) {
	dir := writeLoadModel(t)
	names, _ := filepath.Glob(filepath.Join(dir, "*.safetensors"))
	cached := func() float64 {
		var in, all int
		for _, n := range names {
			f, err := os.Open(n)
			if err != nil {
				t.Fatal(err)
			}
			st, _ := f.Stat()
			m, err := unix.Mmap(int(f.Fd()), 0, int(st.Size()), unix.PROT_READ, unix.MAP_SHARED)
			f.Close()
			if err != nil {
				t.Fatal(err)
			}
			vec := make([]byte, (len(m)+os.Getpagesize()-1)/os.Getpagesize())
			unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&m[0])), uintptr(len(m)), uintptr(unsafe.Pointer(&vec[0])))
			unix.Munmap(m)
			for _, v := range vec {
				all++
				in += int(v & 1)
			}
		}
		return float64(in) / float64(all)
	}
	drop := func() {
		for _, n := range names {
			f, err := os.Open(n)
			if err != nil {
				t.Fatal(err)
			}
			unix.Fdatasync(int(f.Fd()))
			unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED)
			f.Close()
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
