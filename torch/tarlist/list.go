package tarlist

import (
	"bytes"
	"fmt"
	"io"
	"math"
	"math/big"
	"regexp"
	"strings"
	"unicode"

	"github.com/gosafetensors/safetensors/torch/internal/pylong"
)

// Listing a tar the way Python's tarfile does (TarFile.next and
// TarInfo.fromtarfile, Python 3.8 to 3.14). An extension header (GNU long
// name 'L' or long link 'K', pax 'x'/'X', global pax 'g') is processed by
// reading the header after it *recursively* and then patching the member
// that comes back, so the outermost extension header has the last word:
// after "L pickle", "x path=decoy", member "other" the member is named
// "pickle"; after "x path=decoy", "L pickle" it is "decoy". The global pax
// records are applied by the innermost member (_proc_builtin), and then
// again, as copied when each enclosing 'x' header was read, by that
// header. The lister below mirrors those calls one for one.

// paxRec is one pax record; paxMap keeps them in the order of a Python
// dict (insertion order, a rewritten key keeps its place).
type paxRec struct{ k, v string }

type paxMap []paxRec

func (p paxMap) get(k string) (string, bool) {
	for _, r := range p {
		if r.k == k {
			return r.v, true
		}
	}
	return "", false
}

func (p *paxMap) set(k, v string) {
	for i := range *p {
		if (*p)[i].k == k {
			(*p)[i].v = v
			return
		}
	}
	*p = append(*p, paxRec{k, v})
}

// Variant is what differs between Python releases' tarfile.
type Variant struct {
	// StrictPax: the checked pax record parser (3.8.20, 3.9.20, 3.10.15,
	// 3.11.10, 3.12.6, 3.13 on; some distributions backported it): a bad
	// record is an InvalidHeaderError. Before, a regex loop stopped at the
	// first record it could not match.
	StrictPax bool
	// NoFollowDircheck: 3.14 (and later maintenance releases) read the
	// header after an extension header without the V7 directory detection,
	// which a GNU long name re-applies to the long name.
	NoFollowDircheck bool
	// NegBlock: gh-130577 (2025: 3.9.24, 3.10.19, 3.11.14, 3.12.12,
	// 3.13.6, 3.14; distributions backported it): _block raises
	// InvalidHeaderError for a negative count. Before, a negative size was
	// rounded toward zero block by block (-511..-1 give 0: no data), and
	// fileobj.read of a negative count reads to the end of the file.
	NegBlock bool
}

// variants are the releases' behaviours that differ in what they list.
var variants = []Variant{{}, {StrictPax: true}, {StrictPax: true, NegBlock: true}, {StrictPax: true, NoFollowDircheck: true, NegBlock: true}}

// Variants returns the behaviours of the Python releases from 3.8 on that
// list some tar differently, oldest first; a scanner that must see what
// any of them reads lists with each (see ListAll).
func Variants() []Variant { return append([]Variant(nil), variants...) }

// More header errors than frombuf's: the listing ends.
const (
	hdrSubsequent hdrErr = 100 + iota // SubsequentHeaderError: a ReadError (torch falls back)
	hdrFatal                          // another exception, or a bound of ours; the problem is recorded
)

// maxTarChain bounds nested extension headers: each level is three Python
// frames, so CPython stops with a RecursionError (not a TarError) near 330.
const maxTarChain = 400

type tarLister struct {
	r        io.ReaderAt
	size     int64
	v        Variant
	global   paxMap // tarfile.pax_headers
	pos      int64  // tarfile.fileobj position
	offset   int64  // tarfile.offset: where the next header is
	depth    int
	problems []string
}

func (t *tarLister) problem(format string, a ...any) {
	t.problems = append(t.problems, fmt.Sprintf(format, a...))
}

// read is fileobj.read(n) at the current position: short at the end; a
// negative n reads to the end.
func (t *tarLister) read(n int64) []byte {
	if n < 0 {
		n = t.size - t.pos
	}
	n = max(min(n, t.size-t.pos), 0)
	b := make([]byte, n)
	if readFull(t.r, b, t.pos) != nil {
		b = b[:0]
	}
	t.pos += int64(len(b))
	return b
}

