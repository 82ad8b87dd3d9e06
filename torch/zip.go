package torch

import (
	"bytes"
	"compress/flate"
	"encoding/binary"
	"fmt"
	"io"
	"sort"
	"strings"
)

// Zip flag bits that change how the bytes must be read: encryption (0x1),
// compressed patched data (0x20), strong encryption (0x40) and an encrypted
// central directory (0x2000).
const badZipFlags = 0x1 | 0x20 | 0x40 | 0x2000

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

// zipEntry is one central-directory record, checked against its local header.
type zipEntry struct {
	name          string
	flags, method uint16
	crc           uint32
	csize, usize  int64
	lho           int64 // local header offset
	dataOff       int64 // -1 if the local header is unusable
	index         int
}

// zipProblem is a container irregularity; problems are reported after the
// pickles have been checked, so a dangerous global is always named first.
type zipProblem struct {
	kind  error
	entry string
	msg   string
}

type zipArchive struct {
	r        io.ReaderAt
	size     int64
	entries  []*zipEntry
	byName   map[string]*zipEntry // first entry of each name
	folded   map[string]string    // ASCII-lowercased name -> the first name folding to it
	cdOffset int64
	cdEnd    int64 // end of the central directory: the zip64 end record or the end record
	eocd     int64 // offset of the end of central directory record
	problems []zipProblem
}

func (z *zipArchive) problem(kind error, entry, format string, args ...any) {
	z.problems = append(z.problems, zipProblem{kind: kind, entry: entry, msg: fmt.Sprintf(format, args...)})
}

