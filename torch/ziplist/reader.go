package ziplist

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
	"sort"
	"strings"
	"sync"

	"github.com/gosafetensors/safetensors/internal/rangeread"
)

// BadFlags are the general-purpose flag bits that change how an entry's
// bytes must be read: encryption (0x1), compressed patched data (0x20),
// strong encryption (0x40) and an encrypted central directory (0x2000).
// An entry with any of them is a problem (ErrUnsupported).
const BadFlags = 0x1 | 0x20 | 0x40 | 0x2000

const (
	sigLocal    = 0x04034b50
	sigCentral  = 0x02014b50
	sigEnd      = 0x06054b50
	sigEnd64    = 0x06064b50
	sigLocator  = 0x07064b50
	lenLocal    = 30
	lenCentral  = 46
	lenEnd      = 22
	lenLocator  = 20
	lenEnd64Min = 56
)

// Entry is one central-directory record, checked against its local header.
type Entry struct {
	Name           string // as the central directory spells it
	Flags, Method  uint16 // general-purpose flags and compression method (0 STORED, 8 DEFLATE)
	CRC32          uint32
	CompressedSize int64 // after the ZIP64 extra field, if any
	Size           int64 // uncompressed; miniz reads this many bytes of a STORED entry
	HeaderOffset   int64 // of the local header
	DataOffset     int64 // after the local header's name and extra field; -1 if the local header is unusable or Deferred
	Index          int   // position in the central directory
	// Deferred is set for an entry whose local header [NewReaderDeferring]
	// did not read: [Reader.Resolve] reads and checks it.
	Deferred bool
}

// Problem is an irregularity of an archive the reader went on past: miniz
// (and so torch) reads such an archive, but a checkpoint torch writes has
// none. Kind is ErrFormat or ErrUnsupported.
type Problem struct {
	Kind  error
	Entry string // the entry's name, "" for the archive
	Msg   string
}

// Reader is a zip archive's central directory as miniz reads it.
type Reader struct {
	Entries   []*Entry // in central-directory order
	DirOffset int64    // start of the central directory
	DirEnd    int64    // end of the central directory: the zip64 end record or the end record
	EndOffset int64    // offset of the end of central directory record
	// Problems lists the irregularities found, in order.
	Problems []Problem

	r      io.ReaderAt
	size   int64
	byName map[string]*Entry // first entry of each name
	folded map[string]string // FoldName(name) -> the first name folding to it

	starts   []int64 // sorted starts of the records and the directory (see nextStart)
	mu       sync.Mutex
	resolved map[*Entry]*resolution // Resolve's answers
}

func (z *Reader) problem(kind error, entry, format string, args ...any) {
	z.Problems = append(z.Problems, Problem{Kind: kind, Entry: entry, Msg: fmt.Sprintf(format, args...)})
}

// NewReader reads the archive r (size bytes) as miniz does: the last end
// record signature in the last 64 KiB (which must end the file exactly),
// its ZIP64 locator and record if any, and the central directory they
// name, of at most maxEntries entries; then every local header, to
// cross-check name, flags, method and sizes against the directory. An
// archive miniz cannot read, or whose end records disagree, is an *Error;
// what miniz reads but a torch checkpoint never holds (duplicate or
// case-folded names, directory entries, names with a NUL, encrypted or
// compressed entries, overlaps, entries after the directory) is listed in
// Problems.
func NewReader(r io.ReaderAt, size int64, maxEntries int) (*Reader, error) {
	return newReader(r, size, maxEntries, nil)
}

