package torch

import (
	"bytes"
	"compress/flate"
	"fmt"
	"github.com/gosafetensors/safetensors/torch/pickle"
	"io"
)

// scanDeflated scans a DEFLATE-compressed pickle record (torch's reader,
// miniz, inflates it and unpickles it, though torch never writes one).
// The first part, up to inflateRatio bytes per stored byte, is inflated
// into memory and decoded in full; the rest of the stream is inflated
// again with a bounded window and walked for globals, to the record's
// declared size (what torch would read) or the end of the scan's inflate
// budget (see Limits.MaxInflateBytes), which is then a problem.
func scanDeflated(z *zipArchive, e *zipEntry, lim *Limits, rep *ScanReport) {
	inflate := func() io.ReadCloser { return flate.NewReader(io.NewSectionReader(z.r, e.DataOffset, e.CompressedSize)) }
	budget := lim.inflateBudget()
	if budget == 0 {
		rep.addProblem(fmt.Sprintf("%s: compressed record not scanned: the scan's inflate budget is spent", e.Name))
		return
	}
	memCap := min(lim.MaxPickleBytes, inflateRatio*e.CompressedSize+1024, budget)
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
	rep.inflated += int64(buf.Len())
	if err != nil {
		rep.addProblem(fmt.Sprintf("%s: compressed data is corrupt after %d bytes: %v", e.Name, buf.Len(), err))
	}
	ra := bytes.NewReader(buf.Bytes())
	src := pickle.NewStream(ra, 0, int64(buf.Len()))
	ps := scanSource(src, e.Name, pidZip, lim, rep, 1<<20, nil, nil)
	if !ps.failed && !more {
		return
	}
	from, st := int64(buf.Len()), (*pickle.State)(nil)
	if ps.failed {
		from, st = ps.failOff, ps.state
	}
	// Inflating again to from is paid for too: it is the bytes in memory.
	limit := from + lim.inflateBudget()
	end := limit
	if e.Size >= 0 && e.Size < end {
		end = e.Size
	}
	if from >= end {
		if more && end == limit {
			rep.addProblem(budgetProblem(e.Name, from, lim))
		}
		return
	}
	fr = inflate()
	defer fr.Close()
	if _, err := io.CopyN(io.Discard, fr, from); err != nil {
		return
	}
	w := rep.walker().WalkReader(fr, from, end, rep.sink(e.Name), st)
	lim.spendInflate(w.Pos() - from)
	rep.inflated += w.Pos() // inflated again to from, then walked
	if w.Pos() >= limit {
		// through the walker's reader: it has read ahead of Pos
		if w.More() {
			rep.addProblem(budgetProblem(e.Name, w.Pos(), lim))
		}
	}
}

// scanZipGaps reports and walks bytes of the archive that no local
// header, member data, data descriptor, central directory or end record
// accounts for: torch never reads them, and a checkpoint has none.
func scanZipGaps(z *zipArchive, rep *ScanReport) {
	for i, g := range z.Gaps() {
		if i == 64 {
			break
		}
		rep.addProblem(fmt.Sprintf("%d unexplained bytes at offset %d between zip records", g.Len, g.Offset))
		walkAt(z.r, g.Offset, 0, g.Len, fmt.Sprintf("zip gap at offset %d", g.Offset), rep, nil)
	}
}

// budgetProblem says that a record inflating past at was not scanned
// further.
func budgetProblem(name string, at int64, lim *Limits) string {
	return fmt.Sprintf("%s: compressed record inflates past %d bytes, the end of the scan's inflate budget (%d bytes per byte of the file, at least %d MiB, at most MaxInflateBytes = %d); the rest was not scanned",
		name, at, inflateRatio, minInflateBudget>>20, lim.MaxInflateBytes)
}
