//go:build unix

package fault_test

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/gosafetensors/safetensors/internal/fault"
)

// TestCatchTruncatedMapping maps a file, truncates it and reads the lost
// page: without Catch the process dies with SIGBUS.
func TestCatchTruncatedMapping(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f")
	size := 4 * os.Getpagesize()
	if err := os.WriteFile(path, make([]byte, size), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	m, err := syscall.Mmap(int(f.Fd()), 0, size, syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		t.Skip("mmap:", err)
	}
	defer syscall.Munmap(m)
	if err := os.Truncate(path, 0); err != nil {
		t.Fatal(err)
	}
	var sum byte
	err = fault.Catch(func() error {
		for i := 0; i < len(m); i += 512 {
			sum += m[i]
		}
		return nil
	})
	if !errors.Is(err, fault.ErrFault) || !errors.Is(err, syscall.EIO) {
		t.Fatalf("Catch: %v, want ErrFault and EIO", err)
	}
	want := errors.New("mine")
	if err := fault.Catch(func() error { return want }); err != want {
		t.Fatalf("Catch passed %v, want f's error", err)
	}
	defer func() {
		if r := recover(); r != "other" {
			t.Fatalf("recovered %v, want the other panic re-raised", r)
		}
	}()
	fault.Catch(func() error { panic("other") })
}