// readZip parses the end record(s) and the central directory (the truth), then
// reads every local header itself to cross-check name, flags and method.
func readZip(r io.ReaderAt, size int64, lim *Limits) (*zipArchive, error) {
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
				return nil, newError(ErrCorrupt, "", size-tailLen+int64(p), "the last end of central directory record does not end the file (comment length %d, %d bytes follow)", binary.LittleEndian.Uint16(tail[p+20:]), len(tail)-p-lenEnd)
			}
			eocd = size - tailLen + int64(p)
			break
		}
	}
	if eocd < 0 {
		return nil, newError(ErrCorrupt, "", -1, "zip archive without an end of central directory record (truncated?)")
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
				return nil, newError(ErrCorrupt, "", eocd, "zip64 end record locator points outside the file")
			}
			e64 := make([]byte, lenEnd64Min)
			if err := readFull(r, e64, int64(off64)); err != nil {
				return nil, err
			}
			if binary.LittleEndian.Uint32(e64) != sigEnd64 {
				return nil, newError(ErrCorrupt, "", int64(off64), "bad zip64 end of central directory signature")
			}
			d64, cd64 := binary.LittleEndian.Uint32(e64[16:]), binary.LittleEndian.Uint32(e64[20:])
			nd64, n64 := binary.LittleEndian.Uint64(e64[24:]), binary.LittleEndian.Uint64(e64[32:])
			s64, o64 := binary.LittleEndian.Uint64(e64[40:]), binary.LittleEndian.Uint64(e64[48:])
			if n64 > uint64(lim.MaxZipEntries) || s64 > uint64(size) || o64 > uint64(size) {
				return nil, newError(ErrCorrupt, "", int64(off64), "zip64 end record claims %d entries / %d bytes of directory in a %d-byte file", n64, s64, size)
			}
			// both records must agree wherever the classic one is not a placeholder
			if (disk != 0xffff && uint32(disk) != d64) || (cdDisk != 0xffff && uint32(cdDisk) != cd64) ||
				(n != 0xffff && uint64(n) != n64) || (nDisk != 0xffff && uint64(nDisk) != nd64) ||
				(cdSize != 0xffffffff && uint64(cdSize) != s64) || (cdOff != 0xffffffff && uint64(cdOff) != o64) {
				return nil, newError(ErrCorrupt, "", eocd, "zip and zip64 end records disagree")
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
	if n > int64(lim.MaxZipEntries) {
		return nil, newError(ErrLimit, "", eocd, "zip archive with %d entries exceeds the limit of %d", n, lim.MaxZipEntries)
	}
	if cdOff+cdSize != cdEnd || cdOff < 0 || cdSize < n*lenCentral {
		return nil, newError(ErrCorrupt, "", eocd, "central directory (offset %d, %d bytes, %d entries) is not where the end record says", cdOff, cdSize, n)
	}
	cd := make([]byte, cdSize)
	if err := readFull(r, cd, cdOff); err != nil {
		return nil, err
	}
	z := &zipArchive{r: r, size: size, cdOffset: cdOff, cdEnd: cdEnd, eocd: eocd, byName: make(map[string]*zipEntry, n)}
	folded := make(map[string]string, n)
	z.folded = folded
	p := 0
	for i := int64(0); i < n; i++ {
		if len(cd)-p < lenCentral || binary.LittleEndian.Uint32(cd[p:]) != sigCentral {
			return nil, newError(ErrCorrupt, "", cdOff+int64(p), "bad central directory entry %d", i)
		}
		h := cd[p:]
		ent := &zipEntry{
			flags:  binary.LittleEndian.Uint16(h[8:]),
			method: binary.LittleEndian.Uint16(h[10:]),
			crc:    binary.LittleEndian.Uint32(h[16:]),
			csize:  int64(binary.LittleEndian.Uint32(h[20:])),
			usize:  int64(binary.LittleEndian.Uint32(h[24:])),
			lho:    int64(binary.LittleEndian.Uint32(h[42:])),
			index:  int(i),
		}
		nl, el, cl := int(binary.LittleEndian.Uint16(h[28:])), int(binary.LittleEndian.Uint16(h[30:])), int(binary.LittleEndian.Uint16(h[32:]))
		if lenCentral+nl+el+cl > len(cd)-p {
			return nil, newError(ErrCorrupt, "", cdOff+int64(p), "central directory entry %d overruns the directory", i)
		}
		ent.name = string(h[lenCentral : lenCentral+nl])
		if err := ent.zip64(h[lenCentral+nl : lenCentral+nl+el]); err != "" {
			return nil, newError(ErrCorrupt, ent.name, -1, "%s", err)
		}
		// miniz "extracts" an entry it takes for a directory (a name
		// ending in '/', or the DOS directory bit in the external
		// attributes) by reading nothing: torch would unpickle a buffer
		// it never filled. torch writes no directory entries.
		if ext := binary.LittleEndian.Uint32(h[38:]); ext&0x10 != 0 || strings.HasSuffix(ent.name, "/") {
			z.problem(ErrCorrupt, ent.name, "entry is marked as a directory (external attributes 0x%x): torch's reader returns it unread", ext)
		}
		// torch's reader cuts names at a NUL (C strings): "x/constants.pkl\x00"
		// is constants.pkl to it
		if strings.IndexByte(ent.name, 0) >= 0 {
			z.problem(ErrCorrupt, ent.name, "entry name contains a NUL byte (torch's reader cuts the name there)")
		}
		p += lenCentral + nl + el + cl
		z.entries = append(z.entries, ent)
		if _, dup := z.byName[ent.name]; dup {
			z.problem(ErrCorrupt, ent.name, "duplicate zip entry name (readers disagree on which one counts)")
		} else {
			z.byName[ent.name] = ent
			// torch's reader (miniz) looks records up case-insensitively
			// (ASCII): "archive/DATA.pkl" can be what it loads as data.pkl
			if prev, dup := folded[asciiLower(ent.name)]; dup {
				z.problem(ErrCorrupt, ent.name, "zip entry names %q and %q differ only in letter case (torch matches names case-insensitively)", prev, ent.name)
			} else {
				folded[asciiLower(ent.name)] = ent.name
			}
		}
	}
	if p != len(cd) {
		return nil, newError(ErrCorrupt, "", cdOff+int64(p), "%d unexplained bytes at the end of the central directory", len(cd)-p)
	}
	z.checkLocalHeaders()
	return z, nil
}

