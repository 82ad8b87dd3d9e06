package pickle

import "testing"

// (a)/(i) raw-unicode-escape only treats \u as an escape after an odd run
// of backslashes. Decoding `\\u0041` as `\A` merged it with the key `\A`,
// silently dropping one of two tensors torch.load returns.
func TestUnicodeEscapes(t *testing.T) {
	cases := map[string]string{
		`\u0041`:       "A",
		`\\u0041`:      `\\u0041`, // an even run: no escape
		`\\\u0041`:     `\\A`,     // three backslashes: two stay, the third starts the escape
		`\U0001F600`:   "\U0001F600",
		`\\`:           `\\`,
		`\x41`:         `\x41`,
		"caf\xe9":      "café",
		`\u00e9\u00E9`: "éé",
	}
	for in, want := range cases {
		got, ok := decodeRawUnicodeEscape([]byte(in))
		if !ok || got != want {
			t.Errorf("%q: got %q %v, want %q", in, got, ok, want)
		}
	}
	for _, in := range []string{`\u004`, `\u00g1`, `\U00110000`, `a\Ub`, `\U`} {
		if got, ok := decodeRawUnicodeEscape([]byte(in)); ok {
			t.Errorf("%q: accepted as %q", in, got)
		}
	}
}
