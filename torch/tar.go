package torch

import (
	"bytes"
	"container/heap"
	"fmt"
	"io"
	"math"
	"sort"
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
	// old GNU sparse ('S') headers: the four sparse structs of the header
	// (kept even when zero, as frombuf does), the isextended flag (byte
	// 482) and the original size (bytes 483..495).
	sparse     [][2]int64
	isExtended bool
	origSize   int64
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
func parseTarHeader(b []byte) (tarHeader, tarHeaderErr) { return parseTarHeaderDir(b, true) }

// parseTarHeaderDir is TarInfo._frombuf: Python 3.14 (and the releases
// that took the change) skip the old V7 directory detection (a regular
// type 0 whose name ends in "/") for the header that follows a GNU long
// name or pax header (dircheck false); older releases always apply it.
func parseTarHeaderDir(b []byte, dircheck bool) (tarHeader, tarHeaderErr) {
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
			off, ok := tarNum(b[pos : pos+12])
			if !ok {
				return h, tarInvalid
			}
			n, ok := tarNum(b[pos+12 : pos+24])
			if !ok {
				return h, tarInvalid
			}
			h.sparse = append(h.sparse, [2]int64{off, n})
		}
		var ok bool
		if h.origSize, ok = tarNum(b[483:495]); !ok {
			return h, tarInvalid
		}
		h.isExtended = b[482] != 0
	}
	h.name = string(cstr(b[0:100]))
	h.linkname = string(cstr(b[157:257]))
	prefix := string(cstr(b[345:500]))
	if dircheck && h.typ == 0 && strings.HasSuffix(h.name, "/") {
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
			// a size of -511..-1 is no data to releases before gh-130577
			// (_block rounds it to 0); from -512 down, fileobj.read
			// reads to the end and the next header is missing
			if h.size <= -tarBlock || h.size > size {
				return false
			}
			pos += tarBlock + (max(h.size, 0)+tarBlock-1)/tarBlock*tarBlock
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
	stored  int64 // sparse: the header's size (of the stored data); size is the original size
	// hasSparse: tarinfo.sparse is set (old GNU 'S', or the pax GNU sparse
	// formats 0.0, 0.1 and 1.0); sparse is then the map
	hasSparse bool
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

// IsTar reports whether torch.load would open r (size bytes) as a tar
// archive, the legacy tar checkpoint format, by Python's tarfile rules. A
// file that is not a zip, whose first bytes cannot form a pickle torch would
// act on (a safetensors file, a compressed container) can still carry code
// this way; Scan then reads every member torch would unpickle.
func IsTar(r io.ReaderAt, size int64) bool { return isTarStart(r, size) }

// maxSparseStructs bounds the sparse map kept for one member, and
// maxSparseRuns the map resolved for scanning (quadratic in the worst case).
const (
	maxSparseStructs = 1 << 16
	maxSparseRuns    = 1 << 12
)

// readSparseExt is the loop of tarfile's _proc_sparse: while the
// isextended flag (byte 504 of each block) is set, another 512-byte block
// of up to 21 sparse structs follows; structs with a zero offset or size
// are dropped, and a field that is not a number ends the archive
// (InvalidHeaderError). It returns the offset of the member's data, the
// map, and a problem where tarfile stops or fails.
func readSparseExt(r io.ReaderAt, size, at int64, ext bool, structs [][2]int64) (int64, [][2]int64, string) {
	b := make([]byte, tarBlock)
	for ext {
		if at > size-tarBlock || readFull(r, b, at) != nil {
			return at, structs, fmt.Sprintf("sparse extension block at offset %d is truncated", at)
		}
		for i := 0; i < 21; i++ {
			f := b[i*24 : i*24+24]
			off, ok1 := tarNum(f[:12])
			n, ok2 := tarNum(f[12:])
			if !ok1 || !ok2 {
				return at, structs, fmt.Sprintf("sparse extension block at offset %d holds an invalid number", at)
			}
			if off != 0 && n != 0 {
				if len(structs) >= maxSparseStructs {
					return at, structs, fmt.Sprintf("more than %d sparse structs", maxSparseStructs)
				}
				structs = append(structs, [2]int64{off, n})
			}
		}
		ext = b[504] != 0
		at += tarBlock
	}
	return at, structs, ""
}

// sparseView is the content of an old GNU sparse member as tarfile's
// _FileInFile maps it: data runs read in turn from the stored data (and
// past it, as tarfile's seek and read do), holes read as zeros.
type sparseView struct {
	r     io.ReaderAt
	runs  []sparseRun // in order, not overlapping, covering [0, size)
	size  int64
	holes int64 // bytes of zeros inside [0, size)
}

type sparseRun struct {
	start, stop int64
	real        int64 // file offset of start, or -1 for a hole
}

// newSparseView builds _FileInFile's map as tarfile does (a struct that
// starts before the previous one ends resets its notion of the last
// position, so runs can overlap) and resolves it the way a reader going
// from the start sees it: each position is read from the first run that
// holds it, searching on (cyclically) from the run read last. Where no run
// holds a position, tarfile loops forever: the content ends there. ok is
// false for a map with negative or overflowing numbers or too many runs.
func newSparseView(r io.ReaderAt, dataOff, size int64, structs [][2]int64) (*sparseView, bool) {
	var m []sparseRun
	last, real := int64(0), dataOff
	for _, s := range structs {
		off, n := s[0], s[1]
		if off < 0 || n < 0 || off > math.MaxInt64-n || real > math.MaxInt64-n {
			return nil, false
		}
		if off > last {
			m = append(m, sparseRun{last, off, -1})
		}
		m = append(m, sparseRun{off, off + n, real})
		real += n
		last = off + n
	}
	if last < size {
		m = append(m, sparseRun{last, size, -1})
	}
	if len(m) > maxSparseRuns {
		return nil, false
	}
	v := &sparseView{r: r}
	for i, p := 0, int64(0); p < size; {
		j := -1
		for k := 0; k < len(m); k++ {
			if c := m[(i+k)%len(m)]; c.start <= p && p < c.stop {
				j = (i + k) % len(m)
				break
			}
		}
		if j < 0 {
			break // tarfile never returns from this read
		}
		c := m[j]
		if c.real >= 0 {
			c.real += p - c.start
		}
		c.start, c.stop = p, min(c.stop, size)
		v.runs = append(v.runs, c)
		p, i = c.stop, j
	}
	v.trimTail(size)
	return v, true
}

// trimTail ends the view of a member of size bytes: after the last data
// run tarfile reads only zeros, which no opcode uses, so one block of them
// keeps the parse the same; and counts the holes.
func (v *sparseView) trimTail(size int64) {
	for len(v.runs) > 0 && v.runs[len(v.runs)-1].real < 0 {
		v.runs = v.runs[:len(v.runs)-1]
	}
	if len(v.runs) > 0 {
		v.size = v.runs[len(v.runs)-1].stop
		if size > v.size {
			v.runs = append(v.runs, sparseRun{v.size, v.size + min(size-v.size, tarBlock), -1})
			v.size = v.runs[len(v.runs)-1].stop
		}
	}
	for _, c := range v.runs {
		if c.real < 0 {
			v.holes += c.stop - c.start
		}
	}
}

// ReadAt reads the member's content at off.
func (v *sparseView) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, fmt.Errorf("tar sparse member: negative offset %d", off)
	}
	n := 0
	for len(p) > 0 {
		if off >= v.size {
			return n, io.EOF
		}
		i := sort.Search(len(v.runs), func(i int) bool { return v.runs[i].stop > off })
		if i == len(v.runs) {
			return n, io.EOF
		}
		run := v.runs[i]
		k := int(min(int64(len(p)), run.stop-off, v.size-off))
		if run.real < 0 {
			clear(p[:k])
		} else if err := readFull(v.r, p[:k], run.real+(off-run.start)); err != nil {
			return n, err
		}
		n += k
		p = p[k:]
		off += int64(k)
	}
	return n, nil
}

