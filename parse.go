package safetensors

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"
)

// maxJSONDepth mirrors serde_json's recursion limit as the reference uses it:
// nesting of 128 levels or more is refused.
const maxJSONDepth = 127

// rawTensor is a tensor entry as parsed, before validation. Numbers stay
// uint64 so that validation sees exactly what the reference sees.
type rawTensor struct {
	name       string
	dtype      DType
	shape      []uint64
	begin, end uint64
	pos        int64 // absolute file offset of the entry
}

// headerParser turns header JSON into raw tensor entries and metadata.
type headerParser struct {
	dec      *jsontext.Decoder
	base     int64 // file offset of the JSON's first byte
	dims     []uint64
	scratch  []byte
	warnings []string
	lenient  bool
}

// parseHeaderJSON parses the JSON of a header that starts at file offset
// base. It checks UTF-8 first, as the reference does. A lenient parse
// accepts duplicate keys, the last one winning, as the reference does; it
// serves only to explain how the reference would read a file we refuse.
func parseHeaderJSON(b []byte, base int64, lenient bool) ([]rawTensor, map[string]string, []string, error) {
	if !utf8.Valid(b) {
		off := base + int64(invalidUTF8At(b))
		return nil, nil, nil, newError(ErrInvalidHeader, off, "header is not valid UTF-8")
	}
	p := headerParser{
		dec:     jsontext.NewDecoder(bytes.NewBuffer(b), jsontext.AllowDuplicateNames(lenient)),
		base:    base,
		lenient: lenient,
	}
	raw, meta, err := p.parse()
	if err != nil {
		return nil, nil, nil, p.wrap(err)
	}
	return raw, meta, p.warnings, nil
}

func invalidUTF8At(b []byte) int {
	for i := 0; i < len(b); {
		r, n := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && n <= 1 {
			return i
		}
		i += n
	}
	return len(b)
}

// deserializationError is a problem found by the parser itself (as opposed
// to the tokenizer); off is relative to the JSON.
type deserializationError struct {
	off    int64
	tensor *string
	msg    string
}

func (e *deserializationError) Error() string { return e.msg }

func (p *headerParser) fail(tensor *string, format string, args ...any) error {
	return &deserializationError{off: p.dec.InputOffset(), tensor: tensor, msg: fmt.Sprintf(format, args...)}
}

// wrap converts parser and tokenizer errors to *FormatError.
func (p *headerParser) wrap(err error) error {
	var de *deserializationError
	if errors.As(err, &de) {
		fe := newError(ErrInvalidHeaderDeserialization, p.base+de.off, "%s", de.msg)
		if de.tensor != nil {
			fe.Tensor, fe.named = *de.tensor, true
		}
		return fe
	}
	var se *jsontext.SyntacticError
	if errors.As(err, &se) {
		msg := se.Err.Error()
		if errors.Is(se.Err, jsontext.ErrDuplicateName) {
			return &duplicateKeyError{FormatError: newError(ErrInvalidHeaderDeserialization, p.base+se.ByteOffset,
				"duplicate key %q (refused: readers could disagree on which entry is meant; stricter than the reference", string(se.JSONPointer))}
		}
		return newError(ErrInvalidHeaderDeserialization, p.base+se.ByteOffset, "invalid JSON: %s", msg)
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return newError(ErrInvalidHeaderDeserialization, p.base+p.dec.InputOffset(), "invalid JSON: unexpected end of header")
	}
	return newError(ErrInvalidHeaderDeserialization, p.base+p.dec.InputOffset(), "invalid JSON: %v", err)
}