// NewReaderDeferring is NewReader, except that the local headers of the
// entries for which deferred returns true are not read: such an entry is
// marked Deferred (DataOffset -1) and checked by [Reader.Resolve] when its
// data is wanted. An archive of many records costs a reader of a remote
// object a few requests then, instead of one per record where the server
// answers only single ranges. Only a STORED entry whose central directory
// record is sound and whose shortest possible extent (header, name, data)
// lies before the central directory is deferred; until it is resolved, it
// is taken to fill the file up to the next record, as one torch writes
// does (see [Reader.Gaps]): Resolve checks that it does.
func NewReaderDeferring(r io.ReaderAt, size int64, maxEntries int, deferred func(*Entry) bool) (*Reader, error) {
	return newReader(r, size, maxEntries, deferred)
}

func newReader(r io.ReaderAt, size int64, maxEntries int, deferred func(*Entry) bool) (*Reader, error) {
	tailLen := int64(lenEnd + 65535)
	if tailLen > size {
		tailLen = size
	}
	tail := make([]byte, tailLen)
	if err := readFull(r, tail, size-tailLen); err != nil {
		return nil, err
	}
	// torch's reader (miniz) takes the last end-record signature that has
	// room for a record after it, without looking at the comment length.
	// Skipping a candidate whose comment length does not fit (as lenient
	// readers do) would let a fake record hidden in the real record's comment
	// point torch at a different central directory than the one checked
	// here; so the last candidate is the one, and it must fit exactly.
	eocd := int64(-1)
	for p := len(tail) - lenEnd; p >= 0; p-- {
		if binary.LittleEndian.Uint32(tail[p:]) == sigEnd {
			if p+lenEnd+int(binary.LittleEndian.Uint16(tail[p+20:])) != len(tail) {
				return nil, newError(ErrFormat, "", size-tailLen+int64(p), "the last end of central directory record does not end the file (comment length %d, %d bytes follow)", binary.LittleEndian.Uint16(tail[p+20:]), len(tail)-p-lenEnd)
			}
			eocd = size - tailLen + int64(p)
			break
		}
	}
	if eocd < 0 {
		return nil, newError(ErrFormat, "", -1, "zip archive without an end of central directory record (truncated?)")
	}
	e := tail[eocd-(size-tailLen):]
	disk, cdDisk := binary.LittleEndian.Uint16(e[4:]), binary.LittleEndian.Uint16(e[6:])
	nDisk, n := int64(binary.LittleEndian.Uint16(e[8:])), int64(binary.LittleEndian.Uint16(e[10:]))
	cdSize, cdOff := int64(binary.LittleEndian.Uint32(e[12:])), int64(binary.LittleEndian.Uint32(e[16:]))
	cdEnd := eocd
	if eocd >= lenLocator {
		loc := make([]byte, lenLocator)
		if err := readFull(r, loc, eocd-lenLocator); err != nil {
			return nil, err
		}
		if binary.LittleEndian.Uint32(loc) == sigLocator {
			off64 := binary.LittleEndian.Uint64(loc[8:])
			if off64 > uint64(eocd-lenLocator) || eocd-lenLocator-int64(off64) < lenEnd64Min {
				return nil, newError(ErrFormat, "", eocd, "zip64 end record locator points outside the file")
			}
			e64 := make([]byte, lenEnd64Min)
			if err := readFull(r, e64, int64(off64)); err != nil {
				return nil, err
			}
			if binary.LittleEndian.Uint32(e64) != sigEnd64 {
				return nil, newError(ErrFormat, "", int64(off64), "bad zip64 end of central directory signature")
			}
			d64, cd64 := binary.LittleEndian.Uint32(e64[16:]), binary.LittleEndian.Uint32(e64[20:])
			nd64, n64 := binary.LittleEndian.Uint64(e64[24:]), binary.LittleEndian.Uint64(e64[32:])
			s64, o64 := binary.LittleEndian.Uint64(e64[40:]), binary.LittleEndian.Uint64(e64[48:])
			if n64 > uint64(maxEntries) || s64 > uint64(size) || o64 > uint64(size) {
				return nil, newError(ErrFormat, "", int64(off64), "zip64 end record claims %d entries / %d bytes of directory in a %d-byte file", n64, s64, size)
			}
			// both records must agree wherever the classic one is not a placeholder
			if (disk != 0xffff && uint32(disk) != d64) || (cdDisk != 0xffff && uint32(cdDisk) != cd64) ||
				(n != 0xffff && uint64(n) != n64) || (nDisk != 0xffff && uint64(nDisk) != nd64) ||
				(cdSize != 0xffffffff && uint64(cdSize) != s64) || (cdOff != 0xffffffff && uint64(cdOff) != o64) {
				return nil, newError(ErrFormat, "", eocd, "zip and zip64 end records disagree")
			}
			disk, cdDisk = 0, 0
			if d64 != 0 || cd64 != 0 {
				disk = 1
			}
			n, nDisk, cdSize, cdOff = int64(n64), int64(nd64), int64(s64), int64(o64)
			cdEnd = int64(off64)
		}
	}
	if disk != 0 || cdDisk != 0 || n != nDisk {
		return nil, newError(ErrUnsupported, "", eocd, "multi-disk zip archives are not supported")
	}
	if n > int64(maxEntries) {
		return nil, newError(ErrLimit, "", eocd, "zip archive with %d entries exceeds the limit of %d", n, maxEntries)
	}
	if cdOff+cdSize != cdEnd || cdOff < 0 || cdSize < n*lenCentral {
		return nil, newError(ErrFormat, "", eocd, "central directory (offset %d, %d bytes, %d entries) is not where the end record says", cdOff, cdSize, n)
	}
	cd := make([]byte, cdSize)
	if err := readFull(r, cd, cdOff); err != nil {
		return nil, err
	}
	z := &Reader{r: r, size: size, DirOffset: cdOff, DirEnd: cdEnd, EndOffset: eocd, byName: make(map[string]*Entry, n)}
	folded := make(map[string]string, n)
	z.folded = folded
	p := 0
	for i := int64(0); i < n; i++ {
		if len(cd)-p < lenCentral || binary.LittleEndian.Uint32(cd[p:]) != sigCentral {
			return nil, newError(ErrFormat, "", cdOff+int64(p), "bad central directory entry %d", i)
		}
		h := cd[p:]
		ent, extra, n := parseCentral(h, int(i))
		if ent == nil {
			return nil, newError(ErrFormat, "", cdOff+int64(p), "central directory entry %d overruns the directory", i)
		}
		if err := ent.zip64(extra); err != "" {
			return nil, newError(ErrFormat, ent.Name, -1, "%s", err)
		}
		// miniz "extracts" an entry it takes for a directory (a name
		// ending in '/', or the DOS directory bit in the external
		// attributes) by reading nothing: torch would unpickle a buffer
		// it never filled. torch writes no directory entries.
		if ext := binary.LittleEndian.Uint32(h[38:]); ext&0x10 != 0 || strings.HasSuffix(ent.Name, "/") {
			z.problem(ErrFormat, ent.Name, "entry is marked as a directory (external attributes 0x%x): torch's reader returns it unread", ext)
		}
		// torch's reader cuts names at a NUL (C strings): "x/constants.pkl\x00"
		// is constants.pkl to it
		if strings.IndexByte(ent.Name, 0) >= 0 {
			z.problem(ErrFormat, ent.Name, "entry name contains a NUL byte (torch's reader cuts the name there)")
		}
		p += n
		z.Entries = append(z.Entries, ent)
		if _, dup := z.byName[ent.Name]; dup {
			z.problem(ErrFormat, ent.Name, "duplicate zip entry name (readers disagree on which one counts)")
		} else {
			z.byName[ent.Name] = ent
			// torch's reader (miniz) looks records up case-insensitively
			// (ASCII): "archive/DATA.pkl" can be what it loads as data.pkl
			if prev, dup := folded[FoldName(ent.Name)]; dup {
				z.problem(ErrFormat, ent.Name, "zip entry names %q and %q differ only in letter case (torch matches names case-insensitively)", prev, ent.Name)
			} else {
				folded[FoldName(ent.Name)] = ent.Name
			}
		}
	}
	if p != len(cd) {
		return nil, newError(ErrFormat, "", cdOff+int64(p), "%d unexplained bytes at the end of the central directory", len(cd)-p)
	}
	z.checkLocalHeaders(deferred)
	return z, nil
}

