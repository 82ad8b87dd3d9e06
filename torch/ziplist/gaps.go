package ziplist

import (
	"encoding/binary"
	"io"
	"sort"
)

// Span is a byte range [Offset, Offset+Len) of the file.
type Span struct{ Offset, Len int64 }

// Gaps returns, in file order, the bytes of the archive that no local
// header, entry data, data descriptor, central directory or end record
// accounts for: miniz never reads them, and a checkpoint torch writes
// has none. The 56 fixed bytes of a ZIP64 end record count; its
// "extensible data sector" does not (another archive can hide there, for
// a reader that looks for a ZIP64 record just before the locator).
func (z *Reader) Gaps() []Span {
	type span struct{ a, b int64 }
	var spans []span
	for _, e := range z.Entries {
		if e.Deferred {
			// taken to fill the file up to the next record; Resolve checks it
			spans = append(spans, span{e.HeaderOffset, z.nextStart(e)})
			continue
		}
		if e.DataOffset < 0 {
			continue
		}
		end := e.DataOffset + e.CompressedSize
		if e.Flags&0x8 != 0 {
			end += z.descriptorLen(end, e)
		}
		spans = append(spans, span{e.HeaderOffset, end})
	}
	tail := z.DirEnd
	if z.DirEnd != z.EndOffset { // zip64 end record, then its locator
		var h [12]byte
		if readFull(z.r, h[:], z.DirEnd) == nil {
			if n := binary.LittleEndian.Uint64(h[4:]); n <= uint64(z.EndOffset-z.DirEnd) {
				spans = append(spans, span{z.DirEnd, z.DirEnd + min(12+int64(n), lenEnd64Min)})
			}
		}
		spans = append(spans, span{z.EndOffset - lenLocator, z.EndOffset})
		tail = z.EndOffset
	}
	spans = append(spans, span{z.DirOffset, z.DirEnd}, span{tail, z.size})
	sort.Slice(spans, func(i, j int) bool { return spans[i].a < spans[j].a })
	var gaps []Span
	cur := int64(0)
	for _, s := range spans {
		if s.a > cur {
			gaps = append(gaps, Span{cur, s.a - cur})
		}
		cur = max(cur, s.b)
	}
	return gaps
}

// descriptorLen returns the length of the data descriptor at off if it
// matches entry e (with or without its signature, 32- or 64-bit sizes),
// else 0.
func (z *Reader) descriptorLen(off int64, e *Entry) int64 {
	return z.descriptorLenAt(z.r, off, e)
}

// descriptorLenAt is descriptorLen reading through r.
func (z *Reader) descriptorLenAt(r io.ReaderAt, off int64, e *Entry) int64 {
	b := make([]byte, min(24, max(z.size-off, 0)))
	if readFull(r, b, off) != nil {
		return 0
	}
	sig := 0
	if len(b) >= 4 && binary.LittleEndian.Uint32(b) == 0x08074b50 {
		sig = 4
	}
	d := b[sig:]
	if len(d) < 4 || binary.LittleEndian.Uint32(d) != e.CRC32 {
		return 0
	}
	if len(d) >= 12 && int64(binary.LittleEndian.Uint32(d[4:])) == e.CompressedSize && int64(binary.LittleEndian.Uint32(d[8:])) == e.Size {
		return int64(sig + 12)
	}
	if len(d) >= 20 && int64(binary.LittleEndian.Uint64(d[4:])) == e.CompressedSize && int64(binary.LittleEndian.Uint64(d[12:])) == e.Size {
		return int64(sig + 20)
	}
	return 0
}
