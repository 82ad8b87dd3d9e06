package sharded

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"
)

// pyNode is a parsed JSON value, kept so that it can be written the way
// Python's json.dumps(v, indent=2, sort_keys=True) writes it.
type pyNode struct {
	kind jsontext.Kind
	lit  string // a number or literal as written, or a string's value
	keys []string
	vals []*pyNode
}

// appendPython re-encodes the JSON value b as Python's json.dumps with
// indent=2, sort_keys=True and the default ensure_ascii=True.
func appendPython(dst, b []byte) ([]byte, error) {
	dec := jsontext.NewDecoder(bytes.NewReader(b))
	n, err := readPyNode(dec)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errNotJSON, err)
	}
	return n.append(dst, 0), nil
}

func readPyNode(dec *jsontext.Decoder) (*pyNode, error) {
	tok, err := dec.ReadToken()
	if err != nil {
		return nil, err
	}
	n := &pyNode{kind: tok.Kind()}
	switch n.kind {
	case '{':
		for dec.PeekKind() != '}' {
			k, err := dec.ReadToken()
			if err != nil {
				return nil, err
			}
			key := k.String() // the token is voided by the next read
			v, err := readPyNode(dec)
			if err != nil {
				return nil, err
			}
			n.keys = append(n.keys, key)
			n.vals = append(n.vals, v)
		}
		if _, err := dec.ReadToken(); err != nil {
			return nil, err
		}
		// Python sorts str keys by code point, which is the bytewise
		// order of their UTF-8 encoding.
		idx := make([]int, len(n.keys))
		for i := range idx {
			idx[i] = i
		}
		slices.SortStableFunc(idx, func(a, b int) int { return strings.Compare(n.keys[a], n.keys[b]) })
		keys, vals := make([]string, len(idx)), make([]*pyNode, len(idx))
		for i, j := range idx {
			keys[i], vals[i] = n.keys[j], n.vals[j]
		}
		n.keys, n.vals = keys, vals
	case '[':
		for dec.PeekKind() != ']' {
			v, err := readPyNode(dec)
			if err != nil {
				return nil, err
			}
			n.vals = append(n.vals, v)
		}
		if _, err := dec.ReadToken(); err != nil {
			return nil, err
		}
	case '"':
		n.lit = tok.String()
	default:
		n.lit = string(mustRaw(tok))
	}
	return n, nil
}

// mustRaw returns a number or literal token as written.
func mustRaw(tok jsontext.Token) []byte {
	switch tok.Kind() {
	case 'n':
		return []byte("null")
	case 't':
		return []byte("true")
	case 'f':
		return []byte("false")
	}
	return []byte(tok.String())
}

func (n *pyNode) append(b []byte, depth int) []byte {
	switch n.kind {
	case '{', '[':
		open, close := byte('{'), byte('}')
		if n.kind == '[' {
			open, close = '[', ']'
		}
		if len(n.vals) == 0 {
			return append(b, open, close)
		}
		b = append(b, open)
		for i, v := range n.vals {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, '\n')
			b = appendIndent(b, depth+1)
			if n.kind == '{' {
				b = appendPyString(b, n.keys[i])
				b = append(b, ": "...)
			}
			b = v.append(b, depth+1)
		}
		b = append(b, '\n')
		b = appendIndent(b, depth)
		return append(b, close)
	case '"':
		return appendPyString(b, n.lit)
	}
	return append(b, n.lit...)
}

func appendIndent(b []byte, depth int) []byte {
	for range depth {
		b = append(b, "  "...)
	}
	return b
}

// appendPyString quotes s as Python's json module does with
// ensure_ascii=True: \" \\ \n \r \t \b \f, every other character outside
// printable ASCII as \u00XX with lowercase hex, characters above U+FFFF as
// a surrogate pair.
func appendPyString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	u := func(b []byte, r rune) []byte {
		return append(b, '\\', 'u', hex[r>>12&15], hex[r>>8&15], hex[r>>4&15], hex[r&15])
	}
	b = append(b, '"')
	for _, r := range s {
		switch {
		case r == '"':
			b = append(b, `\"`...)
		case r == '\\':
			b = append(b, `\\`...)
		case r == '\n':
			b = append(b, `\n`...)
		case r == '\r':
			b = append(b, `\r`...)
		case r == '\t':
			b = append(b, `\t`...)
		case r == '\b':
			b = append(b, `\b`...)
		case r == '\f':
			b = append(b, `\f`...)
		case r >= 0x20 && r < 0x7f:
			b = append(b, byte(r))
		case r > 0xffff:
			r1, r2 := utf16.EncodeRune(r)
			b = u(u(b, r1), r2)
		case r == utf8.RuneError:
			b = u(b, 0xfffd)
		default:
			b = u(b, r)
		}
	}
	return append(b, '"')
}
