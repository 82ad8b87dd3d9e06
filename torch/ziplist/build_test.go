package ziplist

import (
	"bytes"
	"compress/flate"
	"encoding/binary"
	"hash/crc32"
)

// A byte-level zip writer for the tests: every field can be made to lie.

// zent is one entry of a crafted archive.
type zent struct {
	name      string
	data      []byte // what is stored (compressed already if method is 8)
	raw       []byte // method 8: the uncompressed bytes (for the CRC)
	method    uint16
	flags     uint16
	ext       uint32  // external attributes (0x10: DOS directory)
	dosTime   uint16  // miniz checks csize == usize for STORED only when the DOS time and date are zero
	local     *string // local header name, if different
	csize     *uint32 // central sizes, if different from the data's
	usize     *uint32
	extra     []byte // central extra field
	comment   []byte // central comment
	sameAs    int    // 1-based: point the central entry at that entry's local header
	gapBefore []byte // bytes written before the local header
}

// zopts shapes the archive around the entries.
type zopts struct {
	comment   []byte // end record comment
	trailing  []byte // bytes after the end record (not in the comment length)
	zip64     bool   // a ZIP64 end record and locator before the end record
	countDiff int    // added to the end record's entry count
	beforeDir []byte // bytes between the last entry and the directory
}

func u32(v uint32) *uint32 { return &v }
func str(s string) *string { return &s }

func deflate(b []byte) []byte {
	var buf bytes.Buffer
	w, _ := flate.NewWriter(&buf, flate.BestCompression)
	w.Write(b)
	w.Close()
	return buf.Bytes()
}

func le16(b []byte, v uint16) []byte { return binary.LittleEndian.AppendUint16(b, v) }
func le32(b []byte, v uint32) []byte { return binary.LittleEndian.AppendUint32(b, v) }
func le64(b []byte, v uint64) []byte { return binary.LittleEndian.AppendUint64(b, v) }

func buildZip(ents []zent, o zopts) []byte {
	var f []byte
	offs := make([]int, len(ents))
	for i, e := range ents {
		f = append(f, e.gapBefore...)
		if e.sameAs > 0 {
			offs[i] = offs[e.sameAs-1]
			continue
		}
		offs[i] = len(f)
		name := e.name
		if e.local != nil {
			name = *e.local
		}
		crc := crc32.ChecksumIEEE(e.data)
		usize := uint32(len(e.data))
		if e.method == 8 {
			crc, usize = crc32.ChecksumIEEE(e.raw), uint32(len(e.raw))
		}
		f = le32(f, sigLocal)
		f = le16(f, 20)
		f = le16(f, e.flags)
		f = le16(f, e.method)
		f = le16(f, e.dosTime)
		f = le16(f, 0)
		f = le32(f, crc)
		f = le32(f, uint32(len(e.data)))
		f = le32(f, usize)
		f = le16(f, uint16(len(name)))
		f = le16(f, 0)
		f = append(f, name...)
		f = append(f, e.data...)
	}
	f = append(f, o.beforeDir...)
	dir := len(f)
	for i, e := range ents {
		crc := crc32.ChecksumIEEE(e.data)
		csize, usize := uint32(len(e.data)), uint32(len(e.data))
		if e.method == 8 {
			crc, usize = crc32.ChecksumIEEE(e.raw), uint32(len(e.raw))
		}
		if e.csize != nil {
			csize = *e.csize
		}
		if e.usize != nil {
			usize = *e.usize
		}
		f = le32(f, sigCentral)
		f = le16(f, 20)
		f = le16(f, 20)
		f = le16(f, e.flags)
		f = le16(f, e.method)
		f = le16(f, e.dosTime)
		f = le16(f, 0)
		f = le32(f, crc)
		f = le32(f, csize)
		f = le32(f, usize)
		f = le16(f, uint16(len(e.name)))
		f = le16(f, uint16(len(e.extra)))
		f = le16(f, uint16(len(e.comment)))
		f = le16(f, 0)
		f = le16(f, 0)
		f = le32(f, e.ext)
		f = le32(f, uint32(offs[i]))
		f = append(f, e.name...)
		f = append(f, e.extra...)
		f = append(f, e.comment...)
	}
	dirLen := len(f) - dir
	n := len(ents) + o.countDiff
	if o.zip64 {
		at := len(f)
		f = le32(f, sigEnd64)
		f = le64(f, 44)
		f = le16(f, 45)
		f = le16(f, 45)
		f = le32(f, 0)
		f = le32(f, 0)
		f = le64(f, uint64(n))
		f = le64(f, uint64(n))
		f = le64(f, uint64(dirLen))
		f = le64(f, uint64(dir))
		f = le32(f, sigLocator)
		f = le32(f, 0)
		f = le64(f, uint64(at))
		f = le32(f, 1)
	}
	f = le32(f, sigEnd)
	f = le16(f, 0)
	f = le16(f, 0)
	f = le16(f, uint16(n))
	f = le16(f, uint16(n))
	f = le32(f, uint32(dirLen))
	f = le32(f, uint32(dir))
	f = le16(f, uint16(len(o.comment)))
	f = append(f, o.comment...)
	return append(f, o.trailing...)
}