// zip64 applies a ZIP64 extended-information extra field, if any. An entry
// with two of them is refused: miniz applies the first, other readers the
// last, so the two fields can point torch at another local header than the
// one checked.
func (e *Entry) zip64(extra []byte) string {
	seen := false
	for len(extra) >= 4 {
		id, sz := binary.LittleEndian.Uint16(extra), int(binary.LittleEndian.Uint16(extra[2:]))
		if 4+sz > len(extra) {
			return "malformed extra field"
		}
		if id == 0x0001 {
			if seen {
				return "two zip64 extra fields (zip readers disagree on which one counts)"
			}
			seen = true
			f := extra[4 : 4+sz]
			next := func(v *int64) bool {
				if len(f) < 8 {
					return false
				}
				u := binary.LittleEndian.Uint64(f)
				if u > 1<<62 {
					return false
				}
				*v = int64(u)
				f = f[8:]
				return true
			}
			if e.Size == 0xffffffff && !next(&e.Size) ||
				e.CompressedSize == 0xffffffff && !next(&e.CompressedSize) ||
				e.HeaderOffset == 0xffffffff && !next(&e.HeaderOffset) {
				return "malformed zip64 extra field"
			}
		}
		extra = extra[4+sz:]
	}
	return ""
}

// checkLocalHeaders reads every local header (but those deferred) and
// records disagreements with the central directory, bad flags,
// compression and overlaps.
func (z *Reader) checkLocalHeaders(deferred func(*Entry) bool) {
	for _, e := range z.Entries {
		e.DataOffset = -1
		e.Deferred = deferred != nil && z.canDefer(e) && deferred(e)
	}
	z.prefetchLocalHeaders()
	for _, e := range z.Entries {
		if !e.Deferred {
			e.DataOffset = z.checkLocal(z.r, e, z.problem)
		}
	}
	sorted := make([]*Entry, 0, len(z.Entries))
	for _, e := range z.Entries {
		if e.DataOffset >= 0 || e.Deferred {
			sorted = append(sorted, e)
		}
	}
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].HeaderOffset < sorted[j].HeaderOffset })
	for i := 1; i < len(sorted); i++ {
		// a deferred entry is at least its header, name and data long
		if prev := sorted[i-1]; z.minEnd(prev) > sorted[i].HeaderOffset {
			z.problem(ErrFormat, sorted[i].Name, "entry overlaps %q", prev.Name)
		}
	}
	z.starts = make([]int64, 0, len(sorted)+1)
	for _, e := range sorted {
		z.starts = append(z.starts, e.HeaderOffset)
	}
	z.starts = append(z.starts, z.DirOffset)
	sort.Slice(z.starts, func(i, j int) bool { return z.starts[i] < z.starts[j] })
}

