package atomicfile

import (
	"os"
	"path/filepath"
	"testing"
)

func TestCommitReplacesAtomically(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "out.bin")
	if err := os.WriteFile(path, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Abort()
	f.WriteString("new content")
	if b, _ := os.ReadFile(path); string(b) != "old" {
		t.Fatalf("destination changed before Commit: %q", b)
	}
	if err := f.Commit(); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(path); string(b) != "new content" {
		t.Fatalf("got %q", b)
	}
	assertOnly(t, dir, "out.bin")
}

func TestAbortLeavesNothing(t *testing.T) {
	dir := t.TempDir()
	f, err := Create(filepath.Join(dir, "out.bin"))
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("partial")
	if err := f.Abort(); err != nil {
		t.Fatal(err)
	}
	assertOnly(t, dir)
}

func assertOnly(t *testing.T, dir string, names ...string) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range ents {
		got = append(got, e.Name())
	}
	if len(got) != len(names) {
		t.Fatalf("directory holds %v, want %v", got, names)
	}
	for i := range names {
		if got[i] != names[i] {
			t.Fatalf("directory holds %v, want %v", got, names)
		}
	}
}

func TestCommitAfterFailedCheck(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "out.bin")
	os.WriteFile(path, []byte("old"), 0o644)
	f, err := Create(path)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("new")
	sentinel := os.ErrInvalid
	var seen []byte
	err = f.CommitAfter(func() error {
		seen = make([]byte, 3)
		f.ReadAt(seen, 0) // the check can read what was written
		return sentinel
	})
	if err != sentinel {
		t.Fatalf("got %v", err)
	}
	if string(seen) != "new" {
		t.Fatalf("check read %q", seen)
	}
	if b, _ := os.ReadFile(path); string(b) != "old" {
		t.Fatalf("destination changed to %q", b)
	}
	assertOnly(t, dir, "out.bin")
}
