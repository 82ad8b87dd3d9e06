package torch

import (
	"bytes"
	"fmt"
	"io"
	"math"
	"strings"
)

// torch.load's legacy path (anything that does not start with a zip local
// header) first tries tarfile.open(fileobj=f, mode="r:"): a file whose
// first 512 bytes pass Python's header check is read as a pre-0.4 tar
// checkpoint, and its members "storages", "tensors" and "pickle" are
// unpickled with the full unpickler. Only a TarError makes torch fall back
// to the legacy pickle stream. The functions here reproduce what Python's
// tarfile (3.8 to 3.13) accepts, so that the scanner sees every file torch
// could read as a tar.

const tarBlock = 512

// tarHeader is a header block as tarfile.TarInfo.frombuf reads it.
type tarHeader struct {
	name     string // prefix applied, directory slashes stripped
	linkname string
	size     int64 // math.MaxInt64 if larger
	typ      byte
}

// tarNum is tarfile.nti: base-256 when the first byte is 0x80 or 0xff,
// else the bytes before the first NUL as ASCII, stripped of whitespace and
// parsed by int(s or "0", 8). ok is false where Python raises
// InvalidHeaderError.
func tarNum(f []byte) (int64, bool) {
	if f[0] == 0x80 || f[0] == 0xff {
		var n uint64
		over := false
		for _, c := range f[1:] {
			if n > math.MaxUint64>>8 {
				over = true
			}
			n = n<<8 | uint64(c)
		}
		if f[0] == 0xff { // negative: n - 256**(len-1)
			if len(f)-1 >= 8 && !over && n >= 1<<63 {
				return int64(n), true // two's complement in 64 bits
			}
			return -1, true // some negative number
		}
		if over || n > math.MaxInt64 {
			return math.MaxInt64, true
		}
		return int64(n), true
	}
	s := cstr(f)
	for _, c := range s {
		if c >= 0x80 {
			return 0, false // ascii decode fails: a ValueError
		}
	}
	t := strings.TrimFunc(string(s), func(r rune) bool { return r == ' ' || (r >= '\t' && r <= '\r') || (r >= 0x1c && r <= 0x1f) })
	if t == "" {
		return 0, true
	}
	return pyIntBase8(t)
}

// pyIntBase8 is int(s, 8) for an already stripped s: a sign, an optional
// 0o prefix (then one optional underscore), octal digits with single
// underscores between them.
func pyIntBase8(s string) (int64, bool) {
	neg := false
	if s[0] == '+' || s[0] == '-' {
		neg = s[0] == '-'
		s = s[1:]
	}
	if len(s) >= 2 && s[0] == '0' && (s[1] == 'o' || s[1] == 'O') {
		s = strings.TrimPrefix(s[2:], "_")
	}
	if s == "" || s[0] == '_' || s[len(s)-1] == '_' || strings.Contains(s, "__") {
		return 0, false
	}
	var n int64
	for _, c := range s {
		if c == '_' {
			continue
		}
		if c < '0' || c > '7' {
			return 0, false
		}
		n = n*8 + int64(c-'0') // at most 12 digits: no overflow
	}
	if neg {
		n = -n
	}
	return n, true
}

// tarHeaderErr says why a block is not a header, as tarfile's exceptions.
type tarHeaderErr int

const (
	tarOK        tarHeaderErr = iota
	tarEmpty                  // EmptyHeaderError
	tarTruncated              // TruncatedHeaderError
	tarEOF                    // EOFHeaderError: an all-zero block
	tarInvalid                // InvalidHeaderError: bad checksum or number
)

