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

// parseIntText parses a protocol-0 INT/LONG decimal line (Python int()).
func parseIntText(s string, maxDigits int) (any, bool) {
	s = strings.TrimSpace(s)
	s = strings.TrimSuffix(s, "L")
	if s == "" || len(s) > maxDigits {
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

// decodeRawUnicodeEscape decodes protocol-0 UNICODE lines: bytes are
// Latin-1 except \uXXXX and \UXXXXXXXX escapes.
func decodeRawUnicodeEscape(line []byte) (string, bool) {
	var b strings.Builder
	for i := 0; i < len(line); i++ {
		c := line[i]
		if c == '\\' && i+1 < len(line) && (line[i+1] == 'u' || line[i+1] == 'U') {
			n := 4
			if line[i+1] == 'U' {
				n = 8
			}
			if i+2+n > len(line) {
				return "", false
			}
			v, err := strconv.ParseUint(string(line[i+2:i+2+n]), 16, 32)
			if err != nil || v > utf8.MaxRune {
				return "", false
			}
			b.WriteRune(rune(v))
			i += 1 + n
			continue
		}
		b.WriteRune(rune(c))
	}
	return b.String(), true
}

// parseFloat parses a protocol-0 FLOAT line like Python's float().
func parseFloat(s string) (float64, error) {
	f, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	if err != nil {
		if ne, ok := err.(*strconv.NumError); ok && ne.Err == strconv.ErrRange {
			return f, nil
		}
	}
	return f, err
}