func (p *headerParser) parse() ([]rawTensor, map[string]string, error) {
	if k := p.dec.PeekKind(); k != '{' {
		if k == 0 {
			_, err := p.dec.ReadToken()
			if err != nil {
				return nil, nil, err
			}
		}
		return nil, nil, p.fail(nil, "header must be a JSON object, found %s", kindName(k))
	}
	if _, err := p.dec.ReadToken(); err != nil {
		return nil, nil, err
	}
	var (
		raw      []rawTensor
		meta     map[string]string
		haveMeta bool
	)
	for p.dec.PeekKind() != '}' {
		pos := p.dec.InputOffset()
		name, err := p.readName()
		if err != nil {
			return nil, nil, err
		}
		if name == metadataKey {
			if haveMeta && !p.lenient {
				return nil, nil, p.fail(nil, "duplicate key %q (stricter than the reference)", metadataKey)
			}
			haveMeta = true
			if meta, err = p.metadata(); err != nil {
				return nil, nil, err
			}
			continue
		}
		t, err := p.tensor(name, pos)
		if err != nil {
			return nil, nil, err
		}
		raw = append(raw, t)
	}
	if p.lenient {
		raw = lastWins(raw)
	}
	if _, err := p.dec.ReadToken(); err != nil { // '}'
		return nil, nil, err
	}
	if _, err := p.dec.ReadToken(); err != io.EOF {
		if err == nil {
			return nil, nil, p.fail(nil, "trailing data after the header object")
		}
		return nil, nil, err
	}
	return raw, meta, nil
}

func kindName(k jsontext.Kind) string {
	switch k {
	case 'n':
		return "null"
	case 'f', 't':
		return "a boolean"
	case '"':
		return "a string"
	case '0':
		return "a number"
	case '[':
		return "an array"
	case '{':
		return "an object"
	}
	return "invalid JSON"
}

// readName reads an object member name or string value without allocating
// when it has no escapes.
func (p *headerParser) readName() (string, error) {
	v, err := p.dec.ReadValue()
	if err != nil {
		return "", err
	}
	s, err := p.unquote(v)
	return string(s), err
}

func (p *headerParser) unquote(v jsontext.Value) ([]byte, error) {
	if len(v) < 2 || v[0] != '"' {
		return nil, p.fail(nil, "expected a string, found %s", kindName(v.Kind()))
	}
	inner := v[1 : len(v)-1]
	if bytes.IndexByte(inner, '\\') < 0 {
		return inner, nil
	}
	var err error
	p.scratch, err = jsontext.AppendUnquote(p.scratch[:0], v)
	return p.scratch, err
}

func (p *headerParser) metadata() (map[string]string, error) {
	switch p.dec.PeekKind() {
	case 'n':
		_, err := p.dec.ReadToken()
		return nil, err
	case '{':
	default:
		k := p.dec.PeekKind()
		return nil, p.fail(nil, "%q must be an object of strings, found %s", metadataKey, kindName(k))
	}
	if _, err := p.dec.ReadToken(); err != nil {
		return nil, err
	}
	meta := map[string]string{}
	for p.dec.PeekKind() != '}' {
		key, err := p.readName()
		if err != nil {
			return nil, err
		}
		if k := p.dec.PeekKind(); k != '"' {
			return nil, p.fail(nil, "metadata value for key %q must be a string, found %s", key, kindName(k))
		}
		val, err := p.readName()
		if err != nil {
			return nil, err
		}
		meta[key] = val
	}
	_, err := p.dec.ReadToken()
	return meta, err
}

func (p *headerParser) tensor(name string, pos int64) (rawTensor, error) {
	t := rawTensor{name: name, pos: p.base + pos}
	if k := p.dec.PeekKind(); k != '{' {
		return t, p.fail(&name, "tensor entry must be an object, found %s", kindName(k))
	}
	if _, err := p.dec.ReadToken(); err != nil {
		return t, err
	}
	var haveDType, haveShape, haveOffsets bool
	for p.dec.PeekKind() != '}' {
		v, err := p.dec.ReadValue()
		if err != nil {
			return t, err
		}
		field, err := p.unquote(v)
		if err != nil {
			return t, err
		}
		switch string(field) {
		case "dtype":
			if t.dtype, err = p.dtype(&name); err != nil {
				return t, err
			}
			haveDType = true
		case "shape":
			start := len(p.dims)
			if err := p.uints(&name, "shape", -1); err != nil {
				return t, err
			}
			t.shape = p.dims[start:len(p.dims):len(p.dims)]
			haveShape = true
		case "data_offsets":
			start := len(p.dims)
			if err := p.uints(&name, "data_offsets", 2); err != nil {
				return t, err
			}
			t.begin, t.end = p.dims[start], p.dims[start+1]
			p.dims = p.dims[:start]
			haveOffsets = true
		default:
			if len(p.warnings) < 100 {
				p.warnings = append(p.warnings, fmt.Sprintf("tensor %q: unknown field %q ignored", name, field))
			}
			if err := p.skip(&name); err != nil {
				return t, err
			}
		}
	}
	switch {
	case !haveDType:
		return t, p.fail(&name, "missing field \"dtype\"")
	case !haveShape:
		return t, p.fail(&name, "missing field \"shape\"")
	case !haveOffsets:
		return t, p.fail(&name, "missing field \"data_offsets\"")
	}
	_, err := p.dec.ReadToken()
	return t, err
}

