package blobstore

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gosafetensors/safetensors/remote"
)

// readAll reads a whole object through the pool.
func readAll(t *testing.T, p *Pool, u string) []byte {
	t.Helper()
	o, err := p.Open(t.Context(), u)
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	b := make([]byte, o.Size())
	if _, err := o.ReadAt(b, 0); err != nil && !errors.Is(err, io.EOF) {
		t.Fatal(err)
	}
	return b
}

// Writes to file:// replace an object whole and leave no temporary file
// behind; JoinURL keys round-trip through SplitURL.
func TestWriteFile(t *testing.T) {
	dir := t.TempDir()
	p, err := NewPool()
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	prefix := "file://" + filepath.ToSlash(dir) + "/results/"
	key := "uploads/in/a%20b@v1.json"
	u := JoinURL(prefix, key)
	if b, k, err := SplitURL(u); err != nil || b != "file://"+filepath.ToSlash(dir)+"/results/uploads/in" || k != "a%20b@v1.json" {
		t.Fatalf("JoinURL(%q, %q) = %q splits into %q and %q, %v", prefix, key, u, b, k, err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "results", "uploads", "in"), 0o777); err != nil {
		t.Fatal(err)
	}
	for _, body := range []string{`{"verdict": "clean"}`, `{"verdict": "dangerous"}`} {
		if err := p.Write(t.Context(), u, []byte(body)); err != nil {
			t.Fatal(err)
		}
		if got := readAll(t, p, u); string(got) != body {
			t.Fatalf("read back %q, want %q", got, body)
		}
	}
	entries, _ := os.ReadDir(filepath.Join(dir, "results", "uploads", "in"))
	if len(entries) != 1 || entries[0].Name() != "a%20b@v1.json" {
		t.Fatalf("directory holds %v", entries)
	}
	if err := Write(t.Context(), JoinURL(prefix, "one-off.json"), []byte("1")); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "results", "one-off.json")); err != nil || string(b) != "1" {
		t.Fatalf("%q %v", b, err)
	}
}

// Writes through the real AWS SDK to gofakes3 are read back; OpenVersion
// opens the version named and refuses another one before reading a byte of
// it, whether or not the store honours If-Match on reads (gofakes3 does
// not: the version the answer carries is checked).
func TestS3WriteAndOpenVersion(t *testing.T) {
	f := newFakeS3(t)
	p, err := NewPool()
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	u := JoinURL(f.url("results/"), "x/r%.json")
	if _, k, err := SplitURL(u); err != nil || k != "results/x/r%.json" {
		t.Fatalf("JoinURL: %q splits into key %q, %v", u, k, err)
	}
	if err := p.Write(t.Context(), u, []byte(`{"a":1}`)); err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, p, u); string(got) != `{"a":1}` {
		t.Fatalf("read back %q", got)
	}
	o, err := p.Open(t.Context(), u)
	if err != nil {
		t.Fatal(err)
	}
	etag := o.ETag()
	o.Close()
	if etag == "" || !strings.HasPrefix(etag, `"`) {
		t.Fatalf("ETag %q", etag)
	}
	o, err = p.OpenVersion(t.Context(), u, etag)
	if err != nil {
		t.Fatal(err)
	}
	o.Close()
	if err := p.Write(t.Context(), u, []byte(`{"a":2}`)); err != nil {
		t.Fatal(err)
	}
	if _, err := p.OpenVersion(t.Context(), u, etag); !errors.Is(err, remote.ErrObjectChanged) {
		t.Fatalf("OpenVersion of a replaced version: %v", err)
	}
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "f"), []byte("x"), 0o666)
	if _, err := p.OpenVersion(t.Context(), "file://"+filepath.ToSlash(dir)+"/f", etag); err == nil || errors.Is(err, remote.ErrObjectChanged) {
		t.Fatalf("a version pinned on file://: %v", err)
	}
}
