package pickle

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

const systemCall = "cposix\nsystem\n(X\x04\x00\x00\x00truetR"

// Noise is not taken for a module, and the walker does not report names
// after a STACK_GLOBAL CPython would refuse (non-str operands).
func TestWalkerNoise(t *testing.T) {
	for name, p := range map[string]string{
		"junk lines": "c\x01\x02\n\x03\n.",
		"bytes ops":  "C\x05posixC\x06system\x93.",
		"underflow":  "\x93cposix",
	} {
		if a, _ := walk([]byte(p)); len(a.imports) != 0 {
			t.Errorf("%s: %v", name, a.imports)
		}
	}
}

// Work stays linear: a memo of 200k entries followed by 200k tiny pickles
// (each STOP empties the memo; emptying it again and again must not cost
// the memo's size each time).
func TestWalkerLinear(t *testing.T) {
	p := strings.Repeat("Np", 1) + "0\n" + strings.Repeat("N\x94", 200000) + strings.Repeat("N.", 200000) + "cposix\nsystem\n."
	a := &testAudit{}
	w := newWalker(strings.NewReader(p), 0, int64(len(p)), a, nil)
	w.run()
	if w.work > 2*int64(len(p)) {
		t.Fatalf("%d units of work for %d bytes", w.work, len(p))
	}
	if got := a.named(); len(got) != 1 || !strings.HasPrefix(got[0], "posix.system@") {
		t.Fatalf("%v", got)
	}
}

// Past its stack bound the walker drops the outer MARKs: popping past the
// ones it kept must not lose sync (the names after it are still found).
func TestWalkerMarksPastBound(t *testing.T) {
	p := strings.Repeat("(", maxWalkStack+10) + strings.Repeat("t", maxWalkStack+10) + "0" + systemCall + "."
	a, _ := walk([]byte(p))
	if got := a.named(); len(got) != 1 || !strings.HasPrefix(got[0], "posix.system@") {
		t.Fatalf("walker lost posix.system after %d MARKs: %v", maxWalkStack+10, got)
	}
}

// The walker goes on with the machine's state where the machine stopped:
// memo strings put before an INT literal the machine refuses (CPython
// reads it), used by a STACK_GLOBAL after it.
func TestWalkerFromFailState(t *testing.T) {
	p := []byte("\x80\x04\x8c\x05posix\x94\x8c\x06system\x94I0x1g\n0h\x00h\x01\x93.")
	m := NewMachine(NewStream(bytes.NewReader(p), 0, int64(len(p))), Config{Limits: testLimits(), Policy: &testPolicy{}, Audit: &testAudit{}})
	if _, err := m.Run(); err == nil {
		t.Fatal("a bad INT literal decoded")
	}
	off, st := m.FailState()
	a := &testAudit{}
	NewWalks(0).Walk(bytes.NewReader(p), 0, off, int64(len(p)), a, st)
	if got := a.named(); !slices.Equal(got, []string{fmt.Sprint("posix.system@", len(p)-2)}) {
		t.Fatalf("from offset %d: %v", off, got)
	}
	// from a fresh state the memo is unknown: nothing is named
	if a, _ := walk(p[off:]); len(a.named()) != 0 {
		t.Fatalf("fresh: %v", a.named())
	}
}

// seeds adds the pickles of the repository's fixtures.
func seeds(f *testing.F) {
	for _, dir := range []string{"torch", "malicious", "broken", "unsupported", "crafted"} {
		files, _ := filepath.Glob(filepath.Join("../../testdata", dir, "*"))
		for _, p := range files {
			if ext := filepath.Ext(p); ext != ".pkl" && ext != ".bin" && ext != ".pt" {
				continue
			}
			if b, err := os.ReadFile(p); err == nil && len(b) <= 64<<10 {
				f.Add(b)
			}
		}
	}
	f.Add([]byte("\x80\x04\x8c\x05posix\x94\x8c\x06system\x94h\x00h\x01\x93."))
	f.Add([]byte(systemCall + "."))
}

// hang crashes the fuzz worker (so the input is saved) if one input takes
// more than 10 seconds: work must stay bounded.
func hang(b []byte) func() {
	t := time.AfterFunc(10*time.Second, func() { panic(fmt.Sprintf("input took more than 10s: %q", b)) })
	return func() { t.Stop() }
}

// FuzzWalker checks the walker against the machine: on any pickle the
// machine in audit mode decodes to its STOP, the walker, run over the same
// bytes from a fresh state, names every importable global the machine
// asked the policy for, at the same offset (so where the machine stops,
// the walker that takes over misses nothing the machine would have seen).
// It must never panic or take unbounded time on anything.
func FuzzWalker(f *testing.F) {
	seeds(f)
	f.Fuzz(func(t *testing.T, b []byte) {
		defer hang(b)()
		lim := testLimits()
		lim.MaxStringBytes, lim.MaxMemo, lim.MaxStack, lim.MaxMarks, lim.MaxObjects = 1<<16, 1<<12, 1<<12, 1<<8, 1<<16
		p, _, err := audit(b, lim)
		a, _ := walk(b)
		if err != nil {
			return
		}
		seen := map[string]bool{}
		for _, g := range a.named() {
			seen[g] = true
		}
		for _, g := range p.found {
			name := g[:strings.LastIndexByte(g, '@')]
			mod, nm, _ := strings.Cut(name, ".")
			if i := strings.LastIndexByte(name, '.'); i >= 0 {
				mod, nm = name[:i], name[i+1:]
			}
			if !Importable(mod) || !Importable(nm) || len(mod) > MaxName || len(nm) > MaxName {
				continue
			}
			if !seen[g] {
				t.Fatalf("the machine names %s, the walker does not (walker: %v)", g, a.named())
			}
		}
	})
}

// FuzzMachine runs the strict and the audit machine over arbitrary bytes:
// no panic, and errors are *Error values of the four kinds.
func FuzzMachine(f *testing.F) {
	seeds(f)
	f.Fuzz(func(t *testing.T, b []byte) {
		defer hang(b)()
		lim := testLimits()
		lim.MaxStringBytes, lim.MaxMemo, lim.MaxStack, lim.MaxMarks, lim.MaxObjects = 1<<16, 1<<12, 1<<12, 1<<8, 1<<16
		for _, audited := range []bool{false, true} {
			c := Config{Limits: lim, Policy: &testPolicy{}}
			if audited {
				c.Audit = &testAudit{}
			}
			s := NewStream(bytes.NewReader(b), 0, int64(len(b)))
			for s.Remaining() > 0 {
				m := NewMachine(s, c)
				_, err := m.Run()
				if err == nil {
					continue
				}
				e, ok := err.(*Error)
				if !ok || (e.Kind != ErrCorrupt && e.Kind != ErrLimit && e.Kind != ErrNotAllowed && e.Kind != ErrUnsupported) {
					t.Fatalf("error %T %v", err, err)
				}
				if audited {
					m.FailState()
				}
				break
			}
		}
	})
}