// canDefer reports whether e's local header may be read later: a STORED
// entry, not flagged, whose shortest extent (the fixed header, its name
// and its data) lies before the central directory. Anything else is read
// at once, as its problems are the archive's.
func (z *Reader) canDefer(e *Entry) bool {
	return e.Method == 0 && e.Flags&BadFlags == 0 && e.CompressedSize == e.Size &&
		e.HeaderOffset >= 0 && e.CompressedSize >= 0 &&
		e.HeaderOffset <= z.DirOffset-lenLocal-int64(len(e.Name)) &&
		e.CompressedSize <= z.DirOffset-lenLocal-int64(len(e.Name))-e.HeaderOffset
}

// minEnd is where e's data ends: known for an entry whose local header was
// read, at least its shortest extent for a deferred one.
func (z *Reader) minEnd(e *Entry) int64 {
	if e.Deferred {
		return e.HeaderOffset + lenLocal + int64(len(e.Name)) + e.CompressedSize
	}
	return e.DataOffset + e.CompressedSize
}

// nextStart is where the record or directory after the deferred entry e
// starts: where e, its data descriptor included, must end.
func (z *Reader) nextStart(e *Entry) int64 {
	i := sort.Search(len(z.starts), func(i int) bool { return z.starts[i] > e.HeaderOffset })
	if i == len(z.starts) {
		return z.DirOffset
	}
	return z.starts[i]
}

