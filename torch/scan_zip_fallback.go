package torch

import (
	"encoding/binary"
	"fmt"
	"io"
	"strings"
)

// When the central directory is unusable, which one torch's reader (miniz)
// or another zip reader takes is not certain: the classic end record and a
// zip64 locator may point at different directories, and end-record
// signatures can hide in a comment or in member data. The fallback scan
// therefore decodes the pickle members of every candidate directory, and
// of every local header found at any offset (including one nested inside
// another member's data).

// maxEndSearch is how far from the end of the file miniz may find an end
// record: it scans back in 4 KiB chunks and stops only after a chunk that
// starts 65,557 bytes or more from the end.
const maxEndSearch = lenEnd + 65535 + 4096

// maxDirCandidates bounds the end records tried.
const maxDirCandidates = 64

// zipFallback scans what any reader could take from a zip archive whose
// central directory readZip refused.
type zipFallback struct {
	r       io.ReaderAt
	size    int64
	lim     *Limits
	rep     *ScanReport
	scanned map[[3]int64]bool // (data offset, size, method) already decoded
	spent   int64             // bytes decoded so far
	walked  bool              // the whole file was walked instead (see budget)
	exempt  int               // data.pkl records decoded outside the budget
}

func scanZipFallback(r io.ReaderAt, size int64, lim *Limits, rep *ScanReport) {
	f := &zipFallback{r: r, size: size, lim: lim, rep: rep, scanned: map[[3]int64]bool{}}
	f.scanCandidateDirs()
	f.scanLocalHeaders()
}

// budget reports whether member bytes at k may be decoded: each record
// once, and at most a few times the file's size in all; past that the
// whole file is walked once, which sees every STORED byte.
func (f *zipFallback) budget(k [3]int64, name string) bool {
	if f.scanned[k] {
		return false
	}
	f.scanned[k] = true
	if isDataPkl(name) && f.exempt < maxDataPklExempt {
		f.exempt++ // see scanZipExcept
		return true
	}
	if f.spent += k[1]; f.spent > 4*f.size+(1<<20) {
		if !f.walked {
			f.walked = true
			f.rep.addProblem(fmt.Sprintf("%s: zip members overlap (more bytes to decode than the %d-byte file holds several times); the whole file is walked for globals instead", name, f.size))
			walkAt(f.r, 0, 0, f.size, "whole file", f.rep, nil)
		}
		return k[2] != 0
	}
	return true
}

// scanMember decodes a .pkl member of n bytes (compressed) at data.
func (f *zipFallback) scanMember(name string, method uint16, data, n int64) {
	if data < 0 || data > f.size {
		return
	}
	n = min(n, f.size-data)
	if method == 8 {
		// A DEFLATE stream ends by itself: headers claiming different
		// sizes for the same data are the same record, inflated once.
		n = f.size - data
	}
	if !f.budget([3]int64{data, n, int64(method)}, name) {
		return
	}
	switch method {
	case 0:
		scanPickles(f.r, data, 0, n, name, pidZip, f.lim, f.rep, 1<<20, nil)
	case 8:
		e := &zipEntry{name: name, method: 8, csize: n, usize: -1, dataOff: data}
		scanDeflated(&zipArchive{r: f.r, size: f.size}, e, f.lim, f.rep)
	default:
		f.rep.addProblem(fmt.Sprintf("%s: pickle record with compression method %d; not scanned", name, method))
	}
}

// scanCandidateDirs decodes the .pkl members of every central directory an
// end record (each signature in the last 64 KiB, and the zip64 record its
// locator points at) names.
func (f *zipFallback) scanCandidateDirs() {
	tailLen := min(f.size, maxEndSearch)
	tail := make([]byte, tailLen)
	if readFull(f.r, tail, f.size-tailLen) != nil {
		return
	}
	type dir struct{ off, size, n int64 }
	var dirs []dir
	seen := map[dir]bool{}
	addDir := func(d dir) {
		if !seen[d] && d.off >= 0 && d.size > 0 && d.off <= f.size && d.size <= f.size-d.off {
			seen[d] = true
			dirs = append(dirs, d)
		}
	}
	tried := 0
	for p := len(tail) - 4; p >= 0 && tried < maxDirCandidates; p-- {
		if binary.LittleEndian.Uint32(tail[p:]) != sigEnd || p+lenEnd > len(tail) {
			continue
		}
		tried++
		e := tail[p:]
		eocd := f.size - tailLen + int64(p)
		addDir(dir{int64(binary.LittleEndian.Uint32(e[16:])), int64(binary.LittleEndian.Uint32(e[12:])), int64(binary.LittleEndian.Uint16(e[10:]))})
		if eocd < lenLocator {
			continue
		}
		var loc [lenLocator]byte
		if readFull(f.r, loc[:], eocd-lenLocator) != nil || binary.LittleEndian.Uint32(loc[:]) != sigLocator {
			continue
		}
		off64 := binary.LittleEndian.Uint64(loc[8:])
		var e64 [lenEnd64Min]byte
		if off64 > uint64(f.size-lenEnd64Min) || readFull(f.r, e64[:], int64(off64)) != nil || binary.LittleEndian.Uint32(e64[:]) != sigEnd64 {
			continue
		}
		n64, s64, o64 := binary.LittleEndian.Uint64(e64[32:]), binary.LittleEndian.Uint64(e64[40:]), binary.LittleEndian.Uint64(e64[48:])
		if s64 <= uint64(f.size) && o64 <= uint64(f.size) && n64 <= uint64(f.size) {
			addDir(dir{int64(o64), int64(s64), int64(n64)})
		}
	}
	for _, d := range dirs {
		cd := make([]byte, d.size)
		if readFull(f.r, cd, d.off) != nil {
			continue
		}
		f.scanDir(cd, d.n)
	}
}

