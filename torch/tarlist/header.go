package tarlist

import (
	"bytes"
	"errors"
	"io"
	"math"
	"strings"

	"github.com/gosafetensors/safetensors/torch/internal/pylong"
)

// BlockSize is the size of a tar header block and the unit member data is
// padded to.
const BlockSize = 512

// Errors ParseHeader returns, one per tarfile exception (tarfile.py's
// EmptyHeaderError, TruncatedHeaderError, EOFHeaderError and
// InvalidHeaderError). Every one ends a listing; torch falls back to the
// legacy pickle stream when the first header fails.
var (
	ErrEmptyHeader     = errors.New("tarlist: empty header")
	ErrTruncatedHeader = errors.New("tarlist: truncated header")
	ErrEOFHeader       = errors.New("tarlist: end of file header (an all-zero block)")
	ErrInvalidHeader   = errors.New("tarlist: invalid header (bad checksum or number)")
)

// Header is a header block as tarfile.TarInfo.frombuf reads it.
type Header struct {
	Name     string // prefix applied, directory slashes stripped
	Linkname string
	Size     int64 // math.MaxInt64 if larger; negative sizes (base-256) are kept
	Type     byte  // the type flag; 0 (a V7 regular file) stays 0
	// Old GNU sparse ('S') headers: the four sparse structs of the header
	// (kept even when zero, as frombuf does), the isextended flag (byte
	// 482) and the original size (bytes 483..495).
	Sparse     [][2]int64 // (offset, numbytes) pairs
	IsExtended bool
	OrigSize   int64
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
			return tarNeg(f[1:], n), true
		}
		if over || n > math.MaxInt64 {
			return math.MaxInt64, true
		}
		return int64(n), true
	}
	s := pylong.CString(f)
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