// blockUp is TarInfo._block for a non-negative count; counts past the end
// of the file are kept past it without overflowing.
func (t *tarLister) blockUp(n int64) int64 {
	if n > t.size+BlockSize {
		return t.size + 2*BlockSize
	}
	return (n + BlockSize - 1) / BlockSize * BlockSize
}

// block is TarInfo._block(n) in this variant: ok is false where it raises
// InvalidHeaderError (a negative count, gh-130577); before, a negative
// count is rounded toward zero to a multiple of 512.
func (t *tarLister) block(n int64) (int64, bool) {
	if n >= 0 {
		return t.blockUp(n), true
	}
	if t.v.NegBlock {
		return 0, false
	}
	if n < -(t.size + 2*BlockSize) { // far before the file: stays before it
		return -(t.size + 2*BlockSize), true
	}
	return -((-n) / BlockSize * BlockSize), true
}

// fromtarfile is TarInfo.fromtarfile (dircheck as in _fromtarfile).
func (t *tarLister) fromtarfile(dircheck bool) (*Member, hdrErr) {
	if t.depth >= maxTarChain {
		t.problem("more than %d nested tar extension headers at offset %d (Python stops with a RecursionError)", maxTarChain, t.pos)
		return nil, hdrFatal
	}
	at := t.pos
	h, e := parseHeader(t.read(BlockSize), dircheck)
	if e != hdrOK {
		return nil, e
	}
	m := &Member{Header: h, HeaderOffset: at}
	t.depth++
	defer func() { t.depth-- }()
	switch h.Type {
	case 'L', 'K':
		return t.procGnulong(m)
	case 'S':
		return t.procSparse(m)
	case 'x', 'g', 'X':
		return t.procPax(m)
	}
	return t.procBuiltin(m)
}

// negative notes a negative size (tarfile gh-130577 raises
// InvalidHeaderError for it; older releases go on).
func (t *tarLister) negative(m *Member) {
	t.problem("tar header at offset %d (%q) declares a negative size", m.HeaderOffset, m.Name)
}

// dataBlocks returns the bytes tarfile steps over for m's data: its size
// rounded up to whole blocks, a negative size as the release handles it;
// false when the release raises.
func (t *tarLister) dataBlocks(m *Member) (int64, bool) {
	if m.Size < 0 {
		t.negative(m)
	}
	return t.block(m.Size)
}

// procBuiltin is _proc_builtin: data after the header, the global pax
// records applied, trailing slashes of a directory name dropped.
func (t *tarLister) procBuiltin(m *Member) (*Member, hdrErr) {
	m.DataOffset = t.pos
	off := t.pos
	if IsRegularType(m.Type) {
		k, ok := t.dataBlocks(m)
		if !ok {
			return nil, hdrInvalid
		}
		off += k
	}
	t.offset = off
	if !t.applyPax(m, t.global) {
		return nil, hdrFatal
	}
	if m.Type == '5' {
		m.Name = strings.TrimRight(m.Name, "/")
	}
	return m, hdrOK
}

// extensionData reads an extension header's data as tarfile does: its
// size rounded up to whole blocks, a negative size as the release handles
// it; false when the release raises.
func (t *tarLister) extensionData(m *Member) ([]byte, bool) {
	k, ok := t.dataBlocks(m)
	if !ok {
		return nil, false
	}
	return t.read(k), true
}

// procGnulong is _proc_gnulong: the name (or link name) replaces the one
// of the member read after it, whatever pax records said.
func (t *tarLister) procGnulong(m *Member) (*Member, hdrErr) {
	buf, ok := t.extensionData(m)
	if !ok {
		return nil, hdrInvalid
	}
	next, e := t.fromtarfile(!t.v.NoFollowDircheck)
	if e != hdrOK {
		return t.subsequent(m, e)
	}
	next.HeaderOffset = m.HeaderOffset
	if m.Type == 'L' {
		next.Name = string(pylong.CString(buf))
		if t.v.NoFollowDircheck {
			// V7 directory detection again, on the long name
			if next.Type == '5' && !strings.HasSuffix(next.Name, "/") {
				next.Type = 0
			} else if next.Type == 0 && strings.HasSuffix(next.Name, "/") {
				next.Type = '5'
			}
		}
	} else {
		next.Linkname = string(pylong.CString(buf))
	}
	if next.Type == '5' {
		next.Name = strings.TrimSuffix(next.Name, "/")
	}
	return next, hdrOK
}

