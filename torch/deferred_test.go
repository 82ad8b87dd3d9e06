package torch

import (
	"bytes"
	"crypto/sha256"
	"os"
	"path/filepath"
	"testing"
)

// eagerOpen opens b as Open did before any check was deferred: the full
// analysis, and its refusal unless it says clean.
func eagerOpen(b []byte, name string) (*Checkpoint, error) {
	lim := DefaultLimits()
	rep, c, err := analyze(bytes.NewReader(b), int64(len(b)), name, &lim)
	if err != nil {
		return nil, err
	}
	if c == nil || rep.Verdict() != VerdictClean {
		return nil, withPath(rep.refusal(), name)
	}
	c.setExpansion(int64(len(b)), 0) // as newReader does
	return c, nil
}

// deferredOpenChecked opens b with NewReader and runs every deferred check.
func deferredOpenChecked(b []byte, name string) (*Checkpoint, error) {
	c, err := NewReader(bytes.NewReader(b), int64(len(b)), name)
	if err != nil {
		return nil, err
	}
	if err := c.Check(); err != nil {
		return nil, err
	}
	return c, nil
}

// checkDeferredAgree requires NewReader plus the deferred record checks to
// give exactly what the eager open gives: the same error, or the same
// tensors with the same bytes.
func checkDeferredAgree(t *testing.T, b []byte, name string) {
	t.Helper()
	ec, eerr := eagerOpen(b, name)
	lc, lerr := deferredOpenChecked(b, name)
	if (eerr == nil) != (lerr == nil) || (eerr != nil && eerr.Error() != lerr.Error()) {
		t.Fatalf("%s: eager open %v, deferred open and checks %v", name, eerr, lerr)
	}
	if eerr != nil {
		return
	}
	if len(ec.Tensors()) != len(lc.Tensors()) {
		t.Fatalf("%s: %d tensors eagerly, %d deferred", name, len(ec.Tensors()), len(lc.Tensors()))
	}
	for i, et := range ec.Tensors() {
		lt := lc.Tensors()[i]
		eh, lh := sha256.New(), sha256.New()
		_, e1 := et.WriteTo(eh)
		_, e2 := lt.WriteTo(lh)
		if et.Name != lt.Name || (e1 == nil) != (e2 == nil) || !bytes.Equal(eh.Sum(nil), lh.Sum(nil)) {
			t.Fatalf("%s: tensor %q: eager %v, deferred %q %v (bytes equal: %v)", name, et.Name, e1, lt.Name, e2, bytes.Equal(eh.Sum(nil), lh.Sum(nil)))
		}
	}
}

// fixtureFiles lists every checkpoint-like fixture under testdata.
func fixtureFiles(t testing.TB) []string {
	var paths []string
	for _, dir := range []string{"torch", "oracle", "crafted", "malicious", "broken", "unsupported", "storage_records"} {
		ents, _ := os.ReadDir(filepath.Join("../testdata", dir))
		for _, e := range ents {
			if e.Type().IsRegular() && filepath.Ext(e.Name()) != ".json" && filepath.Ext(e.Name()) != ".safetensors" &&
				filepath.Ext(e.Name()) != ".py" && filepath.Ext(e.Name()) != ".md" {
				paths = append(paths, filepath.Join("../testdata", dir, e.Name()))
			}
		}
	}
	if len(paths) < 100 {
		t.Fatalf("only %d fixtures", len(paths))
	}
	return paths
}

// TestDeferredChecksAgree: on every fixture, opening with the record
// checks deferred and then running them all (what a conversion does)
// accepts exactly what opening with every check at once accepted, with
// the same error, and reads the same bytes.
func TestDeferredChecksAgree(t *testing.T) {
	for _, p := range fixtureFiles(t) {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		checkDeferredAgree(t, b, p)
	}
}

// FuzzDeferredChecksAgree is TestDeferredChecksAgree on mutated files.
func FuzzDeferredChecksAgree(f *testing.F) {
	for _, glob := range []string{"../testdata/torch/*.p[th]", "../testdata/torch/*.bin", "../testdata/crafted/*", "../testdata/storage_records/*"} {
		paths, _ := filepath.Glob(glob)
		for _, p := range paths {
			if b, err := os.ReadFile(p); err == nil && len(b) < 1<<16 && filepath.Ext(p) != ".json" {
				f.Add(b)
			}
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		checkDeferredAgree(t, b, "fuzz.pt")
	})
}
