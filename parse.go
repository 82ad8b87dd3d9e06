package safetensors

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io"
	"slices"
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

	nameOff, nameLen int // the name's place in the parser's arena
}

// headerParser turns header JSON into raw tensor entries and metadata.
type headerParser struct {
	dec      *jsontext.Decoder
	base     int64 // file offset of the JSON's first byte
	dims     []uint64
	scratch  []byte
	warnings []string
	lenient  bool
	raw      []rawTensor
	names    []byte // arena of tensor names

	depthOffset int // nesting of this decoder's input inside the header
}

// parseHeaderJSON parses the JSON of a header that starts at file offset
// base. It checks UTF-8 first, as the reference does. A lenient parse
// accepts duplicate keys, the last one winning, as the reference does; it
// serves only to explain how the reference would read a file we refuse.
//
// Duplicate keys are detected here rather than by the tokenizer, which is
// several times faster for large headers: tensor names through the index
// map the Header needs anyway, metadata keys through the metadata map, and
// keys inside unknown fields as they are skipped. The returned entries are
// sorted into file order and index maps names to positions in them.
func parseHeaderJSON(b []byte, base int64, lenient bool) (raw []rawTensor, index map[string]int, meta map[string]string, warnings []string, err error) {
	if !utf8.Valid(b) {
		off := base + int64(invalidUTF8At(b))
		return nil, nil, nil, nil, newError(ErrInvalidHeader, off, "header is not valid UTF-8")
	}
	p := headerParser{
		dec:     jsontext.NewDecoder(bytes.NewBuffer(b), jsontext.AllowDuplicateNames(true)),
		base:    base,
		lenient: lenient,
	}
	// Size the entries from a count of braces (an upper bound in practice):
	// one vectorized pass saves many reallocations of a large slice.
	n := bytes.Count(b, []byte{'{'})
	p.raw = make([]rawTensor, 0, n)
	p.dims = make([]uint64, 0, 2*n+2)
	p.names = make([]byte, 0, len(b)/4)
	meta, err = p.parse()
	if err != nil {
		return nil, nil, nil, nil, p.wrap(err)
	}
	raw = p.raw
	if lenient {
		raw = lastWins(raw)
	}
	sortRaw(raw)
	index = make(map[string]int, len(raw))
	for i := range raw {
		if j, dup := index[raw[i].name]; dup {
			later := max(raw[i].pos, raw[j].pos)
			return nil, nil, nil, nil, &duplicateKeyError{newError(ErrInvalidHeaderDeserialization, later,
				"duplicate tensor name %q (refused: readers could disagree on which entry is meant; stricter than the reference", raw[i].name)}
		}
		index[raw[i].name] = i
	}
	return raw, index, meta, p.warnings, nil
}

// sortRaw puts entries in file order, (begin, end), as the reference does
// before validating; files are nearly always in order already.
func sortRaw(raw []rawTensor) {
	less := func(a, b rawTensor) int {
		if c := cmp.Compare(a.begin, b.begin); c != 0 {
			return c
		}
		return cmp.Compare(a.end, b.end)
	}
	if !slices.IsSortedFunc(raw, less) {
		slices.SortStableFunc(raw, less)
	}
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
	var dup *duplicateKeyError
	if errors.As(err, &dup) {
		return dup
	}
	var fe *FormatError
	if errors.As(err, &fe) {
		return fe
	}
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
		return newError(ErrInvalidHeaderDeserialization, p.base+se.ByteOffset, "invalid JSON: %s", msg)
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return newError(ErrInvalidHeaderDeserialization, p.base+p.dec.InputOffset(), "invalid JSON: unexpected end of header")
	}
	return newError(ErrInvalidHeaderDeserialization, p.base+p.dec.InputOffset(), "invalid JSON: %v", err)
}