func (t *tarLister) subsequent(m *Member, e hdrErr) (*Member, hdrErr) {
	if e == hdrFatal {
		return nil, e
	}
	t.problem("tar extension header at offset %d not followed by a valid header", m.HeaderOffset)
	return nil, hdrSubsequent
}

// procSparse is _proc_sparse (old GNU sparse): extension blocks, then the
// data; size becomes the original size. No pax records are applied here.
func (t *tarLister) procSparse(m *Member) (*Member, hdrErr) {
	dataOff, structs, p := readSparseExt(t.r, t.size, t.pos, m.IsExtended, m.Sparse)
	if p != "" {
		t.problem("tar sparse member %q at offset %d: %s", m.Name, m.HeaderOffset, p)
		return nil, hdrFatal
	}
	if m.Size < 0 {
		t.negative(m)
	}
	m.Sparse, t.pos, m.DataOffset = structs, dataOff, dataOff
	k, ok := t.block(m.Size)
	if !ok {
		return nil, hdrInvalid
	}
	t.offset = dataOff + k
	m.Stored = m.Size
	m.HasSparse = true
	m.Size = m.OrigSize
	return m, hdrOK
}

// procPax is _proc_pax.
func (t *tarLister) procPax(m *Member) (*Member, hdrErr) {
	buf, ok := t.extensionData(m)
	if !ok {
		return nil, hdrInvalid
	}
	recs, ok := parsePaxRecords(buf, t.v.StrictPax)
	if !ok {
		return nil, hdrInvalid
	}
	var pax paxMap
	if m.Type == 'g' {
		for _, r := range recs {
			t.global.set(r.k, r.v)
		}
	} else {
		pax = append(paxMap(nil), t.global...)
		for _, r := range recs {
			pax.set(r.k, r.v)
		}
	}
	next, e := t.fromtarfile(!t.v.NoFollowDircheck)
	if e != hdrOK {
		return t.subsequent(m, e)
	}
	if m.Type == 'g' {
		pax = t.global
	}
	if e := t.paxSparse(m, next, pax, recs, buf); e != hdrOK {
		return nil, e
	}
	if m.Type != 'g' {
		if !t.applyPax(next, pax) {
			return nil, hdrFatal
		}
		next.HeaderOffset = m.HeaderOffset
		if _, ok := pax.get("size"); ok {
			off := next.DataOffset
			if IsRegularType(next.Type) {
				k, ok := t.dataBlocks(next)
				if !ok {
					return nil, hdrInvalid
				}
				off += k
			}
			t.offset = off
		}
	}
	return next, hdrOK
}

// sparse00Old are the regexes older releases' _proc_gnusparse_00 runs over
// the raw pax data (bytes patterns: \d is ASCII, '.' any byte but '\n').
var sparse00Old = struct{ offset, numbytes *regexp.Regexp }{
	regexp.MustCompile(`\d+ GNU.sparse.offset=(\d+)\n`),
	regexp.MustCompile(`\d+ GNU.sparse.numbytes=(\d+)\n`),
}