// scanDir decodes the .pkl members of one central directory, as far as
// its entries parse.
func (f *zipFallback) scanDir(cd []byte, n int64) {
	p := 0
	for i := int64(0); i < max(n, int64(f.lim.MaxZipEntries)) && i < int64(f.lim.MaxZipEntries); i++ {
		if len(cd)-p < lenCentral || binary.LittleEndian.Uint32(cd[p:]) != sigCentral {
			return
		}
		h := cd[p:]
		ent := &zipEntry{
			flags:  binary.LittleEndian.Uint16(h[8:]),
			method: binary.LittleEndian.Uint16(h[10:]),
			csize:  int64(binary.LittleEndian.Uint32(h[20:])),
			usize:  int64(binary.LittleEndian.Uint32(h[24:])),
			lho:    int64(binary.LittleEndian.Uint32(h[42:])),
		}
		nl, el, cl := int(binary.LittleEndian.Uint16(h[28:])), int(binary.LittleEndian.Uint16(h[30:])), int(binary.LittleEndian.Uint16(h[32:]))
		if lenCentral+nl+el+cl > len(cd)-p {
			return
		}
		ent.name = string(h[lenCentral : lenCentral+nl])
		ent.zip64(h[lenCentral+nl : lenCentral+nl+el]) // a malformed field leaves the 32-bit values
		p += lenCentral + nl + el + cl
		if !strings.HasSuffix(asciiLower(ent.name), ".pkl") {
			continue
		}
		var hdr [lenLocal]byte
		if ent.lho > f.size-lenLocal || readFull(f.r, hdr[:], ent.lho) != nil || binary.LittleEndian.Uint32(hdr[:]) != sigLocal {
			f.rep.addProblem(fmt.Sprintf("%s: no local header at offset %d (central directory at another end record)", ent.name, ent.lho))
			continue
		}
		if ent.flags&badZipFlags != 0 {
			f.rep.addProblem(ent.name + ": pickle record is encrypted; not scanned")
			continue
		}
		data := ent.lho + lenLocal + int64(binary.LittleEndian.Uint16(hdr[26:])) + int64(binary.LittleEndian.Uint16(hdr[28:]))
		n := ent.csize
		if ent.method == 0 {
			// miniz reads usize bytes of a STORED entry (its csize check
			// can be defeated): scan the longer of the two
			n = max(n, ent.usize)
		}
		f.scanMember(ent.name, ent.method, data, n)
	}
}

// scanLocalHeaders decodes the .pkl member of every local header signature
// in the file, including one nested in another member's data.
func (f *zipFallback) scanLocalHeaders() {
	f.rep.addProblem("scanning every candidate central directory and every local header (central directory unusable)")
	var hdr [lenLocal]byte
	for pos := findSig(f.r, 0, f.size); pos >= 0 && pos+lenLocal <= f.size; pos = findSig(f.r, pos+1, f.size) {
		if readFull(f.r, hdr[:], pos) != nil {
			return
		}
		flags, method := binary.LittleEndian.Uint16(hdr[6:]), binary.LittleEndian.Uint16(hdr[8:])
		csize := int64(binary.LittleEndian.Uint32(hdr[18:]))
		nl, el := int64(binary.LittleEndian.Uint16(hdr[26:])), int64(binary.LittleEndian.Uint16(hdr[28:]))
		data := pos + lenLocal + nl + el
		if data > f.size {
			continue
		}
		name := make([]byte, nl)
		if readFull(f.r, name, pos+lenLocal) != nil || !strings.HasSuffix(asciiLower(string(name)), ".pkl") {
			continue
		}
		if flags&badZipFlags != 0 {
			f.rep.addProblem(string(name) + ": pickle record is encrypted; not scanned")
			continue
		}
		// The member ends at its declared size if there is one, else (a
		// data descriptor, or a zip64 size) at the next local header.
		// A STORED member is scanned at least to the next signature: a
		// reader sizing it from a central directory we could not use may
		// read more than its local header says.
		next := findSig(f.r, data, f.size)
		if next < 0 {
			next = f.size
		}
		end := next
		if flags&0x8 == 0 && csize > 0 && csize != 0xffffffff && csize <= f.size-data {
			end = data + csize
			if method == 0 {
				end = max(end, next)
			}
		}
		f.scanMember(string(name), method, data, end-data)
	}
}