// checkLocal reads e's local header through r and reports what is wrong
// with it; it returns the offset of e's data, or -1 if the header is
// unusable.
func (z *Reader) checkLocal(r io.ReaderAt, e *Entry, problem func(kind error, entry, format string, args ...any)) int64 {
	var hdr [lenLocal]byte
	// torch's reader (miniz) only requires the local header and the
	// data to lie inside the file, not before the central directory:
	// a record placed in the end record's comment, in a central entry's
	// extra field or comment, or running into the directory is still
	// read. Such a record is kept (so that scan decodes what torch
	// would) and recorded as a problem (so that nothing accepts it).
	if e.HeaderOffset > z.size-lenLocal {
		problem(ErrFormat, e.Name, "local header offset %d is outside the archive data (past the end of the file)", e.HeaderOffset)
		return -1
	}
	if readFull(r, hdr[:], e.HeaderOffset) != nil || binary.LittleEndian.Uint32(hdr[:]) != sigLocal {
		problem(ErrFormat, e.Name, "no local header at offset %d", e.HeaderOffset)
		return -1
	}
	flags, method := binary.LittleEndian.Uint16(hdr[6:]), binary.LittleEndian.Uint16(hdr[8:])
	nl, el := int64(binary.LittleEndian.Uint16(hdr[26:])), int64(binary.LittleEndian.Uint16(hdr[28:]))
	dataOff := e.HeaderOffset + lenLocal + nl + el
	if dataOff > z.size || e.CompressedSize > z.size-dataOff {
		into := ""
		if dataOff < z.DirOffset {
			into = " runs into the central directory and"
		}
		problem(ErrFormat, e.Name, "entry data (%d bytes at offset %d)%s runs past the end of the file", e.CompressedSize, dataOff, into)
		return -1
	}
	if dataOff > z.DirOffset || e.CompressedSize > z.DirOffset-dataOff {
		problem(ErrFormat, e.Name, "entry (local header at offset %d, %d bytes of data at offset %d) is not before the central directory at offset %d (torch reads it anyway)", e.HeaderOffset, e.CompressedSize, dataOff, z.DirOffset)
	}
	name := make([]byte, nl)
	if readFull(r, name, e.HeaderOffset+lenLocal) != nil {
		problem(ErrFormat, e.Name, "unreadable local header name")
		return -1
	}
	if string(name) != e.Name {
		problem(ErrFormat, e.Name, "local header names the entry %q but the central directory says %q", quote(name), e.Name)
	}
	if (flags|e.Flags)&BadFlags != 0 {
		problem(ErrUnsupported, e.Name, "entry is flagged encrypted or patched (flags 0x%04x)", flags|e.Flags)
	}
	if method != e.Method {
		problem(ErrFormat, e.Name, "local header says compression method %d, central directory %d", method, e.Method)
	}
	if e.Method != 0 {
		problem(ErrUnsupported, e.Name, "entry is compressed (method %d); torch writes uncompressed (STORED) entries", e.Method)
	} else if e.CompressedSize != e.Size {
		problem(ErrFormat, e.Name, "stored entry with compressed size %d != size %d", e.CompressedSize, e.Size)
	}
	return dataOff
}