// parseTarHeader is TarInfo.frombuf.
func parseTarHeader(b []byte) (tarHeader, tarHeaderErr) {
	var h tarHeader
	switch {
	case len(b) == 0:
		return h, tarEmpty
	case len(b) != tarBlock:
		return h, tarTruncated
	case bytes.Count(b, []byte{0}) == tarBlock:
		return h, tarEOF
	}
	chk, ok := tarNum(b[148:156])
	if !ok {
		return h, tarInvalid
	}
	var unsigned, signed int64 = 256, 256
	for i, c := range b {
		if i >= 148 && i < 156 {
			continue
		}
		unsigned += int64(c)
		signed += int64(int8(c))
	}
	if chk != unsigned && chk != signed {
		return h, tarInvalid
	}
	for _, f := range [][2]int{{100, 108}, {108, 116}, {116, 124}, {124, 136}, {136, 148}, {329, 337}, {337, 345}} {
		if _, ok := tarNum(b[f[0]:f[1]]); !ok {
			return h, tarInvalid
		}
	}
	h.size, _ = tarNum(b[124:136])
	h.typ = b[156]
	if h.typ == 'S' { // old GNU sparse structures and the original size
		for pos := 386; pos < 386+4*24; pos += 24 {
			if _, ok := tarNum(b[pos : pos+12]); !ok {
				return h, tarInvalid
			}
			if _, ok := tarNum(b[pos+12 : pos+24]); !ok {
				return h, tarInvalid
			}
		}
		if _, ok := tarNum(b[483:495]); !ok {
			return h, tarInvalid
		}
	}
	h.name = string(cstr(b[0:100]))
	h.linkname = string(cstr(b[157:257]))
	prefix := string(cstr(b[345:500]))
	if h.typ == 0 && strings.HasSuffix(h.name, "/") {
		h.typ = '5'
	}
	if h.typ == '5' {
		h.name = strings.TrimRight(h.name, "/")
	}
	if prefix != "" && h.typ != 'L' && h.typ != 'K' && h.typ != 'S' {
		h.name = prefix + "/" + h.name
	}
	return h, tarOK
}

// isTarStart reports whether tarfile.open(mode="r:") gets past the first
// header of r: torch.load then reads the file as a tar checkpoint (or
// fails), and only falls back to the legacy stream on a later TarError.
func isTarStart(r io.ReaderAt, size int64) bool {
	if size < tarBlock {
		return false
	}
	b := make([]byte, tarBlock)
	pos := int64(0)
	for hop := 0; hop < 64; hop++ {
		if pos > size-tarBlock || readFull(r, b, pos) != nil {
			return false // TruncatedHeaderError / EmptyHeaderError
		}
		h, e := parseTarHeader(b)
		if hop == 0 && e == tarEOF {
			// an all-zero block is an empty archive to tarfile: torch then
			// fails looking for its members (KeyError, no fallback)
			return true
		}
		if e != tarOK {
			return false // at offset 0, or after an extension header: ReadError
		}
		switch h.typ {
		case 'L', 'K', 'x', 'g', 'X':
			// the header it extends must parse too (SubsequentHeaderError)
			if h.size < 0 || h.size > size {
				return false
			}
			pos += tarBlock + (h.size+tarBlock-1)/tarBlock*tarBlock
		default:
			return true
		}
	}
	return true // over-approximate: treat a long chain as a tar
}

// tarMember is one member as tarfile lists it.
type tarMember struct {
	tarHeader
	header  int64 // offset of its (first) header block
	dataOff int64
}

// tarRegular reports whether tarfile treats the type as a regular file
// whose data follows the header (unknown types included).
func tarRegular(t byte) bool {
	switch t {
	case '1', '2', '3', '4', '5', '6', 'L', 'K':
		return false
	}
	return true
}

