package pickle

import (
	"github.com/gosafetensors/safetensors/torch/internal/pylong"
	"math"
	"math/big"
	"strconv"
	"strings"
	"unicode/utf8"
)

// decodeLong decodes a little-endian two's-complement integer (LONG1/LONG4).
func decodeLong(b []byte) any {
	if len(b) == 0 {
		return int64(0)
	}
	if len(b) <= 8 {
		var u uint64
		for i := len(b) - 1; i >= 0; i-- {
			u = u<<8 | uint64(b[i])
		}
		shift := 64 - 8*uint(len(b))
		return int64(u<<shift) >> shift // sign-extend
	}
	be := make([]byte, len(b))
	for i := range b {
		be[len(b)-1-i] = b[i]
	}
	x := new(big.Int).SetBytes(be)
	if b[len(b)-1]&0x80 != 0 {
		x.Sub(x, new(big.Int).Lsh(big.NewInt(1), uint(8*len(b))))
	}
	return normInt(x)
}

// The protocol-0 text operands are parsed the way CPython's C unpickler
// (_pickle.c, the one torch.load uses) parses them, so that a literal
// torch reads is never refused and never read as a different value. The
// line is what _Unpickler_Readline returns: the bytes before '\n', which C
// string functions see only up to the first NUL.

// parseIntOp decodes an INT operand like load_int: strtol(s, 0) first
// (so "010" is octal 8, "0x10" is 16, " 5" is 5), a bool when the line is
// two characters and the value 0 or 1, and PyLong_FromString(s, 0) when
// strtol stops before the newline or overflows.
func parseIntOp(line []byte, maxDigits int) (any, bool) {
	if len(line) == 0 {
		return nil, false
	}
	v, end, ok := strtol(line)
	if ok {
		c := cstr(line)
		if end >= len(c) || c[end] == '\n' { // '\n' or the C string's end
			if len(line) == 2 && (v == 0 || v == 1) {
				return v == 1, true
			}
			return v, true
		}
	}
	return parsePyLong(line, 0, maxDigits)
}

// parseLongOp decodes a LONG operand like load_long: one 'L' right before
// the newline is dropped, then PyLong_FromString(s, 0).
func parseLongOp(line []byte, maxDigits int) (any, bool) {
	if len(line) == 0 {
		return nil, false
	}
	if line[len(line)-1] == 'L' {
		line = line[:len(line)-1]
	}
	return parsePyLong(line, 0, maxDigits)
}

// parseStringRepr decodes the Python repr of a byte string as written by
// protocol-0 STRING ('abc' or "abc" with backslash escapes).
func parseStringRepr(line []byte) ([]byte, bool) {
	if len(line) < 2 {
		return nil, false
	}
	q := line[0]
	if (q != '\'' && q != '"') || line[len(line)-1] != q {
		return nil, false
	}
	body := line[1 : len(line)-1]
	out := make([]byte, 0, len(body))
	for i := 0; i < len(body); i++ {
		c := body[i]
		if c != '\\' {
			out = append(out, c)
			continue
		}
		i++
		if i >= len(body) {
			return nil, false
		}
		switch e := body[i]; e {
		case '\\', '\'', '"':
			out = append(out, e)
		case 'n':
			out = append(out, '\n')
		case 't':
			out = append(out, '\t')
		case 'r':
			out = append(out, '\r')
		case 'a':
			out = append(out, 7)
		case 'b':
			out = append(out, 8)
		case 'f':
			out = append(out, 12)
		case 'v':
			out = append(out, 11)
		case '\n':
		case 'x':
			if i+2 >= len(body) {
				return nil, false
			}
			v, err := strconv.ParseUint(string(body[i+1:i+3]), 16, 8)
			if err != nil {
				return nil, false
			}
			out = append(out, byte(v))
			i += 2
		default:
			if e >= '0' && e <= '7' {
				v := 0
				j := i
				for ; j < len(body) && j < i+3 && body[j] >= '0' && body[j] <= '7'; j++ {
					v = v*8 + int(body[j]-'0')
				}
				out = append(out, byte(v))
				i = j - 1
			} else {
				out = append(out, '\\', e)
			}
		}
	}
	return out, true
}