// paxSparse is the GNU sparse part of _proc_pax: format 0.1 (the
// GNU.sparse.map record, int() of each comma-separated number: a
// ValueError is fatal), else 0.0 (the GNU.sparse.offset and numbytes
// records of this header, paired in order: a bad number is an
// InvalidHeaderError), else 1.0 (major 1, minor 0: the map is text at the
// start of the data, a count then numbers, each ended by a newline, read
// block by block; the data starts after it). next gets the map as
// tarinfo.sparse; its size is then set by GNU.sparse.size or realsize.
func (t *tarLister) paxSparse(m, next *Member, pax paxMap, recs []paxRec, buf []byte) hdrErr {
	var nums []int64
	add := func(n int64) bool {
		if len(nums) >= 2*maxSparseStructs {
			t.problem("tar member %q at offset %d: more than %d pax sparse structs", next.Name, m.HeaderOffset, maxSparseStructs)
			return false
		}
		nums = append(nums, n)
		return true
	}
	major, _ := pax.get("GNU.sparse.major")
	minor, _ := pax.get("GNU.sparse.minor")
	_, v00 := pax.get("GNU.sparse.size")
	if smap, ok := pax.get("GNU.sparse.map"); ok {
		for _, f := range strings.SplitN(smap, ",", 2*maxSparseStructs+1) {
			n, ok := pyInt(f)
			if !ok {
				t.problem("tar member %q at offset %d: GNU.sparse.map holds %q, not a number (Python raises ValueError)", next.Name, m.HeaderOffset, clip(f))
				return hdrFatal
			}
			if !add(n) {
				return hdrFatal
			}
		}
	} else if v00 && !t.v.StrictPax {
		// Older releases search the raw pax data with a regex whose '.'
		// matches any byte, inside other records' values too.
		// Each byte becomes one rune, so that '.' matches one byte, as in
		// a Python bytes pattern (not a UTF-8 sequence).
		raw := make([]rune, len(buf))
		for i, c := range buf {
			raw[i] = rune(c)
		}
		text := string(raw)
		offs, lens := sparse00Old.offset.FindAllStringSubmatch(text, maxSparseStructs+1), sparse00Old.numbytes.FindAllStringSubmatch(text, maxSparseStructs+1)
		if len(offs) > maxSparseStructs || len(lens) > maxSparseStructs {
			t.problem("tar member %q at offset %d: more than %d pax sparse structs", next.Name, m.HeaderOffset, maxSparseStructs)
			return hdrFatal
		}
		for i := 0; i < min(len(offs), len(lens)); i++ {
			o, _ := pyInt(offs[i][1])
			n, _ := pyInt(lens[i][1])
			nums = append(nums, o, n)
		}
	} else if v00 {
		var offs, lens []int64
		for _, r := range recs {
			if r.k != "GNU.sparse.offset" && r.k != "GNU.sparse.numbytes" {
				continue
			}
			n, ok := pyInt(r.v)
			if !ok {
				return hdrInvalid
			}
			if len(offs)+len(lens) >= 2*maxSparseStructs {
				t.problem("tar member %q at offset %d: more than %d pax sparse structs", next.Name, m.HeaderOffset, maxSparseStructs)
				return hdrFatal
			}
			if r.k == "GNU.sparse.offset" {
				offs = append(offs, n)
			} else {
				lens = append(lens, n)
			}
		}
		for i := 0; i < min(len(offs), len(lens)); i++ {
			nums = append(nums, offs[i], lens[i])
		}
	} else if major == "1" && minor == "0" {
		buf := t.read(BlockSize)
		line := func() ([]byte, bool) {
			i := bytes.IndexByte(buf, '\n')
			if i < 0 {
				return nil, false
			}
			l := buf[:i]
			buf = buf[i+1:]
			return l, true
		}
		l, ok := line()
		fields := int64(0)
		if ok {
			fields, ok = pyInt(string(l))
		}
		for ok && int64(len(nums)) < fields*2 && fields <= maxSparseStructs {
			if bytes.IndexByte(buf, '\n') < 0 {
				buf = append(buf, t.read(BlockSize)...)
			}
			if l, ok = line(); ok {
				var n int64
				if n, ok = pyInt(string(l)); ok {
					nums = append(nums, n)
				}
			}
		}
		if !ok || fields > maxSparseStructs {
			t.problem("tar member %q at offset %d: its GNU sparse 1.0 map is not numbers ended by newlines, or too long (Python raises ValueError)", next.Name, m.HeaderOffset)
			return hdrFatal
		}
		next.DataOffset = t.pos
	} else {
		return hdrOK
	}
	next.Sparse = next.Sparse[:0:0]
	for i := 0; i+1 < len(nums); i += 2 {
		next.Sparse = append(next.Sparse, [2]int64{nums[i], nums[i+1]})
	}
	next.HasSparse = true
	next.Stored = max(next.Stored, next.Size)
	if n, ok := pax.get("size"); ok {
		if k, ok := pyInt(n); ok {
			next.Stored = max(next.Stored, k)
		}
	}
	return hdrOK
}

