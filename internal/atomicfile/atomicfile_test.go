package atomicfile

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
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

func TestNonRegularDestinationWrittenInPlace(t *testing.T) {
	dir := t.TempDir()
	link := filepath.Join(dir, "null")
	if err := os.Symlink("/dev/null", link); err != nil {
		t.Skip(err)
	}
	f, err := Create(link)
	if err != nil {
		t.Fatal(err)
	}
	if !f.Direct() {
		t.Fatal("a symlink to /dev/null is written through a temporary file")
	}
	f.Write([]byte("hello"))
	if err := f.Commit(); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Lstat(link); err != nil || st.Mode()&os.ModeSymlink == 0 {
		t.Fatalf("the symlink was replaced: %v %v", st.Mode(), err)
	}
	if st, _ := os.Stat("/dev/null"); st.Mode().IsRegular() {
		t.Fatal("/dev/null became a regular file")
	}
}

func TestCreateErrorNames(t *testing.T) {
	dir := t.TempDir()
	_, err := Create(filepath.Join(dir, "missing", "out.bin"))
	if err == nil || strings.Contains(err.Error(), ".tmp-") || !strings.Contains(err.Error(), "does not exist") || !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("error for a missing directory: %v", err)
	}
}

// Errors of writes name the destination, not the temporary file, and
// EFAULT (the source bytes could not be read) is explained.
func TestWriteErrorsNameTheDestination(t *testing.T) {
	dir := t.TempDir()
	dst := filepath.Join(dir, "out.bin")
	f, err := Create(dst)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Abort()
	tmp := f.File.Name()
	f.File.Close() // every later write fails
	_, err = f.Write([]byte("x"))
	if err == nil || strings.Contains(err.Error(), tmp) || !strings.Contains(err.Error(), dst) {
		t.Errorf("Write error %q: want the destination %s, not %s", err, dst, tmp)
	}
	if _, err := f.ReadFrom(strings.NewReader("x")); err == nil || strings.Contains(err.Error(), tmp) {
		t.Errorf("ReadFrom error %q names the temporary file", err)
	}
	e := f.explain(&fs.PathError{Op: "write", Path: tmp, Err: syscall.EFAULT})
	if !errors.Is(e, syscall.EFAULT) || !strings.Contains(e.Error(), "could not be read") || !strings.Contains(e.Error(), dst) {
		t.Errorf("EFAULT explained as %q", e)
	}
}

// CommitAll renames every file of a group, or (on a failure) none, leaving
// nothing behind.
func TestCommitAll(t *testing.T) {
	dir := t.TempDir()
	var files []*File
	for i := range 3 {
		f, err := Create(filepath.Join(dir, fmt.Sprintf("f%d", i)))
		if err != nil {
			t.Fatal(err)
		}
		f.Write([]byte{byte(i)})
		files = append(files, f)
	}
	var seen []string
	if err := CommitAll(files, func(p string) { seen = append(seen, filepath.Base(p)) }); err != nil {
		t.Fatal(err)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 3 || strings.Join(seen, ",") != "f0,f1,f2" {
		t.Fatalf("after CommitAll: %d entries, renamed %v", len(entries), seen)
	}
	for i := range 3 {
		if b, _ := os.ReadFile(filepath.Join(dir, fmt.Sprintf("f%d", i))); len(b) != 1 || b[0] != byte(i) {
			t.Fatalf("f%d holds %v", i, b)
		}
	}
	// a failure halfway (the second temporary file vanished) removes what
	// the group renamed and every temporary file
	dir2 := t.TempDir()
	files = nil
	for _, n := range []string{"a", "b", "c"} {
		f, err := Create(filepath.Join(dir2, n))
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	os.Remove(files[1].File.Name())
	if err := CommitAll(files, nil); err == nil {
		t.Fatal("renaming a missing temporary file succeeded")
	}
	if entries, _ := os.ReadDir(dir2); len(entries) != 0 {
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Fatalf("a failed group left %v", names)
	}
}

// MkdirAll's directories are removed by Undo when empty, kept by Keep.
func TestMkdirAllUndo(t *testing.T) {
	base := t.TempDir()
	deep := filepath.Join(base, "a", "b", "c")
	d, err := MkdirAll(deep)
	if err != nil {
		t.Fatal(err)
	}
	d.Undo()
	if _, err := os.Stat(filepath.Join(base, "a")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Undo left %s: %v", filepath.Join(base, "a"), err)
	}
	d, err = MkdirAll(deep)
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(base, "a", "keep.txt"), nil, 0o644)
	d.Undo() // b and c go, a holds a file
	if _, err := os.Stat(filepath.Join(base, "a", "keep.txt")); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(base, "a", "b")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("empty b left: %v", err)
	}
	d, err = MkdirAll(deep)
	if err != nil {
		t.Fatal(err)
	}
	d.Keep()
	d.Undo()
	if _, err := os.Stat(deep); err != nil {
		t.Fatalf("Keep then Undo removed it: %v", err)
	}
}

func TestOutputIsInput(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "in")
	other := filepath.Join(dir, "other")
	for _, p := range []string{in, other} {
		if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	hard := filepath.Join(dir, "hard")
	if err := os.Link(in, hard); err != nil {
		t.Skipf("no hard links here: %v", err)
	}
	sym := filepath.Join(dir, "sym")
	if err := os.Symlink(in, sym); err != nil {
		t.Skipf("no symbolic links here: %v", err)
	}
	inputs := Inputs(in, filepath.Join(dir, "missing"), "")
	if len(inputs) != 1 {
		t.Fatalf("Inputs kept %d entries, want 1", len(inputs))
	}
	for _, out := range []string{in, hard, sym} {
		if got, ok := OutputIsInput(out, inputs); !ok || got.Name != in {
			t.Errorf("OutputIsInput(%s) = %v, %v; want %s", out, got, ok, in)
		}
	}
	for _, out := range []string{other, filepath.Join(dir, "new")} {
		if _, ok := OutputIsInput(out, inputs); ok {
			t.Errorf("OutputIsInput(%s) = true", out)
		}
	}
}