// decodeRawUnicodeEscape decodes protocol-0 UNICODE lines like CPython's
// raw-unicode-escape codec: bytes are Latin-1, except that \uXXXX and
// \UXXXXXXXX (exactly 4 or 8 hex digits) are escapes only when preceded by
// an odd number of backslashes (`\\u0041` stays as it is: the run of two
// backslashes is even).
// Surrogate code points, which Python strings can hold, are kept as their
// generalized UTF-8 (WTF-8) bytes, as BINUNICODE's surrogatepass decoding
// does: distinct Python strings stay distinct Go strings.
func decodeRawUnicodeEscape(line []byte) (string, bool) {
	var b strings.Builder
	for i := 0; i < len(line); {
		c := line[i]
		if c != '\\' {
			b.WriteRune(rune(c))
			i++
			continue
		}
		j := i
		for j < len(line) && line[j] == '\\' {
			j++
		}
		run := j - i
		if run%2 == 0 || j >= len(line) || (line[j] != 'u' && line[j] != 'U') {
			b.WriteString(strings.Repeat("\\", run))
			i = j
			continue
		}
		b.WriteString(strings.Repeat("\\", run-1))
		n := 4
		if line[j] == 'U' {
			n = 8
		}
		if j+1+n > len(line) {
			return "", false
		}
		var v rune
		for _, h := range line[j+1 : j+1+n] {
			var d byte
			switch {
			case h >= '0' && h <= '9':
				d = h - '0'
			case h >= 'a' && h <= 'f':
				d = h - 'a' + 10
			case h >= 'A' && h <= 'F':
				d = h - 'A' + 10
			default:
				return "", false
			}
			v = v<<4 | rune(d)
		}
		if v > utf8.MaxRune || v < 0 {
			return "", false
		}
		writeWTF8(&b, v)
		i = j + 1 + n
	}
	return b.String(), true
}

// writeWTF8 writes r as UTF-8, surrogate code points included.
func writeWTF8(b *strings.Builder, r rune) {
	if r >= 0xd800 && r <= 0xdfff {
		b.WriteByte(0xe0 | byte(r>>12))
		b.WriteByte(0x80 | byte(r>>6)&0x3f)
		b.WriteByte(0x80 | byte(r)&0x3f)
		return
	}
	b.WriteRune(r)
}

// validWTF8 reports whether b is UTF-8 in which encoded surrogates are
// allowed: what CPython's utf-8 decoder accepts with "surrogatepass"
// (BINUNICODE, SHORT_BINUNICODE, BINUNICODE8).
func validWTF8(b []byte) bool {
	for i := 0; i < len(b); {
		if b[i] < utf8.RuneSelf {
			i++
			continue
		}
		r, n := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && n == 1 {
			if i+2 < len(b) && b[i] == 0xed && b[i+1] >= 0xa0 && b[i+1] <= 0xbf && b[i+2] >= 0x80 && b[i+2] <= 0xbf {
				i += 3
				continue
			}
			return false
		}
		i += n
	}
	return true
}

// parseFloatOp decodes a FLOAT operand like load_float:
// PyOS_string_to_double over the C string, which must then stop at the
// newline or the NUL. No leading whitespace, no hex, no underscores;
// inf/infinity/nan in any case with an optional sign; overflow is an error,
// underflow is not.
func parseFloatOp(line []byte) (float64, bool) {
	if len(line) == 0 {
		return 0, false
	}
	s := cstr(line)
	n := floatPrefix(s)
	if n == 0 || n != len(s) {
		return 0, false
	}
	t := string(s)
	body := strings.TrimLeft(t, "+-")
	if len(body) > 0 && (body[0] == 'i' || body[0] == 'I' || body[0] == 'n' || body[0] == 'N') {
		v := math.Inf(1)
		if body[0] == 'n' || body[0] == 'N' {
			v = math.NaN()
		}
		if t[0] == '-' {
			v = -v
		}
		return v, true
	}
	f, err := strconv.ParseFloat(t, 64)
	if err != nil {
		return 0, false
	}
	return f, true
}

// floatPrefix is the length of the longest prefix of s that _Py_dg_strtod
// or _Py_parse_inf_or_nan accepts (0: none).
func floatPrefix(s []byte) int {
	i := 0
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		i++
	}
	digits := func(j int) int {
		for j < len(s) && s[j] >= '0' && s[j] <= '9' {
			j++
		}
		return j
	}
	j := digits(i)
	mant := j > i
	if j < len(s) && s[j] == '.' {
		k := digits(j + 1)
		if k > j+1 || mant {
			mant = true
			j = k
		}
	}
	if !mant {
		rest := strings.ToLower(string(s[i:min(len(s), i+8)]))
		switch {
		case strings.HasPrefix(rest, "infinity"):
			return i + 8
		case strings.HasPrefix(rest, "inf"), strings.HasPrefix(rest, "nan"):
			return i + 3
		}
		return 0
	}
	if j < len(s) && (s[j] == 'e' || s[j] == 'E') {
		k := j + 1
		if k < len(s) && (s[k] == '+' || s[k] == '-') {
			k++
		}
		if e := digits(k); e > k {
			j = e
		}
	}
	return j
}

// CPython's integer parsing, shared with the tar lister.
var (
	cstr        = pylong.CString
	parsePyLong = pylong.Parse
	strtol      = pylong.Strtol
	normInt     = pylong.Norm
)
