package torch

import (
	"bytes"
	"encoding/binary"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// What torch.load gets out of files that are not checkpoints: Reaches and
// ScanForeign read them as torch's legacy path does, from byte 0, and stop
// where CPython's unpickler stops.
func TestScanForeign(t *testing.T) {
	// a safetensors file whose header length's first byte is an EXT
	// opcode (about 1 file in 85): the code is unregistered in a torch
	// process, the unpickler raises, nothing is imported
	extHeader := func(n int) []byte {
		b := binary.LittleEndian.AppendUint64(nil, uint64(n))
		b = append(b, `{"__metadata__":{"a":"b"}}`...)
		return append(b, bytes.Repeat([]byte(" "), n-(len(b)-8))...)
	}
	const global = "cposix\nsystem\n)R."
	read := func(p ...string) []byte {
		b, err := os.ReadFile(filepath.Join(append([]string{testdata}, p...)...))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	for _, c := range []struct {
		name    string
		data    []byte
		reaches bool
		verdict string
		named   string
	}{
		{"safetensors", read("torch", "dtypes.safetensors"), false, VerdictClean, ""},
		{"polyglot", read("polyglot", "st_header_pop_then_data_pickle.safetensors"), false, VerdictClean, ""},
		{"JSON", []byte(`{"weight_map": {}}`), false, VerdictClean, ""},
		{"text", []byte("# a model card\n"), false, VerdictClean, ""},
		{"a pickle of True", []byte("\x88."), false, VerdictClean, ""},
		{"zero block", make([]byte, 1024), false, VerdictClean, ""},
		{"empty", nil, false, VerdictClean, ""},
		// GLOBAL of a name find_class cannot import: CPython stops there,
		// before the REDUCE and the real global after it
		{"unimportable name", []byte("cnot a module\nx\n(tRcposix\nsystem\n."), false, VerdictClean, ""},
		{"protocol 0 pickle", read("malicious", "raw_pickle_p0.bin"), true, VerdictDangerous, "posix.system"},
		{"protocol 0 legacy checkpoint", read("polyglot", "legacy_p0_notensor.pt"), true, VerdictInvalid, ""},
		{"zip", read("torch", "dtypes.pt"), true, VerdictClean, ""},
		{"safetensors, header length 0x282 (EXT1)", extHeader(0x282), false, VerdictClean, ""},
		{"safetensors, header length 0x283 (EXT2)", extHeader(0x283), false, VerdictClean, ""},
		{"safetensors, header length 0x384 (EXT4)", extHeader(0x384), false, VerdictClean, ""},
		// the walk stops at the EXT code, as CPython does, before the REDUCE
		{"EXT1 then a global", []byte("\x82\x05cposix\nsystem\n(tR."), false, VerdictClean, ""},
		// INST is refused by the decoder; the exact walk goes on as CPython does
		{"INST", []byte("(iposix\nsystem\n."), true, VerdictDangerous, "posix.system"},
		// a call of a value the pickle built, which no builtin value
		// survives: CPython raises (TypeError, AttributeError,
		// UnpicklingError) before the global after it, having imported
		// and called nothing (1 header length in 12,000 of those tried,
		// most over 1 MB, reads on into the header JSON as far as one:
		// 0xe8c89 is NEWFALSE, then SHORT_BINUNICODE swallowing
		// `{"__metad`, then the "a" of "metadata", APPEND onto False)
		{"None called", []byte("N)R" + global), false, VerdictClean, ""},
		{"APPEND onto a tuple", []byte(")K\x01a" + global), false, VerdictClean, ""},
		{"OBJ of an int", []byte("(K\x01o" + global), false, VerdictClean, ""},
		{"NEWOBJ of a str", []byte("X\x01\x00\x00\x00a)\x81" + global), false, VerdictClean, ""},
		{"BUILD of a dict state on a list", []byte("]}b" + global), false, VerdictClean, ""},
		{"ADDITEMS onto a frozenset", []byte("(\x91(K\x01\x90" + global), false, VerdictClean, ""},
		{"NEXT_BUFFER (torch.load passes no buffers)", []byte("\x97" + global), false, VerdictClean, ""},
		{"READONLY_BUFFER of an int", []byte("K\x01\x98" + global), false, VerdictClean, ""},
		{"BINPERSID (the first pickle.load has no persistent_load)", []byte("K\x01Q" + global), false, VerdictClean, ""},
		{"PERSID", []byte("Pa\n" + global), false, VerdictClean, ""},
		{"safetensors, header length 0x52294e (None called)", extHeader(0x52294e), false, VerdictClean, ""},
		{"safetensors, header length 0x622929 (BUILD on a tuple)", extHeader(0x622929), false, VerdictClean, ""},
		// ... and where CPython goes on (a builtin does nothing, or takes
		// the items), so does the scan: the global after is named
		{"BUILD None onto an int", []byte("K\x01Nb" + global), true, VerdictDangerous, "posix.system"},
		{"BUILD (None, {}) onto a str", []byte("X\x01\x00\x00\x00aN}\x86b" + global), true, VerdictDangerous, "posix.system"},
		{"APPENDS of nothing onto a tuple", []byte(")(e" + global), true, VerdictDangerous, "posix.system"},
		{"ADDITEMS of nothing onto an int", []byte("K\x01(\x90" + global), true, VerdictDangerous, "posix.system"},
		{"SETITEM onto a bytearray", []byte("\x96\x01\x00\x00\x00\x00\x00\x00\x00aK\x00K\x01s" + global), true, VerdictDangerous, "posix.system"},
		{"READONLY_BUFFER of bytes", []byte("C\x01a\x98" + global), true, VerdictDangerous, "posix.system"},
		{"a global called", []byte("N" + global), true, VerdictDangerous, "posix.system"},
		// find_class imports the module before getattr looks the name up,
		// and importlib imports a dotted name's first part first (one
		// leading dot: a top-level module found by the part after it):
		// this.py runs in each of these, then find_class fails
		{"a module, a name getattr fails on", []byte("cthis\nx y\n."), true, VerdictDangerous, "this.x y"},
		{"a module, an empty name (STACK_GLOBAL)", []byte("\x8c\x04this\x8c\x00\x93."), true, VerdictDangerous, "this."},
		{"a module with one leading dot", []byte("c.this\nx\n."), true, VerdictDangerous, ".this.x"},
		{"a module's first part, then a NUL", []byte("\x8c\x06this.\x00\x8c\x01x\x93."), true, VerdictDangerous, "this.\x00.x"},
		{"a module with a leading dot, walked after INST", []byte("(i.this\nx\n."), true, VerdictDangerous, ".this.x"},
		// ... and where importlib finds nothing to import, CPython stops
		{"a module with two leading dots", []byte("c..this\nx\n" + global), false, VerdictClean, ""},
		{"INST without a MARK", []byte("N" + "iposix\nsystem\n."), false, VerdictClean, ""},
		{"a module that is no identifier", []byte("cthis x\ny\n" + global), false, VerdictClean, ""},
	} {
		reaches, err := Reaches(bytes.NewReader(c.data), int64(len(c.data)))
		if err != nil || reaches != c.reaches {
			t.Errorf("%s: Reaches %v %v, want %v", c.name, reaches, err, c.reaches)
		}
		rep, err := ScanForeign(bytes.NewReader(c.data), int64(len(c.data)), c.name)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if v := rep.Verdict(); v != c.verdict || (c.named != "" && !strings.Contains(strings.Join(rep.NotAllowed(), " "), c.named)) {
			t.Errorf("%s: %s %v %q, want %s naming %q", c.name, v, rep.NotAllowed(), rep.Problems, c.verdict, c.named)
		}
		if !c.reaches && (len(rep.Problems) > 0 || rep.Format != FormatUnknown) {
			t.Errorf("%s: torch takes nothing from it, but the report has format %v, problems %q", c.name, rep.Format, rep.Problems)
		}
	}
}

// scanReached scans data as a foreign file after checking that torch.load
// reads it as a pickle (Reaches).
func scanReached(t *testing.T, name string, data []byte) *ScanReport {
	t.Helper()
	if reaches, err := Reaches(bytes.NewReader(data), int64(len(data))); err != nil || !reaches {
		t.Errorf("%s: Reaches %v %v, want true", name, reaches, err)
	}
	rep, err := ScanForeign(bytes.NewReader(data), int64(len(data)), name)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// budgetPolyglot is a pickle whose FRAMEs of 10,000 bytes each end inside
// a string's argument (CPython reads those, unbuffered, with read(n): the
// argument comes from the frame end, the rest of the frame is dropped) and
// where every walk from a frame end but the last's runs through one long
// tail of opcodes: k walks of the tail spend the walk budget before the
// walk that finds the global CPython imports (posix.system after the last
// frame end). m is the tail's length.
func budgetPolyglot(k, m int) []byte {
	const fl, n, in = 10000, 40, 20 // frame length, string length, its bytes inside the frame
	body := bytes.Repeat([]byte("N0"), (fl-2-in)/2)
	body = append(body, bytes.Repeat([]byte("N"), fl-2-in-len(body))...)
	body = append(body, 'U', n)
	body = append(body, bytes.Repeat([]byte("a"), in)...)
	b := []byte("\x80\x04")
	var last int
	for i := range k {
		b = append(b, 0x95)
		b = binary.LittleEndian.AppendUint64(b, fl)
		b = append(b, body...)
		last = len(b)
		if i < k-1 {
			// CPython: 40 bytes of string, then the next FRAME; the walker
			// going straight on: 20 of them, then opcodes into that FRAME
			b = append(b, strings.Repeat("z", 20)+strings.Repeat("N0", 10)...)
		} else {
			b = append(b, make([]byte, n)...)
		}
	}
	b = append(b, "cposix\nsystem\n\x8c\x04echo\x85R."...)
	// the last frame: the walker going straight on skips the payload with
	// a BINBYTES whose length bytes are ASCII (CPython reads them as part
	// of a str) into the tail
	skip := func(to int) uint32 { return uint32(to - (last + 25)) }
	for to := len(b); ; to++ {
		if skip(to)&0x80808080 == 0 {
			b = append(b, make([]byte, to-len(b))...)
			break
		}
	}
	tail := append([]byte(strings.Repeat("z", 20)+"B"), binary.LittleEndian.AppendUint32(nil, skip(len(b)))...)
	copy(b[last:], append(tail, strings.Repeat("z", 15)...))
	b = append(b, bytes.Repeat([]byte("N0"), m/2)...)
	return append(b, 0)
}

// A walk budget spent on the first pickle of a foreign file leaves bytes
// CPython reads unchecked: the file is no longer clean.
func TestScanForeignWalkBudget(t *testing.T) {
	rep := scanReached(t, "budget", budgetPolyglot(60, 1<<20))
	if v := rep.Verdict(); v == VerdictClean {
		t.Errorf("%s %v %q, want the file not clean", v, rep.NotAllowed(), rep.Problems)
	}
}

// Two ways of reading a small frame's end (CPython prefetched it: it reads
// on; the walker also tries the frame end) reach a large frame's end, which
// CPython reads from, with stacks ten values apart. The walk from there
// with the shorter stack underflows at the POPs before posix.system; the
// one with CPython's stack must be walked too.
func TestScanForeignFrameEndStates(t *testing.T) {
	const n, in, fl, n2, in2 = 20, 10, 10000, 40, 20
	b := []byte("\x80\x04")
	body := append([]byte("N0N0N0N0N0U"), n)
	body = append(body, strings.Repeat("a", in)...)
	b = append(b, 0x95)
	b = binary.LittleEndian.AppendUint64(b, uint64(len(body)))
	b = append(b, body...)
	b = append(b, strings.Repeat("b", 10)+strings.Repeat("N", 10)...) // CPython: ten NONEs
	body = bytes.Repeat([]byte("N0"), (fl-2-in2)/2)
	body = append(body, 'U', n2)
	body = append(body, strings.Repeat("a", in2)...)
	b = append(b, 0x95)
	b = binary.LittleEndian.AppendUint64(b, uint64(len(body)))
	b = append(b, body...)
	b = append(b, strings.Repeat("c", n2-in2)+"\x00"+strings.Repeat("c", in2-1)...)
	b = append(b, strings.Repeat("0", 10)+"cposix\nsystem\n\x8c\x04echo\x85R."...)
	rep := scanReached(t, "states", b)
	if v := rep.Verdict(); v != VerdictDangerous || !slices.Contains(rep.NotAllowed(), "posix.system") {
		t.Errorf("%s %v %q, want dangerous naming posix.system", v, rep.NotAllowed(), rep.Problems)
	}
}

// A text PUT whose line crosses a large frame's end: the machine reads on
// ("10": it replaces memo 10, "posix"), CPython reads the line from the
// frame end ("0"). The walk from the frame end must start from the memo as
// it was before the PUT, or its STACK_GLOBAL of memo 10 and 11 is no str.
func TestScanForeignFrameEndMemo(t *testing.T) {
	const fl = 10000
	b := []byte("\x80\x04\x8c\x05posixq\x0a0\x8c\x06systemq\x0b0N")
	body := append(bytes.Repeat([]byte("N0"), (fl-2)/2), 'p', '1')
	b = append(b, 0x95)
	b = binary.LittleEndian.AppendUint64(b, fl)
	b = append(b, body...)
	b = append(b, "0\n0h\x0ah\x0b\x93\x8c\x04echo\x85R."...)
	rep, err := ScanForeign(bytes.NewReader(b), int64(len(b)), "memo")
	if err != nil {
		t.Fatal(err)
	}
	if v := rep.Verdict(); v != VerdictDangerous || !slices.Contains(rep.NotAllowed(), "posix.system") {
		t.Errorf("%s %v %q, want dangerous naming posix.system", v, rep.NotAllowed(), rep.Problems)
	}
}
