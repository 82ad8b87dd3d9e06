package audit

import (
	"strconv"
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
