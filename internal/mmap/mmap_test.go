package mmap

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

func TestMap(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "f")
	want := bytes.Repeat([]byte("0123456789"), 1000)
	if err := os.WriteFile(p, want, 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b, err := Map(f, 0)
	if runtime.GOOS == "windows" || runtime.GOOS == "plan9" || runtime.GOOS == "js" || runtime.GOOS == "wasip1" {
		if !errors.Is(err, ErrUnsupported) {
			t.Fatalf("Map on %s: %v, want ErrUnsupported", runtime.GOOS, err)
		}
		return
	}
	if err != nil || !bytes.Equal(b, want) {
		t.Fatalf("Map(f, 0): %d bytes, %v", len(b), err)
	}
	if err := Unmap(b); err != nil {
		t.Fatal(err)
	}
	if b, err = Map(f, 10); err != nil || string(b) != "0123456789" {
		t.Fatalf("Map(f, 10) = %q, %v", b, err)
	}
	Unmap(b)
	if err := Unmap(nil); err != nil {
		t.Fatal(err)
	}

	e := filepath.Join(dir, "empty")
	os.WriteFile(e, nil, 0o644)
	ef, _ := os.Open(e)
	defer ef.Close()
	if _, err := Map(ef, 0); !errors.Is(err, ErrUnsupported) {
		t.Fatalf("empty file: %v, want ErrUnsupported", err)
	}
}