// zip64 applies a ZIP64 extended-information extra field, if any. An entry
// with two of them is refused: miniz applies the first, other readers the
// last, so the two fields can point torch at another local header than the
// one checked.
func (e *zipEntry) zip64(extra []byte) string {
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
			if e.usize == 0xffffffff && !next(&e.usize) ||
				e.csize == 0xffffffff && !next(&e.csize) ||
				e.lho == 0xffffffff && !next(&e.lho) {
				return "malformed zip64 extra field"
			}
		}
		extra = extra[4+sz:]
	}
	return ""
}

// checkLocalHeaders reads every local header and records disagreements with
// the central directory, bad flags, compression and overlaps.
func (z *zipArchive) checkLocalHeaders() {
	var hdr [lenLocal]byte
	for _, e := range z.entries {
		e.dataOff = -1
		// torch's reader (miniz) only requires the local header and the
		// data to lie inside the file, not before the central directory:
		// a record placed in the end record's comment, in a central entry's
		// extra field or comment, or running into the directory is still
		// read. Such a record is kept (so that scan decodes what torch
		// would) and recorded as a problem (so that nothing accepts it).
		if e.lho > z.size-lenLocal {
			z.problem(ErrCorrupt, e.name, "local header offset %d is outside the archive data (past the end of the file)", e.lho)
			continue
		}
		if readFull(z.r, hdr[:], e.lho) != nil || binary.LittleEndian.Uint32(hdr[:]) != sigLocal {
			z.problem(ErrCorrupt, e.name, "no local header at offset %d", e.lho)
			continue
		}
		flags, method := binary.LittleEndian.Uint16(hdr[6:]), binary.LittleEndian.Uint16(hdr[8:])
		nl, el := int64(binary.LittleEndian.Uint16(hdr[26:])), int64(binary.LittleEndian.Uint16(hdr[28:]))
		dataOff := e.lho + lenLocal + nl + el
		if dataOff > z.size || e.csize > z.size-dataOff {
			into := ""
			if dataOff < z.cdOffset {
				into = " runs into the central directory and"
			}
			z.problem(ErrCorrupt, e.name, "entry data (%d bytes at offset %d)%s runs past the end of the file", e.csize, dataOff, into)
			continue
		}
		if dataOff > z.cdOffset || e.csize > z.cdOffset-dataOff {
			z.problem(ErrCorrupt, e.name, "entry (local header at offset %d, %d bytes of data at offset %d) is not before the central directory at offset %d (torch reads it anyway)", e.lho, e.csize, dataOff, z.cdOffset)
		}
		name := make([]byte, nl)
		if readFull(z.r, name, e.lho+lenLocal) != nil {
			z.problem(ErrCorrupt, e.name, "unreadable local header name")
			continue
		}
		if string(name) != e.name {
			z.problem(ErrCorrupt, e.name, "local header names the entry %q but the central directory says %q", truncate(name), e.name)
		}
		if (flags|e.flags)&badZipFlags != 0 {
			z.problem(ErrUnsupported, e.name, "entry is flagged encrypted or patched (flags 0x%04x)", flags|e.flags)
		}
		if method != e.method {
			z.problem(ErrCorrupt, e.name, "local header says compression method %d, central directory %d", method, e.method)
		}
		if e.method != 0 {
			z.problem(ErrUnsupported, e.name, "entry is compressed (method %d); torch writes uncompressed (STORED) entries", e.method)
		} else if e.csize != e.usize {
			z.problem(ErrCorrupt, e.name, "stored entry with compressed size %d != size %d", e.csize, e.usize)
		}
		e.dataOff = dataOff
	}
	sorted := make([]*zipEntry, 0, len(z.entries))
	for _, e := range z.entries {
		if e.dataOff >= 0 {
			sorted = append(sorted, e)
		}
	}
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].lho < sorted[j].lho })
	for i := 1; i < len(sorted); i++ {
		if prev := sorted[i-1]; prev.dataOff+prev.csize > sorted[i].lho {
			z.problem(ErrCorrupt, sorted[i].name, "entry overlaps %q", prev.name)
		}
	}
}