func (p *headerParser) dtype(name *string) (DType, error) {
	if k := p.dec.PeekKind(); k != '"' {
		return 0, p.fail(name, "dtype must be a string, found %s", kindName(k))
	}
	v, err := p.dec.ReadValue()
	if err != nil {
		return 0, err
	}
	s, err := p.unquote(v)
	if err != nil {
		return 0, err
	}
	d, ok := ParseDType(string(s))
	if !ok {
		return 0, p.fail(name, "unknown dtype %q (dtypes are upper case, e.g. F32)", s)
	}
	return d, nil
}

// uints reads an array of non-negative integers below 2^64 onto p.dims;
// want >= 0 requires exactly that many.
func (p *headerParser) uints(name *string, field string, want int) error {
	if k := p.dec.PeekKind(); k != '[' {
		return p.fail(name, "%s must be an array of integers, found %s", field, kindName(k))
	}
	if _, err := p.dec.ReadToken(); err != nil {
		return err
	}
	n := 0
	for p.dec.PeekKind() != ']' {
		if k := p.dec.PeekKind(); k != '0' {
			if k == 0 {
				_, err := p.dec.ReadValue()
				return err
			}
			return p.fail(name, "%s must hold integers, found %s", field, kindName(k))
		}
		v, err := p.dec.ReadValue()
		if err != nil {
			return err
		}
		u, ok := parseUint(v)
		if !ok {
			return p.fail(name, "%s value %s is not an integer in [0, 2^64)", field, v)
		}
		p.dims = append(p.dims, u)
		n++
	}
	if _, err := p.dec.ReadToken(); err != nil {
		return err
	}
	if want >= 0 && n != want {
		return p.fail(name, "%s must have exactly %d entries, found %d", field, want, n)
	}
	return nil
}

// parseUint accepts only decimal digits (the tokenizer has already refused
// leading zeros) and rejects values of 2^64 or more.
func parseUint(b []byte) (uint64, bool) {
	if len(b) == 0 {
		return 0, false
	}
	var u uint64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		d := uint64(c - '0')
		if u > (1<<64-1-d)/10 {
			return 0, false
		}
		u = u*10 + d
	}
	return u, true
}

// skip consumes one value of any kind, refusing nesting deeper than the
// reference's recursion limit.
func (p *headerParser) skip(name *string) error {
	base := p.dec.StackDepth()
	for {
		switch p.dec.PeekKind() {
		case '[', '{':
			if _, err := p.dec.ReadToken(); err != nil {
				return err
			}
			if p.dec.StackDepth() > maxJSONDepth {
				return p.fail(name, "JSON nested deeper than %d levels", maxJSONDepth)
			}
		case ']', '}':
			if _, err := p.dec.ReadToken(); err != nil {
				return err
			}
		default:
			if _, err := p.dec.ReadValue(); err != nil {
				return err
			}
		}
		if p.dec.StackDepth() == base {
			return nil
		}
	}
}

// lastWins keeps the last entry of each name, as a map-building reader does.
func lastWins(raw []rawTensor) []rawTensor {
	last := make(map[string]int, len(raw))
	for i, t := range raw {
		last[t.name] = i
	}
	out := raw[:0]
	for i, t := range raw {
		if last[t.name] == i {
			out = append(out, t)
		}
	}
	return out
}

// duplicateKeyError is a refused duplicate key whose message is completed
// with the reference's verdict once that is known.
type duplicateKeyError struct{ *FormatError }

func (e *duplicateKeyError) Unwrap() error { return e.FormatError }
