package torch

import (
	"bytes"
	"strings"
	"testing"
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