// tarCopyBuf is the buffer of tarfile's copyfileobj (TarFile.copybufsize
// is None): a negative length copies length mod tarCopyBuf bytes.
const tarCopyBuf = 16 << 10

// makefileLen is the number of bytes copyfileobj copies for a sparse
// struct's length n.
func makefileLen(n int64) int64 {
	if n < 0 {
		return (n%tarCopyBuf + tarCopyBuf) % tarCopyBuf
	}
	return n
}

// sparseStoredEnd is the end of the data an old GNU sparse member's
// makefile reads from the file: the header's size, or the sum of the runs
// where that is larger (copyfileobj reads on into what follows), clipped
// to the file.
func sparseStoredEnd(m tarMember, fileSize int64) int64 {
	n := max(m.stored, 0)
	sum := int64(0)
	for _, s := range m.sparse {
		k := makefileLen(s[1])
		if sum > math.MaxInt64-k {
			sum = math.MaxInt64
			break
		}
		sum += k
	}
	n = max(n, sum)
	if m.dataOff > fileSize || n > fileSize-m.dataOff {
		return fileSize
	}
	return m.dataOff + n
}

// newExtractView is the content of an old GNU sparse member as
// tar.extract writes it to disk, which is how torch reads "storages" and
// "tensors" (TarFile.makefile, the same in Python 3.8 to 3.13): the
// stored data is copied run after run, each run written at its offset
// after target.seek (so a later run overwrites an earlier one: the last
// write wins, unlike _FileInFile), positions no run wrote are zeros, and
// the file is truncated or extended to the original size. Holes are not
// materialised. short reports that the stored data ends before the runs do
// (makefile raises ReadError: torch fails, but the view holds what was
// written). ok is false where makefile raises before writing anything
// useful (a negative offset or original size, an overflowing run).
func newExtractView(r io.ReaderAt, fileSize, dataOff, size int64, structs [][2]int64) (v *sparseView, short, ok bool) {
	if size < 0 {
		return nil, false, false
	}
	type write struct{ off, end, real int64 }
	var ws []write
	real := dataOff
	for _, s := range structs {
		off, n := s[0], makefileLen(s[1])
		if off < 0 || off > math.MaxInt64-n {
			return nil, false, false // seek raises
		}
		if real >= fileSize {
			short = n > 0
			break
		}
		if n > fileSize-real {
			n, short = fileSize-real, true
		}
		if n > 0 && off < size {
			ws = append(ws, write{off, min(off+n, size), real})
		}
		real += n
		if short {
			break
		}
	}
	// sweep the boundaries; at each, the write with the highest index
	// covering it is what the file holds
	bounds := []int64{0, size}
	for _, w := range ws {
		bounds = append(bounds, w.off, w.end)
	}
	sort.Slice(bounds, func(i, j int) bool { return bounds[i] < bounds[j] })
	order := make([]int, len(ws))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(i, j int) bool { return ws[order[i]].off < ws[order[j]].off })
	v = &sparseView{r: r}
	h := &intMaxHeap{}
	next := 0
	for b := 0; b+1 < len(bounds); b++ {
		p, q := bounds[b], bounds[b+1]
		if p == q {
			continue
		}
		for next < len(order) && ws[order[next]].off <= p {
			heap.Push(h, order[next])
			next++
		}
		for h.Len() > 0 && ws[(*h)[0]].end <= p {
			heap.Pop(h)
		}
		run := sparseRun{p, q, -1}
		if h.Len() > 0 {
			w := ws[(*h)[0]]
			run.real = w.real + (p - w.off)
		}
		if k := len(v.runs) - 1; k >= 0 {
			if last := &v.runs[k]; (last.real < 0 && run.real < 0) || (last.real >= 0 && run.real == last.real+(last.stop-last.start)) {
				last.stop = q
				continue
			}
		}
		v.runs = append(v.runs, run)
	}
	v.trimTail(size)
	return v, short, true
}

// intMaxHeap is a max-heap of write indices.
type intMaxHeap []int

func (h intMaxHeap) Len() int           { return len(h) }
func (h intMaxHeap) Less(i, j int) bool { return h[i] > h[j] }
func (h intMaxHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *intMaxHeap) Push(x any)        { *h = append(*h, x.(int)) }
func (h *intMaxHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