// applyPax is _apply_pax_info, record by record in dict order. It is
// false where Python raises a ValueError (int() of a GNU.sparse size).
func (t *tarLister) applyPax(m *Member, pax paxMap) bool {
	for _, r := range pax {
		switch r.k {
		case "GNU.sparse.name":
			m.Name = r.v
		case "GNU.sparse.size", "GNU.sparse.realsize":
			n, ok := pyInt(r.v)
			if !ok {
				t.problem("tar member %q: pax record %s=%q is not a number (Python raises ValueError)", m.Name, r.k, r.v)
				return false
			}
			m.Size = n
		case "path":
			m.Name = strings.TrimRight(r.v, "/")
		case "linkpath":
			m.Linkname = r.v
		case "size":
			n, ok := pyInt(r.v)
			if !ok {
				n = 0
			}
			m.Size = n
		}
	}
	return true
}

// pyDecimalASCII is what int(str) parses: CPython first turns every Unicode
// decimal digit (category Nd, e.g. fullwidth or Arabic-Indic) into its
// ASCII digit and every Unicode whitespace into a space
// (_PyUnicode_TransformDecimalAndSpaceToASCII); anything else non-ASCII
// becomes '?', which no number contains.
func pyDecimalASCII(s string) []byte {
	out := make([]byte, 0, len(s))
	for _, r := range s {
		switch {
		case r < 0x80:
			out = append(out, byte(r))
		case unicode.Is(unicode.Nd, r):
			// Nd digits come in runs of ten from 0 (several runs may
			// follow each other): the value is the distance from the run's
			// start, modulo ten.
			start := r
			for unicode.Is(unicode.Nd, start-1) {
				start--
			}
			out = append(out, byte('0'+(r-start)%10))
		case unicode.IsSpace(r):
			out = append(out, ' ')
		default:
			out = append(out, '?')
		}
	}
	return out
}

// pyInt is int(s) for a str, saturated to int64.
func pyInt(s string) (int64, bool) {
	if strings.IndexByte(s, 0) >= 0 {
		return 0, false
	}
	v, ok := pylong.Parse(pyDecimalASCII(s), 10)
	if !ok {
		return 0, false
	}
	switch n := v.(type) {
	case int64:
		return n, true
	case *big.Int:
		if n.Sign() < 0 {
			return math.MinInt64, true
		}
		return math.MaxInt64, true
	}
	return 0, false
}

// parsePaxRecords reads the "%d %s=%s\n" records of a pax header's
// (block-rounded) data. strict is the checked parser of newer releases (a
// bad record is an InvalidHeaderError: ok false); else the regex loop of
// older ones, which stops at the first record it cannot match and raises
// only on a zero length.
func parsePaxRecords(buf []byte, strict bool) (recs []paxRec, ok bool) {
	digits := func(pos int) (int, uint64) {
		j, n := pos, uint64(0)
		for j < len(buf) && buf[j] >= '0' && buf[j] <= '9' {
			if n > math.MaxInt32 {
				n = math.MaxInt32 + 1 // far past any buffer
			} else {
				n = n*10 + uint64(buf[j]-'0')
			}
			j++
		}
		return j, n
	}
	pos := 0
	if strict {
		for pos < len(buf) && buf[pos] != 0 {
			j, length := digits(pos)
			if j == pos || j-pos > 20 || j >= len(buf) || buf[j] != ' ' {
				return nil, false
			}
			if length < 5 || uint64(pos)+length > uint64(len(buf)) {
				return nil, false
			}
			end := pos + int(length) - 1
			var kv []byte
			if j+1 < end {
				kv = buf[j+1 : end]
			}
			eq := bytes.IndexByte(kv, '=')
			if eq <= 0 || buf[end] != '\n' {
				return nil, false
			}
			recs = append(recs, paxRec{string(kv[:eq]), string(kv[eq+1:])})
			pos += int(length)
		}
		return recs, true
	}
	for pos < len(buf) {
		j, length := digits(pos)
		if j == pos || j >= len(buf) || buf[j] != ' ' {
			break
		}
		eq := bytes.IndexByte(buf[j+1:], '=')
		if eq <= 0 {
			break
		}
		if length == 0 {
			return nil, false
		}
		kEnd := j + 1 + eq
		vEnd := min(uint64(pos)+length-1, uint64(len(buf)))
		var v []byte
		if uint64(kEnd+1) < vEnd {
			v = buf[kEnd+1 : vEnd]
		}
		recs = append(recs, paxRec{string(buf[j+1 : kEnd]), string(v)})
		if uint64(pos)+length > uint64(len(buf)) {
			break
		}
		pos += int(length)
	}
	return recs, true
}