// prefix returns the single top-level folder all entries live in, recording
// a problem if there is none or more than one.
func (z *zipArchive) prefix() string {
	prefix := ""
	for i, e := range z.entries {
		slash := strings.IndexByte(e.name, '/')
		if slash <= 0 {
			z.problem(ErrCorrupt, e.name, "entry is not inside a top-level folder")
			continue
		}
		if i == 0 || prefix == "" {
			prefix = e.name[:slash]
		} else if e.name[:slash] != prefix {
			z.problem(ErrCorrupt, e.name, "entries live under more than one top-level folder (%q and %q)", prefix, e.name[:slash])
		}
	}
	return prefix
}

// readSmall reads a whole small STORED entry and verifies its CRC.
func (z *zipArchive) readSmall(e *zipEntry, max int64) ([]byte, error) {
	if e.dataOff < 0 || e.method != 0 || e.flags&badZipFlags != 0 {
		return nil, newError(ErrCorrupt, e.name, -1, "entry is unreadable")
	}
	if e.usize > max {
		return nil, newError(ErrCorrupt, e.name, -1, "entry is %d bytes, expected at most %d", e.usize, max)
	}
	b := make([]byte, e.usize)
	if err := readFull(z.r, b, e.dataOff); err != nil {
		return nil, err
	}
	if crc := crc32IEEE(b); crc != e.crc {
		return nil, newError(ErrCorrupt, e.name, -1, "CRC-32 mismatch (stored %08x, computed %08x)", e.crc, crc)
	}
	return b, nil
}

// pickleReader returns a ReaderAt and length for decoding entry e. STORED
// entries are read in place; DEFLATE entries are inflated into memory with a
// cap (only used to name dangerous globals before refusing the archive).
func (z *zipArchive) pickleReader(e *zipEntry, max int64) (io.ReaderAt, int64, int64, bool) {
	if e.dataOff < 0 || e.flags&badZipFlags != 0 {
		return nil, 0, 0, false
	}
	switch e.method {
	case 0:
		return z.r, e.dataOff, e.usize, true
	case 8:
		// DEFLATE reaches ~1000:1; inflate at most inflateRatio bytes per
		// stored byte so that a small bomb cannot claim MaxPickleBytes of
		// memory. A pickle cut short is still refused (the entry is
		// compressed, and its end is missing), just without naming what
		// lies beyond.
		if c := inflateRatio*e.csize + 1024; c < max {
			max = c
		}
		fr := flate.NewReader(io.NewSectionReader(z.r, e.dataOff, e.csize))
		defer fr.Close()
		var buf bytes.Buffer
		if _, err := io.Copy(&buf, io.LimitReader(fr, max)); err != nil {
			return nil, 0, 0, false
		}
		return bytes.NewReader(buf.Bytes()), 0, int64(buf.Len()), true
	}
	return nil, 0, 0, false
}

// lookup finds a record as torch's reader (miniz) does: by name, letters
// compared without case. Names differing only in case are refused when the
// archive is read, so the match is unique.
func (z *zipArchive) lookup(name string) *zipEntry {
	if e := z.byName[name]; e != nil {
		return e
	}
	return z.byName[z.folded[asciiLower(name)]]
}

// asciiLower folds ASCII letters only, like miniz's name comparison.
func asciiLower(s string) string {
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

func readFull(r io.ReaderAt, p []byte, off int64) error {
	n, err := r.ReadAt(p, off)
	if n == len(p) {
		return nil
	}
	if err == nil || err == io.EOF || err == io.ErrUnexpectedEOF {
		return newError(ErrCorrupt, "", off+int64(n), "unexpected end of file")
	}
	return &Error{Kind: ErrCorrupt, Offset: off + int64(n), Msg: "read failed", Err: err}
}
