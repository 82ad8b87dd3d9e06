package ziplist

import (
	"bytes"
	"encoding/binary"
	"io"
)

// When NewReader refuses an archive, which central directory miniz or
// another reader takes is not certain: the classic end record and a ZIP64
// locator may point at different directories, and end-record signatures
// can hide in a comment or in entry data. The functions below let a
// scanner read what any reader could: every candidate directory, and
// every local header at any offset.

// MaxEndSearch is how far from the end of the file miniz may find an end
// record: it scans back in 4 KiB chunks and stops only after a chunk that
// starts 65,557 bytes or more from the end.
const MaxEndSearch = lenEnd + 65535 + 4096

// maxDirCandidates bounds the end records CandidateDirectories tries.
const maxDirCandidates = 64

// Directory is where an end record says a central directory is.
type Directory struct {
	Offset, Size int64
	Count        int64 // entries, as the end record says
}

// CandidateDirectories returns every distinct central directory that an
// end record signature in the last MaxEndSearch bytes of the file names
// (the first 64 signatures from the end), and the one the ZIP64 record its
// locator points at, if they lie inside the file.
func CandidateDirectories(r io.ReaderAt, size int64) []Directory {
	tailLen := min(size, MaxEndSearch)
	tail := make([]byte, tailLen)
	if readFull(r, tail, size-tailLen) != nil {
		return nil
	}
	var dirs []Directory
	seen := map[Directory]bool{}
	add := func(d Directory) {
		if !seen[d] && d.Offset >= 0 && d.Size > 0 && d.Offset <= size && d.Size <= size-d.Offset {
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
		eocd := size - tailLen + int64(p)
		add(Directory{int64(binary.LittleEndian.Uint32(e[16:])), int64(binary.LittleEndian.Uint32(e[12:])), int64(binary.LittleEndian.Uint16(e[10:]))})
		if eocd < lenLocator {
			continue
		}
		var loc [lenLocator]byte
		if readFull(r, loc[:], eocd-lenLocator) != nil || binary.LittleEndian.Uint32(loc[:]) != sigLocator {
			continue
		}
		off64 := binary.LittleEndian.Uint64(loc[8:])
		var e64 [lenEnd64Min]byte
		if off64 > uint64(size-lenEnd64Min) || readFull(r, e64[:], int64(off64)) != nil || binary.LittleEndian.Uint32(e64[:]) != sigEnd64 {
			continue
		}
		n64, s64, o64 := binary.LittleEndian.Uint64(e64[32:]), binary.LittleEndian.Uint64(e64[40:]), binary.LittleEndian.Uint64(e64[48:])
		if s64 <= uint64(size) && o64 <= uint64(size) && n64 <= uint64(size) {
			add(Directory{int64(o64), int64(s64), int64(n64)})
		}
	}
	return dirs
}

// ParseDirectory parses the entries of the central directory cd (its
// bytes) as far as they parse, at most maxEntries of them, whatever count
// its end record gave. A malformed ZIP64 extra field leaves the 32-bit
// values. DataOffset is -1: see ReadLocalHeader.
func ParseDirectory(cd []byte, maxEntries int) []*Entry {
	var out []*Entry
	p := 0
	for i := 0; i < maxEntries; i++ {
		if len(cd)-p < lenCentral || binary.LittleEndian.Uint32(cd[p:]) != sigCentral {
			break
		}
		ent, extra, n := parseCentral(cd[p:], i)
		if ent == nil {
			break
		}
		ent.DataOffset = -1
		ent.zip64(extra) // a malformed field leaves the 32-bit values
		p += n
		out = append(out, ent)
	}
	return out
}

// LocalHeader is a local file header as found in the file.
type LocalHeader struct {
	Offset         int64
	Flags, Method  uint16
	CompressedSize int64 // as the local header says (0 with a data descriptor, 0xffffffff with ZIP64)
	Name           string
	DataOffset     int64 // after the name and the extra field
}

// ReadLocalHeader reads the local header at off of a size-byte file; ok
// is false if there is none (no signature, or not inside the file).
func ReadLocalHeader(r io.ReaderAt, size, off int64) (h LocalHeader, ok bool) {
	var hdr [lenLocal]byte
	if off < 0 || off > size-lenLocal || readFull(r, hdr[:], off) != nil || binary.LittleEndian.Uint32(hdr[:]) != sigLocal {
		return h, false
	}
	nl, el := int64(binary.LittleEndian.Uint16(hdr[26:])), int64(binary.LittleEndian.Uint16(hdr[28:]))
	name := make([]byte, min(nl, size-off-lenLocal))
	if readFull(r, name, off+lenLocal) != nil {
		return h, false
	}
	return LocalHeader{
		Offset: off, Flags: binary.LittleEndian.Uint16(hdr[6:]), Method: binary.LittleEndian.Uint16(hdr[8:]),
		CompressedSize: int64(binary.LittleEndian.Uint32(hdr[18:])), Name: string(name),
		DataOffset: off + lenLocal + nl + el,
	}, true
}

// NextLocalHeader returns the offset of the next local header signature
// at or after from, or -1.
func NextLocalHeader(r io.ReaderAt, from, size int64) int64 {
	sig := []byte("PK\x03\x04")
	// start small and grow to 64 KiB: headers are usually close together,
	// and reading a whole window per header is (headers x 64 KiB) of work
	var buf []byte
	chunk := int64(256)
	for from < size {
		n := min(chunk, size-from)
		chunk = min(2*chunk, 64<<10)
		if int64(len(buf)) < n {
			buf = make([]byte, n)
		}
		if readFull(r, buf[:n], from) != nil {
			return -1
		}
		if i := bytes.Index(buf[:n], sig); i >= 0 {
			return from + int64(i)
		}
		if from+n >= size {
			return -1
		}
		from += n - int64(len(sig)) + 1
	}
	return -1
}
