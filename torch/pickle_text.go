package torch

import (
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

// normInt returns x as int64 when it fits, else x itself.
func normInt(x *big.Int) any {
	if x.IsInt64() {
		return x.Int64()
	}
	return x
}

// parseIntText parses the operand of a protocol-0 INT or LONG opcode, or of
// a text GET/PUT memo index.
//
// CPython's C unpickler (the one torch.load uses) does not read these as
// plain decimal: INT goes through strtol(s, 0) (so "010" is octal 8 and
// "0x10" is 16) with a PyLong_FromString(s, 0) fallback that also accepts
// whitespace, underscores and 0o/0b prefixes, LONG through
// PyLong_FromString(s, 0), and memo indices through PyLong_FromString(s, 10).
// Reproducing every one of those dialects is error-prone, so only the
// spelling every reader agrees on is accepted: an optional sign and decimal
// digits without leading zeros (leading zeros are harmless, and accepted,
// only for memo indices, which are base 10). Anything else is refused rather
// than risk decoding a different number than torch would (pickle.py writes
// "I%d\n", "L%dL\n" and "g%d\n", which always fit). maxDigits bounds the work.
func parseIntText(s string, maxDigits int, leadingZeros bool) (any, bool) {
	digits := s
	if digits != "" && (digits[0] == '+' || digits[0] == '-') {
		digits = digits[1:]
	}
	if digits == "" || len(digits) > maxDigits {
		return nil, false
	}
	for i := 0; i < len(digits); i++ {
		if digits[i] < '0' || digits[i] > '9' {
			return nil, false
		}
	}
	if !leadingZeros && len(digits) > 1 && digits[0] == '0' {
		return nil, false
	}
	if v, err := strconv.ParseInt(s, 10, 64); err == nil {
		return v, true
	}
	x, ok := new(big.Int).SetString(s, 10)
	if !ok {
		return nil, false
	}
	return normInt(x), true
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
// Surrogate code points, which Python strings can hold but Go strings
// cannot, are refused: mapping them to U+FFFD would merge distinct keys.
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
		if v > utf8.MaxRune || v < 0 || (v >= 0xd800 && v <= 0xdfff) {
			return "", false
		}
		b.WriteRune(v)
		i = j + 1 + n
	}
	return b.String(), true
}

// parseFloat parses a protocol-0 FLOAT line like CPython's C unpickler
// (PyOS_string_to_double over the whole line): no surrounding whitespace,
// decimal notation or inf/infinity/nan, and overflow is an error. Go's
// ParseFloat also takes hex floats and underscores, which Python refuses.
func parseFloat(s string) (float64, error) {
	if s == "" || strings.TrimSpace(s) != s || strings.ContainsAny(s, "xX_pP") {
		return 0, strconv.ErrSyntax
	}
	return strconv.ParseFloat(s, 64) // an overflow is an ErrRange error
}
