package pagecache

import (
	"os"
	"path/filepath"
	"testing"
)

// TestDropAndRead: a file just written is cached; dropped, it is not (or
// the test says why it cannot tell); read again, it is.
func TestDropAndRead(t *testing.T) {
	name := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(name, make([]byte, 1<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	if r, err := Resident(name); err != nil || r < 0.5 {
		t.Fatalf("just written: %.2f cached, %v", r, err)
	}
	if err := Drop(name); err != nil {
		t.Fatal(err)
	}
	r, err := Resident(name)
	if err != nil {
		t.Fatal(err)
	}
	if r > 0.1 {
		t.Skipf("the kernel keeps %.0f%% of the file after POSIX_FADV_DONTNEED", 100*r)
	}
	if _, err := os.ReadFile(name); err != nil {
		t.Fatal(err)
	}
	if r, err := Resident(name); err != nil || r < 0.5 {
		t.Fatalf("read again: %.2f cached, %v", r, err)
	}
	if _, err := Resident(filepath.Join(t.TempDir(), "missing")); err == nil {
		t.Fatal("a missing file: no error")
	}
}
