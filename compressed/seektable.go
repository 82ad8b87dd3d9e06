package compressed

import (
	"encoding/binary"
	"io"
	"math"
)

// Seek table of the zstd seekable format (facebook/zstd
// contrib/seekable_format/zstd_seekable_compression_format.md), also used
// after LZ4 frames: LZ4 and zstd share the skippable-frame magic range.
//
//	Skippable_Magic_Number  u32 LE 0x184D2A5E
//	Frame_Size              u32 LE  (bytes that follow)
//	entries                 Number_Of_Frames × {Compressed_Size u32, Decompressed_Size u32, [Checksum u32]}
//	Number_Of_Frames        u32 LE
//	Seek_Table_Descriptor   u8      (bit 7: checksums present; bits 2-6 reserved, zero)
//	Seekable_Magic_Number   u32 LE 0x8F92EAB1
const (
	skippableMagic  = 0x184D2A5E
	seekableMagic   = 0x8F92EAB1
	seekFooterSize  = 9
	seekHeaderSize  = 8
	checksumFlag    = 0x80
	reservedMask    = 0x7C
	maxSeekEntries  = math.MaxUint32
	zstdFrameMagic  = 0xFD2FB528
	lz4FrameMagic   = 0x184D2204
	skippableMinMag = 0x184D2A50
	skippableMaxMag = 0x184D2A5F
)

// frame is one entry of a seek table or chunk index, with its position in
// both the compressed and the uncompressed file.
type frame struct {
	coff, clen int64 // compressed offset and length
	uoff, ulen int64 // uncompressed offset and length
	sum        uint32
	hasSum     bool
}

// appendSeekTable encodes the seek table of frames (checksums included
// when withSums).
func appendSeekTable(b []byte, frames []frame, withSums bool) []byte {
	es := 8
	if withSums {
		es = 12
	}
	b = binary.LittleEndian.AppendUint32(b, skippableMagic)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(frames)*es+seekFooterSize))
	for _, f := range frames {
		b = binary.LittleEndian.AppendUint32(b, uint32(f.clen))
		b = binary.LittleEndian.AppendUint32(b, uint32(f.ulen))
		if withSums {
			b = binary.LittleEndian.AppendUint32(b, f.sum)
		}
	}
	b = binary.LittleEndian.AppendUint32(b, uint32(len(frames)))
	desc := byte(0)
	if withSums {
		desc = checksumFlag
	}
	b = append(b, desc)
	return binary.LittleEndian.AppendUint32(b, seekableMagic)
}

// hasSeekFooter reports whether the last bytes of r are a seek table footer.
func hasSeekFooter(r io.ReaderAt, size int64) (bool, error) {
	if size < seekHeaderSize+seekFooterSize {
		return false, nil
	}
	var foot [4]byte
	if err := readFull(r, foot[:], size-4); err != nil {
		return false, err
	}
	return binary.LittleEndian.Uint32(foot[:]) == seekableMagic, nil
}

// readSeekTable reads and validates the seek table at the end of r: the
// frames must exactly fill the bytes before the table, each must decompress
// to at most maxFrame bytes, and the totals must not overflow. It returns
// the frames with their offsets and the uncompressed size. At most
// maxFrames entries are read.
func readSeekTable(r io.ReaderAt, size int64, maxFrame, maxFrames int64) ([]frame, int64, error) {
	if size < seekHeaderSize+seekFooterSize {
		return nil, 0, newErr(ErrCorrupt, -1, 0, "file of %d bytes is too small for a seek table", size)
	}
	var foot [seekFooterSize]byte
	footOff := size - seekFooterSize
	if err := readFull(r, foot[:], footOff); err != nil {
		return nil, 0, err
	}
	if binary.LittleEndian.Uint32(foot[5:]) != seekableMagic {
		return nil, 0, newErr(ErrNotSeekable, -1, footOff+5, "no seekable magic number at the end of the file")
	}
	n := int64(binary.LittleEndian.Uint32(foot[:4]))
	desc := foot[4]
	if desc&reservedMask != 0 {
		return nil, 0, newErr(ErrCorrupt, -1, footOff+4, "seek table descriptor 0x%02x has reserved bits set", desc)
	}
	es := int64(8)
	if desc&checksumFlag != 0 {
		es = 12
	}
	if n > maxFrames {
		return nil, 0, newErr(ErrLimit, -1, footOff, "seek table lists %d frames, more than the limit of %d", n, maxFrames)
	}
	tableLen := seekHeaderSize + n*es + seekFooterSize // n < 2^32: no overflow
	if tableLen > size {
		return nil, 0, newErr(ErrCorrupt, -1, footOff, "seek table of %d frames needs %d bytes, the file has %d", n, tableLen, size)
	}
	tableOff := size - tableLen
	// The table is at most the file: its allocation is justified by the input.
	tab := make([]byte, tableLen-seekFooterSize)
	if err := readFull(r, tab, tableOff); err != nil {
		return nil, 0, err
	}
	if m := binary.LittleEndian.Uint32(tab); m != skippableMagic {
		return nil, 0, newErr(ErrCorrupt, -1, tableOff, "seek table does not start with the skippable frame magic 0x%08X (found 0x%08X)", skippableMagic, m)
	}
	if fs := int64(binary.LittleEndian.Uint32(tab[4:])); fs != tableLen-seekHeaderSize {
		return nil, 0, newErr(ErrCorrupt, -1, tableOff+4, "seek table frame size %d does not match %d frames (%d)", fs, n, tableLen-seekHeaderSize)
	}
	frames := make([]frame, n)
	var coff, uoff int64
	p := tab[seekHeaderSize:]
	for i := range frames {
		e := p[int64(i)*es:]
		f := &frames[i]
		f.coff, f.uoff = coff, uoff
		f.clen = int64(binary.LittleEndian.Uint32(e))
		f.ulen = int64(binary.LittleEndian.Uint32(e[4:]))
		if es == 12 {
			f.sum, f.hasSum = binary.LittleEndian.Uint32(e[8:]), true
		}
		entryOff := tableOff + seekHeaderSize + int64(i)*es
		if f.clen == 0 {
			return nil, 0, newErr(ErrCorrupt, i, entryOff, "seek table entry has a compressed size of 0")
		}
		if f.ulen > maxFrame {
			return nil, 0, newErr(ErrLimit, i, entryOff, "frame claims %d decompressed bytes, more than the limit of %d", f.ulen, maxFrame)
		}
		// Sums of n < 2^32 values below 2^32 fit in int64.
		coff += f.clen
		uoff += f.ulen
		if coff > tableOff {
			return nil, 0, newErr(ErrCorrupt, i, entryOff, "seek table frames end at byte %d, past the start of the seek table at %d", coff, tableOff)
		}
	}
	if coff != tableOff {
		return nil, 0, newErr(ErrCorrupt, -1, tableOff, "seek table frames cover %d bytes, but %d bytes precede the table", coff, tableOff)
	}
	return frames, uoff, nil
}

// readFull reads len(b) bytes at off; a short read is io.ErrUnexpectedEOF.
func readFull(r io.ReaderAt, b []byte, off int64) error {
	n, err := r.ReadAt(b, off)
	if n == len(b) {
		return nil
	}
	if err == nil || err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	return err
}
