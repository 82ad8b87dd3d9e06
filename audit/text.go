package audit

import (
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// display makes a name from a file safe to put in a message: a string
// with control or invisible characters is quoted Go-style, so that a
// hostile tensor name cannot move a terminal's cursor or fake lines of
// output (the CLI prints names the same way).
func display(s string) string {
	if s == "" {
		return `""`
	}
	for _, r := range s {
		if r == utf8.RuneError || !unicode.IsPrint(r) {
			return strconv.Quote(s)
		}
	}
	return s
}

// groupDigits writes n with thousands separators: 137,022,464.
func groupDigits(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	if neg {
		b.WriteByte('-')
	}
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}
