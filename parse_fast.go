package safetensors

// fastTensor decodes a tensor entry already validated as JSON when it has
// exactly the fields dtype, shape and data_offsets, with plain values and no
// escapes. It reports false, consuming nothing, for anything else.
func (p *headerParser) fastTensor(v []byte, pos int64) (rawTensor, bool) {
	t := rawTensor{pos: p.base + pos}
	mark := len(p.dims)
	ok := p.fastFields(v, &t)
	if !ok {
		p.dims = p.dims[:mark]
	}
	return t, ok
}

func (p *headerParser) fastFields(v []byte, t *rawTensor) bool {
	i := skipSpace(v, 0)
	if i >= len(v) || v[i] != '{' {
		return false
	}
	i++
	var seen uint8
	for {
		i = skipSpace(v, i)
		if i >= len(v) {
			return false
		}
		if v[i] == '}' {
			return seen == 7 && skipSpace(v, i+1) == len(v)
		}
		if v[i] == ',' {
			i = skipSpace(v, i+1)
		}
		key, j, ok := plainString(v, i)
		if !ok {
			return false
		}
		i = skipSpace(v, j)
		if i >= len(v) || v[i] != ':' {
			return false
		}
		i = skipSpace(v, i+1)
		switch string(key) {
		case "dtype":
			s, j, ok := plainString(v, i)
			if !ok || seen&1 != 0 {
				return false
			}
			d, known := ParseDType(string(s))
			if !known {
				return false
			}
			t.dtype, seen, i = d, seen|1, j
		case "shape":
			start := len(p.dims)
			j, ok := p.plainUints(v, i)
			if !ok || seen&2 != 0 {
				return false
			}
			t.shape = p.dims[start:len(p.dims):len(p.dims)]
			seen, i = seen|2, j
		case "data_offsets":
			start := len(p.dims)
			j, ok := p.plainUints(v, i)
			if !ok || seen&4 != 0 || len(p.dims)-start != 2 {
				return false
			}
			t.begin, t.end = p.dims[start], p.dims[start+1]
			p.dims = p.dims[:start]
			seen, i = seen|4, j
		default:
			return false
		}
	}
}

func skipSpace(v []byte, i int) int {
	for i < len(v) && (v[i] == ' ' || v[i] == '\n' || v[i] == '\t' || v[i] == '\r') {
		i++
	}
	return i
}

// plainString returns the contents of the string starting at v[i] when it
// has no escapes, and the index after its closing quote.
func plainString(v []byte, i int) ([]byte, int, bool) {
	if i >= len(v) || v[i] != '"' {
		return nil, 0, false
	}
	for j := i + 1; j < len(v); j++ {
		switch v[j] {
		case '"':
			return v[i+1 : j], j + 1, true
		case '\\':
			return nil, 0, false
		}
	}
	return nil, 0, false
}

// plainUints appends the integers of the array starting at v[i] to p.dims.
func (p *headerParser) plainUints(v []byte, i int) (int, bool) {
	if i >= len(v) || v[i] != '[' {
		return 0, false
	}
	i = skipSpace(v, i+1)
	if i < len(v) && v[i] == ']' {
		return i + 1, true
	}
	for {
		j := i
		for j < len(v) && v[j] >= '0' && v[j] <= '9' {
			j++
		}
		u, ok := parseUint(v[i:j])
		if !ok {
			return 0, false
		}
		p.dims = append(p.dims, u)
		i = skipSpace(v, j)
		if i >= len(v) {
			return 0, false
		}
		switch v[i] {
		case ']':
			return i + 1, true
		case ',':
			i = skipSpace(v, i+1)
		default:
			return 0, false
		}
	}
}
