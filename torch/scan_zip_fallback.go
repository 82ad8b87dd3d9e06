package torch

import (
	"fmt"
	"io"
	"strings"

	"github.com/gosafetensors/safetensors/torch/ziplist"
)

// When the central directory is unusable, which one torch's reader (miniz)
// or another zip reader takes is not certain: the classic end record and a
// zip64 locator may point at different directories, and end-record
// signatures can hide in a comment or in member data. The fallback scan
// therefore decodes the pickle members of every candidate directory, and
// of every local header found at any offset (including one nested inside
// another member's data).

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
		f.exempt++ // see scanZipArchive
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
		e := &zipEntry{Name: name, Method: 8, CompressedSize: n, Size: -1, DataOffset: data}
		scanDeflated(&zipArchive{r: f.r, size: f.size}, e, f.lim, f.rep)
	default:
		f.rep.addProblem(fmt.Sprintf("%s: pickle record with compression method %d; not scanned", name, method))
	}
}

// scanCandidateDirs decodes the .pkl members of every central directory an
// end record (each signature in the last 64 KiB, and the zip64 record its
// locator points at) names.
func (f *zipFallback) scanCandidateDirs() {
	for _, d := range ziplist.CandidateDirectories(f.r, f.size) {
		cd := make([]byte, d.Size)
		if readFull(f.r, cd, d.Offset) != nil {
			continue
		}
		f.scanDir(cd)
	}
}

// scanDir decodes the .pkl members of one central directory, as far as
// its entries parse.
func (f *zipFallback) scanDir(cd []byte) {
	for _, ent := range ziplist.ParseDirectory(cd, f.lim.MaxZipEntries) {
		if !strings.HasSuffix(asciiLower(ent.Name), ".pkl") {
			continue
		}
		h, ok := ziplist.ReadLocalHeader(f.r, f.size, ent.HeaderOffset)
		if !ok {
			f.rep.addProblem(fmt.Sprintf("%s: no local header at offset %d (central directory at another end record)", ent.Name, ent.HeaderOffset))
			continue
		}
		if ent.Flags&ziplist.BadFlags != 0 {
			f.rep.addProblem(ent.Name + ": pickle record is encrypted; not scanned")
			continue
		}
		n := ent.CompressedSize
		if ent.Method == 0 {
			// miniz reads usize bytes of a STORED entry (its csize check
			// can be defeated): scan the longer of the two
			n = max(n, ent.Size)
		}
		f.scanMember(ent.Name, ent.Method, h.DataOffset, n)
	}
}

// scanLocalHeaders decodes the .pkl member of every local header signature
// in the file, including one nested in another member's data.
func (f *zipFallback) scanLocalHeaders() {
	f.rep.addProblem("scanning every candidate central directory and every local header (central directory unusable)")
	for pos := ziplist.NextLocalHeader(f.r, 0, f.size); pos >= 0; pos = ziplist.NextLocalHeader(f.r, pos+1, f.size) {
		h, ok := ziplist.ReadLocalHeader(f.r, f.size, pos)
		if !ok {
			return
		}
		data := h.DataOffset
		if data > f.size || !strings.HasSuffix(asciiLower(h.Name), ".pkl") {
			continue
		}
		if h.Flags&ziplist.BadFlags != 0 {
			f.rep.addProblem(h.Name + ": pickle record is encrypted; not scanned")
			continue
		}
		// The member ends at its declared size if there is one, else (a
		// data descriptor, or a zip64 size) at the next local header.
		// A STORED member is scanned at least to the next signature: a
		// reader sizing it from a central directory we could not use may
		// read more than its local header says.
		next := ziplist.NextLocalHeader(f.r, data, f.size)
		if next < 0 {
			next = f.size
		}
		end := next
		csize := h.CompressedSize
		if h.Flags&0x8 == 0 && csize > 0 && csize != 0xffffffff && csize <= f.size-data {
			end = data + csize
			if h.Method == 0 {
				end = max(end, next)
			}
		}
		f.scanMember(h.Name, h.Method, data, end-data)
	}
}