// tarNeg is int.from_bytes(b) - 256**len(b) for a base-256 field whose
// first byte is 0xff (low holds the last 8 bytes of b): exact where it
// fits in an int64; a smaller number is returned as the int64 in
// [-2**63, -2**62) congruent to it modulo 2**62 (makefile uses a negative
// sparse length only modulo 16 KiB, see makefileLen).
func tarNeg(b []byte, low uint64) int64 {
	if len(b) < 8 {
		return int64(low) - 1<<(8*len(b))
	}
	hi := true
	for _, c := range b[:len(b)-8] {
		hi = hi && c == 0xff
	}
	if hi && low >= 1<<63 {
		return int64(low) // two's complement in 64 bits
	}
	return math.MinInt64 + int64(low&(1<<62-1))
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

// hdrErr says why a block is not a header, as tarfile's exceptions.
type hdrErr int

const (
	hdrOK        hdrErr = iota
	hdrEmpty            // EmptyHeaderError
	hdrTruncated        // TruncatedHeaderError
	hdrEOF              // EOFHeaderError: an all-zero block
	hdrInvalid          // InvalidHeaderError: bad checksum or number
)

// ParseHeader parses one 512-byte header block as TarInfo.frombuf does;
// the error is one of ErrEmptyHeader, ErrTruncatedHeader, ErrEOFHeader and
// ErrInvalidHeader.
func ParseHeader(b []byte) (Header, error) {
	h, e := parseHeader(b, true)
	switch e {
	case hdrOK:
		return h, nil
	case hdrEmpty:
		return h, ErrEmptyHeader
	case hdrTruncated:
		return h, ErrTruncatedHeader
	case hdrEOF:
		return h, ErrEOFHeader
	}
	return h, ErrInvalidHeader
}

// parseHeader is TarInfo._frombuf: Python 3.14 (and the releases
// that took the change) skip the old V7 directory detection (a regular
// type 0 whose name ends in "/") for the header that follows a GNU long
// name or pax header (dircheck false); older releases always apply it.
func parseHeader(b []byte, dircheck bool) (Header, hdrErr) {
	var h Header
	switch {
	case len(b) == 0:
		return h, hdrEmpty
	case len(b) != BlockSize:
		return h, hdrTruncated
	case bytes.Count(b, []byte{0}) == BlockSize:
		return h, hdrEOF
	}
	chk, ok := tarNum(b[148:156])
	if !ok {
		return h, hdrInvalid
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
		return h, hdrInvalid
	}
	for _, f := range [][2]int{{100, 108}, {108, 116}, {116, 124}, {124, 136}, {136, 148}, {329, 337}, {337, 345}} {
		if _, ok := tarNum(b[f[0]:f[1]]); !ok {
			return h, hdrInvalid
		}
	}
	h.Size, _ = tarNum(b[124:136])
	h.Type = b[156]
	if h.Type == 'S' { // old GNU sparse structures and the original size
		for pos := 386; pos < 386+4*24; pos += 24 {
			off, ok := tarNum(b[pos : pos+12])
			if !ok {
				return h, hdrInvalid
			}
			n, ok := tarNum(b[pos+12 : pos+24])
			if !ok {
				return h, hdrInvalid
			}
			h.Sparse = append(h.Sparse, [2]int64{off, n})
		}
		var ok bool
		if h.OrigSize, ok = tarNum(b[483:495]); !ok {
			return h, hdrInvalid
		}
		h.IsExtended = b[482] != 0
	}
	h.Name = string(pylong.CString(b[0:100]))
	h.Linkname = string(pylong.CString(b[157:257]))
	prefix := string(pylong.CString(b[345:500]))
	if dircheck && h.Type == 0 && strings.HasSuffix(h.Name, "/") {
		h.Type = '5'
	}
	if h.Type == '5' {
		h.Name = strings.TrimRight(h.Name, "/")
	}
	if prefix != "" && h.Type != 'L' && h.Type != 'K' && h.Type != 'S' {
		h.Name = prefix + "/" + h.Name
	}
	return h, hdrOK
}

// IsTar reports whether tarfile.open(fileobj=r, mode="r:") gets past the
// first header of r (size bytes) by Python's rules: an extension header
// must be followed by a valid header too, and an all-zero first block is
// an empty archive. torch.load reads such a file as a pre-0.4 tar
// checkpoint (or fails), and falls back to the legacy pickle stream only
// on a later TarError; a file with no zip or pickle shape (a safetensors
// file, a compressed container) can still carry code this way.
func IsTar(r io.ReaderAt, size int64) bool {
	if size < BlockSize {
		return false
	}
	b := make([]byte, BlockSize)
	pos := int64(0)
	for hop := 0; hop < 64; hop++ {
		if pos > size-BlockSize || readFull(r, b, pos) != nil {
			return false // TruncatedHeaderError / EmptyHeaderError
		}
		h, e := parseHeader(b, true)
		if hop == 0 && e == hdrEOF {
			// an all-zero block is an empty archive to tarfile: torch then
			// fails looking for its members (KeyError, no fallback)
			return true
		}
		if e != hdrOK {
			return false // at offset 0, or after an extension header: ReadError
		}
		switch h.Type {
		case 'L', 'K', 'x', 'g', 'X':
			// the header it extends must parse too (SubsequentHeaderError)
			// a size of -511..-1 is no data to releases before gh-130577
			// (_block rounds it to 0); from -512 down, fileobj.read
			// reads to the end and the next header is missing
			if h.Size <= -BlockSize || h.Size > size {
				return false
			}
			pos += BlockSize + (max(h.Size, 0)+BlockSize-1)/BlockSize*BlockSize
		default:
			return true
		}
	}
	return true // over-approximate: treat a long chain as a tar
}

// readFull reads len(p) bytes at off; a short read is an error.
func readFull(r io.ReaderAt, p []byte, off int64) error {
	n, err := r.ReadAt(p, off)
	if n == len(p) {
		return nil
	}
	if err == nil || err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	return err
}

// maxQuoted bounds how much of a name or value is quoted in a problem.
const maxQuoted = 1 << 10

func clip(s string) string {
	if len(s) > maxQuoted {
		return s[:maxQuoted] + "..."
	}
	return s
}