// listTar walks the members like TarFile.next: GNU long names, pax headers
// (path, linkpath, size; global ones persist), then the member. It stops
// where tarfile stops: an all-zero, invalid or truncated header. The
// problems it returns are reasons torch's tar read would fail (with a
// TarError, so torch would then try the legacy stream instead).
func listTar(r io.ReaderAt, size int64, maxMembers int) (members []tarMember, problems []string) {
	global := map[string]string{}
	pos := int64(0)
	blk := make([]byte, tarBlock)
	read := func(at int64) (tarHeader, tarHeaderErr) {
		if at > size-tarBlock {
			if at >= size {
				return tarHeader{}, tarEmpty
			}
			return tarHeader{}, tarTruncated
		}
		if readFull(r, blk, at) != nil {
			return tarHeader{}, tarTruncated
		}
		return parseTarHeader(blk)
	}
	for len(members) < maxMembers {
		h, e := read(pos)
		if e != tarOK {
			return members, problems
		}
		m := tarMember{header: pos}
		pax := map[string]string{}
		for k, v := range global {
			pax[k] = v
		}
		var longName, longLink *string
		// extension headers: each is followed by the header it extends
		for i := 0; h.typ == 'L' || h.typ == 'K' || h.typ == 'x' || h.typ == 'g' || h.typ == 'X'; i++ {
			if h.size < 0 || h.size > size {
				return members, append(problems, fmt.Sprintf("tar extension header at offset %d declares %d bytes", pos, h.size))
			}
			n := (h.size + tarBlock - 1) / tarBlock * tarBlock
			data := make([]byte, min(h.size, size-pos-tarBlock))
			if readFull(r, data, pos+tarBlock) != nil {
				return members, append(problems, fmt.Sprintf("tar extension header at offset %d is truncated", pos))
			}
			switch h.typ {
			case 'L':
				s := string(cstr(data))
				longName = &s
			case 'K':
				s := string(cstr(data))
				longLink = &s
			case 'g':
				parsePax(data, global)
				for k, v := range global {
					pax[k] = v
				}
			default:
				parsePax(data, pax)
			}
			pos += tarBlock + n
			if h, e = read(pos); e != tarOK {
				return members, append(problems, fmt.Sprintf("tar extension header not followed by a valid header at offset %d", pos))
			}
		}
		if longName != nil {
			h.name = strings.TrimRight(*longName, "/")
			if h.typ != '5' {
				h.name = *longName
			}
		}
		if longLink != nil {
			h.linkname = *longLink
		}
		if p, ok := pax["path"]; ok {
			h.name = p
		}
		if p, ok := pax["linkpath"]; ok {
			h.linkname = p
		}
		if s, ok := pax["size"]; ok {
			if v, ok := parsePyLong([]byte(s), 10); ok {
				if n, isInt := v.(int64); isInt {
					h.size = n
				}
			}
		}
		if h.typ == '5' {
			h.name = strings.TrimRight(h.name, "/")
		}
		m.tarHeader = h
		m.dataOff = pos + tarBlock
		members = append(members, m)
		next := m.dataOff
		if tarRegular(h.typ) {
			if h.size < 0 {
				return members, append(problems, fmt.Sprintf("tar member %q has a negative size", h.name))
			}
			if h.size > size-m.dataOff {
				return members, append(problems, fmt.Sprintf("tar member %q needs %d bytes at offset %d, past the end of the file", h.name, h.size, m.dataOff))
			}
			next += (h.size + tarBlock - 1) / tarBlock * tarBlock
		}
		pos = next
	}
	return members, append(problems, fmt.Sprintf("more than %d tar members", maxMembers))
}

// parsePax reads "%d %s=%s\n" records into m, stopping at the first record
// that does not parse (as tarfile does).
func parsePax(b []byte, m map[string]string) {
	pos := 0
	for pos < len(b) {
		sp := bytes.IndexByte(b[pos:], ' ')
		if sp <= 0 {
			return
		}
		var n int
		for _, c := range b[pos : pos+sp] {
			if c < '0' || c > '9' || n > len(b) {
				return
			}
			n = n*10 + int(c-'0')
		}
		if n <= sp+1 || pos+n > len(b) {
			return
		}
		rec := b[pos+sp+1 : pos+n-1]
		eq := bytes.IndexByte(rec, '=')
		if eq <= 0 {
			return
		}
		m[string(rec[:eq])] = string(rec[eq+1:])
		pos += n
	}
}

// IsTar reports whether torch.load would open r (size bytes) as a tar
// archive, the legacy tar checkpoint format, by Python's tarfile rules. A
// file that is not a zip, whose first bytes cannot form a pickle torch would
// act on (a safetensors file, a compressed container) can still carry code
// this way; Scan then reads every member torch would unpickle.
func IsTar(r io.ReaderAt, size int64) bool { return isTarStart(r, size) }
