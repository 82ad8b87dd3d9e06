package torch

import (
	"bytes"
	"compress/flate"
	"encoding/binary"
	"fmt"
	"io"
	"sort"
)

// scanDeflated scans a DEFLATE-compressed pickle record (torch's reader,
// miniz, inflates it and unpickles it, though torch never writes one).
// The first part, up to inflateRatio bytes per stored byte, is inflated
// into memory and decoded in full; the rest of the stream is inflated
// again with a bounded window and walked for globals, to the record's
// declared size (what torch would read) or the end of the scan's inflate
// budget (see Limits.MaxInflateBytes), which is then a problem.
func scanDeflated(z *zipArchive, e *zipEntry, lim *Limits, rep *ScanReport) {
	inflate := func() io.ReadCloser { return flate.NewReader(io.NewSectionReader(z.r, e.dataOff, e.csize)) }
	budget := lim.inflateBudget()
	if budget == 0 {
		rep.addProblem(fmt.Sprintf("%s: compressed record not scanned: the scan's inflate budget is spent", e.name))
		return
	}
	memCap := min(lim.MaxPickleBytes, inflateRatio*e.csize+1024, budget)
	fr := inflate()
	var buf bytes.Buffer
	_, err := io.Copy(&buf, io.LimitReader(fr, memCap))
	more := false
	if err == nil && int64(buf.Len()) == memCap {
		var one [1]byte
		n, _ := fr.Read(one[:])
		more = n > 0
	}
	fr.Close()
	lim.spendInflate(int64(buf.Len()))
	if err != nil {
		rep.addProblem(fmt.Sprintf("%s: compressed data is corrupt after %d bytes: %v", e.name, buf.Len(), err))
	}
	ra := bytes.NewReader(buf.Bytes())
	src := newSource(ra, 0, int64(buf.Len()), e.name)
	ps := scanSource(src, e.name, pidZip, lim, rep, 1<<20, nil, nil)
	if !ps.failed && !more {
		return
	}
	from, st := int64(buf.Len()), (*walkState)(nil)
	if ps.failed {
		from, st = ps.failOff, ps.state
	}
	// Inflating again to from is paid for too: it is the bytes in memory.
	limit := from + lim.inflateBudget()
	end := limit
	if e.usize >= 0 && e.usize < end {
		end = e.usize
	}
	if from >= end {
		if more && end == limit {
			rep.addProblem(budgetProblem(e.name, from, lim))
		}
		return
	}
	fr = inflate()
	defer fr.Close()
	if _, err := io.CopyN(io.Discard, fr, from); err != nil {
		return
	}
	w := walkRegion(fr, from, end, e.name, rep, st)
	lim.spendInflate(w.pos - from)
	if w.pos >= limit {
		// through the walker's reader: it has read ahead of w.pos
		if _, err := w.r.ReadByte(); err == nil {
			rep.addProblem(budgetProblem(e.name, w.pos, lim))
		}
	}
}

// scanZipGaps reports and walks bytes of the archive that no local
// header, member data, data descriptor, central directory or end record
// accounts for: torch never reads them, and a checkpoint has none.
func scanZipGaps(z *zipArchive, rep *ScanReport) {
	type span struct{ a, b int64 }
	var spans []span
	for _, e := range z.entries {
		if e.dataOff < 0 {
			continue
		}
		end := e.dataOff + e.csize
		if e.flags&0x8 != 0 {
			end += z.descriptorLen(end, e)
		}
		spans = append(spans, span{e.lho, end})
	}
	tail := z.cdEnd
	if z.cdEnd != z.eocd { // zip64 end record, then its locator
		var h [12]byte
		if readFull(z.r, h[:], z.cdEnd) == nil {
			if n := binary.LittleEndian.Uint64(h[4:]); n <= uint64(z.eocd-z.cdEnd) {
				// only the record's 56 fixed bytes: an "extensible data
				// sector" after them is unexplained bytes (another archive
				// can hide there, for a reader that looks for a zip64
				// record just before the locator)
				spans = append(spans, span{z.cdEnd, z.cdEnd + min(12+int64(n), 56)})
			}
		}
		spans = append(spans, span{z.eocd - lenLocator, z.eocd})
		tail = z.eocd
	}
	spans = append(spans, span{z.cdOffset, z.cdEnd}, span{tail, z.size})
	sort.Slice(spans, func(i, j int) bool { return spans[i].a < spans[j].a })
	cur := int64(0)
	gaps := 0
	for _, s := range spans {
		if s.a > cur && gaps < 64 {
			gaps++
			rep.addProblem(fmt.Sprintf("%d unexplained bytes at offset %d between zip records", s.a-cur, cur))
			walkAt(z.r, cur, 0, s.a-cur, fmt.Sprintf("zip gap at offset %d", cur), rep, nil)
		}
		cur = max(cur, s.b)
	}
}

// descriptorLen returns the length of the data descriptor at off if it
// matches entry e (with or without its signature, 32- or 64-bit sizes),
// else 0.
func (z *zipArchive) descriptorLen(off int64, e *zipEntry) int64 {
	b := make([]byte, min(24, max(z.size-off, 0)))
	if readFull(z.r, b, off) != nil {
		return 0
	}
	sig := 0
	if len(b) >= 4 && binary.LittleEndian.Uint32(b) == 0x08074b50 {
		sig = 4
	}
	d := b[sig:]
	if len(d) < 4 || binary.LittleEndian.Uint32(d) != e.crc {
		return 0
	}
	if len(d) >= 12 && int64(binary.LittleEndian.Uint32(d[4:])) == e.csize && int64(binary.LittleEndian.Uint32(d[8:])) == e.usize {
		return int64(sig + 12)
	}
	if len(d) >= 20 && int64(binary.LittleEndian.Uint64(d[4:])) == e.csize && int64(binary.LittleEndian.Uint64(d[12:])) == e.usize {
		return int64(sig + 20)
	}
	return 0
}

// budgetProblem says that a record inflating past at was not scanned
// further.
func budgetProblem(name string, at int64, lim *Limits) string {
	return fmt.Sprintf("%s: compressed record inflates past %d bytes, the end of the scan's inflate budget (%d bytes per byte of the file, at least %d MiB, at most MaxInflateBytes = %d); the rest was not scanned",
		name, at, inflateRatio, minInflateBudget>>20, lim.MaxInflateBytes)
}
