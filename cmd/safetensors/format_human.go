package main

import (
	"github.com/gosafetensors/safetensors/internal/units"
	"github.com/gosafetensors/safetensors/sharded"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// humanCount spells a parameter count the way the Hugging Face Hub does,
// three significant digits ("999", "1.50K", "137M", "8.03B"): the one
// rule of internal/units.
func humanCount(n int64) string { return units.Count(n) }

// humanBytes spells a size in binary units with one decimal: "512 B",
// "1.5 KiB", "1.2 GiB" (internal/units, shared with every message).
func humanBytes(n int64) string { return units.Bytes(n) }

// groupDigits writes n with thousands separators: 137,022,464.
func groupDigits(n int64) string { return units.Digits(n) }

// formatShape writes a shape as [2, 3]; a scalar is [].
func formatShape(shape []int64) string {
	var b strings.Builder
	b.WriteByte('[')
	for i, d := range shape {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(strconv.FormatInt(d, 10))
	}
	b.WriteByte(']')
	return b.String()
}

// display makes a name or value from a file safe to print on a terminal:
// strings with control or invisible characters are quoted Go-style, so a
// hostile tensor name cannot move the cursor or fake lines of output.
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

// truncate shortens s to at most max runes, marking the cut.
func truncate(s string, max int) string {
	if utf8.RuneCountInString(s) <= max {
		return s
	}
	return string([]rune(s)[:max-1]) + "…"
}

// width is the number of terminal columns s is assumed to take.
func width(s string) int { return utf8.RuneCountInString(s) }

// padRight and padLeft align table columns.
func padRight(b *strings.Builder, s string, w int) {
	b.WriteString(s)
	for n := width(s); n < w; n++ {
		b.WriteByte(' ')
	}
}

func padLeft(b *strings.Builder, s string, w int) {
	for n := width(s); n < w; n++ {
		b.WriteByte(' ')
	}
	b.WriteString(s)
}

// plural writes "1 tensor", "2 tensors", "1,024 tensors", "3 entries",
// "2 aliases": English plurals of the nouns the CLI counts.
func plural(n int64, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return groupDigits(n) + " " + pluralOf(noun)
}

func pluralOf(noun string) string {
	switch {
	case strings.HasSuffix(noun, "y") && len(noun) > 1 && !strings.ContainsRune("aeiou", rune(noun[len(noun)-2])):
		return noun[:len(noun)-1] + "ies"
	case strings.HasSuffix(noun, "s"), strings.HasSuffix(noun, "x"), strings.HasSuffix(noun, "ch"), strings.HasSuffix(noun, "sh"):
		return noun + "es"
	}
	return noun + "s"
}

// parseSize reads a byte count such as "1048576", "512MiB", "200GB" or
// "-1" (no limit). Binary (KiB) and decimal (KB) suffixes are both accepted.
func parseSize(s string) (int64, error) {
	if strings.TrimSpace(s) == "-1" {
		return -1, nil
	}
	return sharded.ParseSize(s)
}
