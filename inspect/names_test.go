package inspect

import (
	"slices"
	"testing"
)

func TestCompareNames(t *testing.T) {
	got := []string{"h.10.w", "h.2.w", "h.1.w", "h.1.b", "lm_head", "h.02.w", "h.100", "h.9", "h", "a1b", "a01b", "a1"}
	slices.SortFunc(got, CompareNames)
	want := []string{"a1", "a01b", "a1b", "h", "h.1.b", "h.1.w", "h.02.w", "h.2.w", "h.9", "h.10.w", "h.100", "lm_head"}
	if !slices.Equal(got, want) {
		t.Fatalf("sorted %q\nwant   %q", got, want)
	}
	for _, a := range want {
		for _, b := range want {
			if c, d := CompareNames(a, b), CompareNames(b, a); c != -d || (c == 0) != (a == b) {
				t.Errorf("CompareNames(%q, %q) = %d, reversed %d", a, b, c, d)
			}
		}
	}
}
