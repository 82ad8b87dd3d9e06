// Package pylong parses integers as CPython does: PyLong_FromString (what
// int(str) and the pickle machine's INT and LONG text opcodes call) and C
// strtol (what CPython's C unpickler tries first for INT). Both the tar
// lister (tarfile calls int() on pax records) and the pickle machine need
// the same answers as CPython for every input, including the odd ones
// (underscores, a NUL inside the line, leading whitespace, power-of-two
// bases), so that a number Python reads is never refused or misread.
package pylong

import (
	"math"
	"math/big"
)

// Norm returns x as int64 when it fits, else x itself.
func Norm(x *big.Int) any {
	if x.IsInt64() {
		return x.Int64()
	}
	return x
}

// CString truncates a line at its first NUL, as C string functions see it.
func CString(l []byte) []byte {
	for i, c := range l {
		if c == 0 {
			return l[:i]
		}
	}
	return l
}

// isCSpace is C isspace (and CPython's Py_ISSPACE) in the C locale.
func isCSpace(c byte) bool { return c == ' ' || (c >= '\t' && c <= '\r') }

// digitValue is CPython's _PyLong_DigitValue: 0-9, a-z/A-Z as 10-35, else 37.
func digitValue(c byte) int {
	switch {
	case c >= '0' && c <= '9':
		return int(c - '0')
	case c >= 'a' && c <= 'z':
		return int(c-'a') + 10
	case c >= 'A' && c <= 'Z':
		return int(c-'A') + 10
	}
	return 37
}

// MaxStrDigits is CPython's default int_max_str_digits: decimal literals
// longer than this are a ValueError (power-of-two bases are not limited).
const MaxStrDigits = 4300

// Parse is PyLong_FromString(s, NULL, base) for base 0 or 10 over
// the C string of line followed by '\n'. maxDigits bounds the work for
// power-of-two bases too (longer is refused, never misread).
func Parse(line []byte, base int, maxDigits ...int) (any, bool) {
	limit := MaxStrDigits
	if len(maxDigits) > 0 {
		limit = min(limit, maxDigits[0])
	}
	s := CString(line)
	i := 0
	for i < len(s) && isCSpace(s[i]) {
		i++
	}
	neg := false
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		neg = s[i] == '-'
		i++
	}
	at := func(k int) byte {
		if k < len(s) {
			return s[k]
		}
		return 0
	}
	nonzeroIsError := false
	if base == 0 {
		switch {
		case at(i) != '0':
			base = 10
		case at(i+1) == 'x' || at(i+1) == 'X':
			base = 16
		case at(i+1) == 'o' || at(i+1) == 'O':
			base = 8
		case at(i+1) == 'b' || at(i+1) == 'B':
			base = 2
		default:
			nonzeroIsError = true // an old C-style octal literal: only zero is valid
			base = 10
		}
		if base != 10 {
			i += 2
			if at(i) == '_' {
				i++
			}
		}
	}
	if at(i) == '_' {
		return nil, false
	}
	digits := make([]byte, 0, 32)
	prev := byte(0)
	for ; i < len(s); i++ {
		c := s[i]
		if c == '_' {
			if prev == '_' {
				return nil, false
			}
		} else if digitValue(c) < base {
			digits = append(digits, c)
			if len(digits) > limit && (base == 10 || len(digits) > limit*4) {
				return nil, false
			}
		} else {
			break
		}
		prev = c
	}
	if prev == '_' || len(digits) == 0 {
		return nil, false
	}
	for ; i < len(s); i++ { // trailing whitespace, then the end of the C string
		if !isCSpace(s[i]) {
			return nil, false
		}
	}
	x, ok := new(big.Int).SetString(string(digits), base)
	if !ok {
		return nil, false
	}
	if nonzeroIsError && x.Sign() != 0 {
		return nil, false
	}
	if neg {
		x.Neg(x)
	}
	return Norm(x), true
}

// Strtol is C strtol(s, &end, 0) on a 64-bit long over the C string of
// line followed by '\n'; ok is false on overflow (ERANGE) and end is the
// index where parsing stopped (len(line) stands for the '\n', and any index
// at a NUL or past the C string for the terminator).
func Strtol(line []byte) (v int64, end int, ok bool) {
	c := CString(line)
	s := append(make([]byte, 0, len(c)+1), c...)
	s = append(s, '\n')
	i := 0
	for i < len(s) && isCSpace(s[i]) {
		i++
	}
	neg := false
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		neg = s[i] == '-'
		i++
	}
	base := 10
	if i < len(s) && s[i] == '0' {
		if i+1 < len(s) && (s[i+1] == 'x' || s[i+1] == 'X') {
			base, i = 16, i+2
		} else {
			base = 8
		}
	}
	save := i
	var u uint64
	over := false
	for ; i < len(s) && digitValue(s[i]) < base; i++ {
		d := uint64(digitValue(s[i]))
		if u > (math.MaxUint64-d)/uint64(base) {
			over = true
		}
		u = u*uint64(base) + d
	}
	if i == save {
		if base == 16 { // "0x" without hex digits: 0, ending at the 'x'
			return 0, save - 1, true
		}
		return 0, 0, true // no conversion: end is the start of the string
	}
	if over || (!neg && u > math.MaxInt64) || (neg && u > 1<<63) {
		return 0, i, false
	}
	if neg {
		return int64(-u), i, true
	}
	return int64(u), i, true
}
