package torch

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

// The walker continues where decoding stopped, with the decoder's state.
func TestWalkerContinuesWithDecoderState(t *testing.T) {
	cases := map[string]string{
		// memo strings put before a refusal, STACK_GLOBAL after it
		"memo": "\x80\x04\x8c\x05posix\x94\x8c\x06system\x94I0x1g\nh\x00h\x01\x93.",
		// strings on the stack before a cap (a 10,000-digit hex LONG,
		// which CPython reads)
		"stack": "\x80\x04\x8c\x05posix\x8c\x06systemL0x" + strings.Repeat("f", 10000) + "L\n0\x93.",
		// a refusal inside a GLOBAL's line (not UTF-8) then a later one
		"after": "c\xff\n\xff\n0cposix\nsystem\n.",
		// past a decoder cap (string over MaxStringBytes of 16 bytes)
		"cap": "X\x20\x00\x00\x00" + strings.Repeat("a", 32) + "0cposix\nsystem\n.",
	}
	for name, p := range cases {
		lim := DefaultLimits()
		lim.MaxStringBytes = 16
		rep, err := Scan(bytes.NewReader([]byte(p)), int64(len(p)), "t.pkl", WithLimits(lim))
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Join(rep.NotAllowed(), ","); !strings.Contains(got, "posix.system") || rep.Verdict() != VerdictDangerous {
			t.Errorf("%s: %s %v %q", name, rep.Verdict(), got, rep.Problems)
		}
	}
}

// Noise is not taken for a module, and the walker does not report names
// after a STACK_GLOBAL CPython would refuse (non-str operands).
func TestWalkerNoise(t *testing.T) {
	for name, p := range map[string]string{
		"junk lines": "c\x01\x02\n\x03\n.",
		"bytes ops":  "C\x05posixC\x06system\x93.",
		"underflow":  "\x93cposix",
	} {
		rep := &ScanReport{}
		walkRegion(strings.NewReader(p), 0, int64(len(p)), "t", rep, nil)
		if len(rep.Globals) != 0 {
			t.Errorf("%s: %v", name, rep.Globals)
		}
	}
}

// Work stays linear: a memo of 200k entries followed by 200k tiny pickles.
func TestWalkerLinear(t *testing.T) {
	p := strings.Repeat("Np", 1) + "0\n" + strings.Repeat("N\x94", 200000) + strings.Repeat("N.", 200000) + "cposix\nsystem\n."
	start := time.Now()
	rep := &ScanReport{}
	walkRegion(strings.NewReader(p), 0, int64(len(p)), "t", rep, nil)
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("took %v", d)
	}
	if len(rep.NotAllowed()) != 1 {
		t.Fatalf("%v", rep.NotAllowed())
	}
}