// prefetchLocalHeaders announces to a remote reader (rangeread.Prefetcher)
// every local header about to be read, with what is read next to it: the
// data descriptor of the entry before (which a checkpoint writes right
// before it; Gaps reads it), the name, and room for the extra field and
// the first bytes of the data (the scan looks for a pickle there). They
// then cost a few requests instead of several per entry; a local file
// reads them one by one as cheaply.
func (z *Reader) prefetchLocalHeaders() {
	offs := make([]int64, 0, len(z.Entries))
	lens := make([]int64, 0, len(z.Entries))
	for _, e := range z.Entries {
		if e.Deferred || e.HeaderOffset < 0 || e.HeaderOffset > z.size-lenLocal {
			continue
		}
		a := max(e.HeaderOffset-24, 0)
		offs = append(offs, a)
		lens = append(lens, e.HeaderOffset+lenLocal+int64(len(e.Name))+72-a)
	}
	rangeread.Prefetch(z.r, offs, lens)
}

// ReadAll reads a whole STORED entry of at most max bytes and verifies
// its CRC-32, as miniz does when it extracts one.
func (z *Reader) ReadAll(e *Entry, max int64) ([]byte, error) {
	if e.DataOffset < 0 || e.Method != 0 || e.Flags&BadFlags != 0 {
		return nil, newError(ErrFormat, e.Name, -1, "entry is unreadable")
	}
	if e.Size > max {
		return nil, newError(ErrFormat, e.Name, -1, "entry is %d bytes, expected at most %d", e.Size, max)
	}
	b := make([]byte, e.Size)
	if err := readFull(z.r, b, e.DataOffset); err != nil {
		return nil, err
	}
	if crc := crc32.ChecksumIEEE(b); crc != e.CRC32 {
		return nil, newError(ErrFormat, e.Name, -1, "CRC-32 mismatch (stored %08x, computed %08x)", e.CRC32, crc)
	}
	return b, nil
}

// Lookup finds an entry as miniz's mz_zip_reader_locate_file does (torch
// reads records this way): by name, ASCII letters compared without case.
// Names differing only in case are a Problem of the archive; the first
// entry of the folded name is returned.
func (z *Reader) Lookup(name string) *Entry {
	if e := z.byName[name]; e != nil {
		return e
	}
	return z.byName[z.folded[FoldName(name)]]
}

// FoldName folds ASCII letters to lower case and leaves every other byte
// alone, as miniz compares names.
func FoldName(s string) string {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c >= 'A' && c <= 'Z' {
			b := []byte(s)
			for j := i; j < len(b); j++ {
				if b[j] >= 'A' && b[j] <= 'Z' {
					b[j] += 'a' - 'A'
				}
			}
			return string(b)
		}
	}
	return s
}

// parseCentral parses the central directory entry at the start of h (its
// signature checked by the caller): the entry, its extra field and its
// length; nil if it runs past h.
func parseCentral(h []byte, index int) (*Entry, []byte, int) {
	ent := &Entry{
		Flags:          binary.LittleEndian.Uint16(h[8:]),
		Method:         binary.LittleEndian.Uint16(h[10:]),
		CRC32:          binary.LittleEndian.Uint32(h[16:]),
		CompressedSize: int64(binary.LittleEndian.Uint32(h[20:])),
		Size:           int64(binary.LittleEndian.Uint32(h[24:])),
		HeaderOffset:   int64(binary.LittleEndian.Uint32(h[42:])),
		Index:          index,
	}
	nl, el, cl := int(binary.LittleEndian.Uint16(h[28:])), int(binary.LittleEndian.Uint16(h[30:])), int(binary.LittleEndian.Uint16(h[32:]))
	if lenCentral+nl+el+cl > len(h) {
		return nil, nil, 0
	}
	ent.Name = string(h[lenCentral : lenCentral+nl])
	return ent, h[lenCentral+nl : lenCentral+nl+el], lenCentral + nl + el + cl
}