// List lists the members of r (size bytes) as TarFile.next does in the
// Python release v, at most maxMembers of them. It stops where tarfile
// stops: an all-zero, invalid or truncated header. The problems it
// returns say where tarfile would raise (most with a TarError, which
// makes torch try the legacy pickle stream instead) or where a bound of
// this package ended the listing (nested extension headers, sparse maps,
// members); they are messages for a report, not errors: the members
// listed before are what tarfile returns before it raises.
func List(r io.ReaderAt, size int64, maxMembers int, v Variant) ([]Member, []string) {
	t := &tarLister{r: r, size: size, v: v}
	var members []Member
	var back map[string]bool // states met after a jump backwards
	for len(members) < maxMembers {
		if t.offset != t.pos {
			if t.offset == 0 {
				return members, t.problems
			}
			if t.offset < 0 {
				t.problem("tar: a negative size moves the next header to offset %d (Python's seek raises, not a TarError)", t.offset)
				return members, t.problems
			}
			if t.offset > size {
				t.problem("tar member data runs past the end of the file (next header at offset %d)", t.offset)
				return members, t.problems
			}
			if t.offset < t.pos {
				// a negative size moved the next header backwards: tarfile
				// lists again from there; the same state again never ends
				if back == nil {
					back = map[string]bool{}
				}
				k := fmt.Sprint(t.offset, t.global)
				if back[k] {
					t.problem("tar: a negative size makes tarfile list the same headers again forever (from offset %d)", t.offset)
					return members, t.problems
				}
				back[k] = true
			}
			t.pos = t.offset
		}
		at := t.pos
		m, e := t.fromtarfile(true)
		switch {
		case e == hdrOK:
			members = append(members, *m)
			continue
		case e == hdrSubsequent:
			t.problem("tar listing fails at offset %d (ReadError)", at)
		case e != hdrFatal && e != hdrEOF && at == 0:
			t.problem("tar: no valid first header")
		}
		return members, t.problems
	}
	t.problem("more than %d tar members", maxMembers)
	return members, t.problems
}

// ListAll lists the members in every variant of Variants, in order;
// problems are merged (each once).
func ListAll(r io.ReaderAt, size int64, maxMembers int) (lists [][]Member, problems []string) {
	seen := map[string]bool{}
	for _, v := range variants {
		ms, ps := List(r, size, maxMembers, v)
		lists = append(lists, ms)
		for _, p := range ps {
			if !seen[p] {
				seen[p] = true
				problems = append(problems, p)
			}
		}
	}
	return lists, problems
}

// ListUnion is the union of the members ListAll lists (each once, by name,
// link, type, header and data offsets and size), in order.
func ListUnion(r io.ReaderAt, size int64, maxMembers int) (members []Member, problems []string) {
	lists, problems := ListAll(r, size, maxMembers)
	type key struct {
		name, link       string
		typ              byte
		hdr, data, bytes int64
	}
	seen := map[key]bool{}
	for _, ms := range lists {
		for _, m := range ms {
			k := key{m.Name, m.Linkname, m.Type, m.HeaderOffset, m.DataOffset, m.Size}
			if !seen[k] {
				seen[k] = true
				members = append(members, m)
			}
		}
	}
	return members, problems
}