func (p *headerParser) parse() (map[string]string, error) {
	if k := p.dec.PeekKind(); k != '{' {
		if k == 0 {
			_, err := p.dec.ReadToken()
			if err != nil {
				return nil, err
			}
		}
		return nil, p.fail(nil, "header must be a JSON object, found %s", kindName(k))
	}
	if _, err := p.dec.ReadToken(); err != nil {
		return nil, err
	}
	var (
		meta     map[string]string
		haveMeta bool
	)
	for p.dec.PeekKind() != '}' {
		pos := p.dec.InputOffset()
		v, err := p.dec.ReadValue()
		if err != nil {
			return nil, err
		}
		nameBytes, err := p.unquote(v)
		if err != nil {
			return nil, err
		}
		if string(nameBytes) == metadataKey {
			if haveMeta && !p.lenient {
				return nil, &duplicateKeyError{newError(ErrInvalidHeaderDeserialization, p.base+pos,
					"duplicate key %q (refused: readers could disagree on which entry is meant; stricter than the reference", metadataKey)}
			}
			haveMeta = true
			if meta, err = p.metadata(); err != nil {
				return nil, err
			}
			continue
		}
		// Names go into one arena, turned into a single string at the end:
		// one allocation instead of one per tensor.
		nameOff := len(p.names)
		p.names = append(p.names, nameBytes...)
		t, err := p.tensorValue(p.names[nameOff:], pos)
		if err != nil {
			return nil, err
		}
		t.nameOff, t.nameLen = nameOff, len(nameBytes)
		p.raw = append(p.raw, t)
	}
	arena := string(p.names)
	for i := range p.raw {
		r := &p.raw[i]
		r.name = arena[r.nameOff : r.nameOff+r.nameLen]
	}
	if _, err := p.dec.ReadToken(); err != nil { // '}'
		return nil, err
	}
	if _, err := p.dec.ReadToken(); err != io.EOF {
		if err == nil {
			return nil, p.fail(nil, "trailing data after the header object")
		}
		return nil, err
	}
	return meta, nil
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
		if _, dup := meta[key]; dup && !p.lenient {
			return nil, &duplicateKeyError{newError(ErrInvalidHeaderDeserialization, p.base+p.dec.InputOffset(),
				"duplicate metadata key %q (refused: readers could disagree on which entry is meant; stricter than the reference", key)}
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
		dupField := func(have bool) error {
			if have {
				return p.fail(&name, "duplicate field %q", field)
			}
			return nil
		}
		switch string(field) {
		case "dtype":
			if err := dupField(haveDType); err != nil {
				return t, err
			}
			if t.dtype, err = p.dtype(&name); err != nil {
				return t, err
			}
			haveDType = true
		case "shape":
			if err := dupField(haveShape); err != nil {
				return t, err
			}
			start := len(p.dims)
			if err := p.uints(&name, "shape", -1); err != nil {
				return t, err
			}
			t.shape = p.dims[start:len(p.dims):len(p.dims)]
			haveShape = true
		case "data_offsets":
			if err := dupField(haveOffsets); err != nil {
				return t, err
			}
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
// reference's recursion limit and duplicate keys in nested objects.
func (p *headerParser) skip(name *string) error {
	base := p.dec.StackDepth()
	var keys []map[string]struct{} // one per open object
	for {
		kind := p.dec.PeekKind()
		switch kind {
		case '[', '{':
			if _, err := p.dec.ReadToken(); err != nil {
				return err
			}
			if p.dec.StackDepth()+p.depthOffset > maxJSONDepth {
				return p.fail(name, "JSON nested deeper than %d levels", maxJSONDepth)
			}
			if kind == '{' {
				keys = append(keys, map[string]struct{}{})
			}
		case ']', '}':
			if _, err := p.dec.ReadToken(); err != nil {
				return err
			}
			if kind == '}' {
				keys = keys[:len(keys)-1]
			}
		default:
			depth := p.dec.StackDepth()
			if k, n := p.dec.StackIndex(depth); depth > base && k == '{' {
				if n%2 == 0 { // the next value is a member name
					v, err := p.dec.ReadValue()
					if err != nil {
						return err
					}
					key, err := p.unquote(v)
					if err != nil {
						return err
					}
					m := keys[len(keys)-1]
					if _, dup := m[string(key)]; dup && !p.lenient {
						return &duplicateKeyError{newError(ErrInvalidHeaderDeserialization, p.base+p.dec.InputOffset(),
							"duplicate key %q inside an unknown field of tensor %q (refused: readers could disagree on which entry is meant; stricter than the reference", key, *name)}
					}
					m[string(key)] = struct{}{}
					continue
				}
			}
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

// tensorValue reads one tensor entry. The tokenizer validates the whole
// value as JSON first; the canonical form writers produce is then decoded
// by fastTensor, and anything else (escapes, unknown fields, wrong types)
// goes through the token-by-token path, which gives precise errors.
func (p *headerParser) tensorValue(nameBytes []byte, pos int64) (rawTensor, error) {
	v, err := p.dec.ReadValue()
	if err != nil {
		return rawTensor{}, err
	}
	if t, ok := p.fastTensor(v, pos); ok {
		return t, nil
	}
	name := string(nameBytes)
	start := p.dec.InputOffset() - int64(len(v))
	sub := &headerParser{
		dec:         jsontext.NewDecoder(bytes.NewBuffer(v), jsontext.AllowDuplicateNames(true)),
		base:        p.base + start,
		dims:        p.dims,
		scratch:     p.scratch,
		warnings:    p.warnings,
		lenient:     p.lenient,
		depthOffset: p.depthOffset + 1,
	}
	t, err := sub.tensor(name, pos)
	p.dims, p.scratch, p.warnings = sub.dims, sub.scratch, sub.warnings
	if err != nil {
		return t, sub.wrap(err)
	}
	return t, nil
}
