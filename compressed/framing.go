package compressed

import (
	"encoding/binary"
	"fmt"
	"io"
)

// A seek table says where frames are; the frames say where they end. The
// two must agree, or a reader that trusts the table (random access, this
// package's Decompress, the reference seekable decoder) and one that reads
// the frames in sequence (`zstd -d`, `lz4 -d`) see different bytes. So every
// entry must hold exactly one frame, starting where the previous one ended:
// walking the frames' own block headers from byte 0 must land on every
// entry's start. An entry that holds a frame and more, part of a frame, or a
// frame hidden in another frame's raw block (which decodes fine on its own)
// breaks that walk.
//
// The walk reads only the frame and block headers (a few bytes per 128 KiB
// block), not the data.

// peeker returns n bytes at off (fewer only at the end of the input).
type peeker func(off int64, n int) ([]byte, error)

// bytesPeeker peeks into b, whose byte 0 is at offset base.
func bytesPeeker(b []byte, base int64) peeker {
	return func(off int64, n int) ([]byte, error) {
		off -= base
		if off < 0 || off > int64(len(b)) {
			return nil, io.ErrUnexpectedEOF
		}
		return b[off:min(int64(len(b)), off+int64(n))], nil
	}
}

// readerPeeker peeks through r with a small buffer (one per walk).
func readerPeeker(r io.ReaderAt, size int64) peeker {
	var buf [32]byte
	return func(off int64, n int) ([]byte, error) {
		if off < 0 || off > size {
			return nil, io.ErrUnexpectedEOF
		}
		n = int(min(int64(n), size-off, int64(len(buf))))
		if err := readFull(r, buf[:n], off); err != nil {
			return nil, err
		}
		return buf[:n], nil
	}
}

// frameEnd returns where the frame of format f that starts at off ends,
// walking its block headers; limit is where it must end at the latest (the
// next entry, or the end of its bytes). Errors wrap ErrCorrupt; I/O errors
// are returned as they are.
func frameEnd(f Format, peek peeker, off, limit int64) (int64, error) {
	if f == LZ4Seekable {
		return lz4FrameEnd(peek, off, limit)
	}
	return zstdFrameEnd(peek, off, limit)
}

// need peeks n bytes at off, all before limit, or fails naming what.
func need(peek peeker, off, limit int64, n int, what string) ([]byte, error) {
	if off+int64(n) > limit {
		return nil, fmt.Errorf("%w: %s at byte %d runs past the end of its seek table entry (byte %d)", ErrCorrupt, what, off, limit)
	}
	b, err := peek(off, n)
	if err != nil {
		return nil, err
	}
	if len(b) < n {
		return nil, fmt.Errorf("%w: %s at byte %d: the file ends", ErrCorrupt, what, off)
	}
	return b, nil
}

// zstdFrameEnd walks a zstd frame (RFC 8878 §3.1.1): magic, frame header,
// blocks up to the last one, optional content checksum.
func zstdFrameEnd(peek peeker, off, limit int64) (int64, error) {
	b, err := need(peek, off, limit, 5, "zstd frame header")
	if err != nil {
		return 0, err
	}
	if m := binary.LittleEndian.Uint32(b); m != zstdFrameMagic {
		return 0, fmt.Errorf("%w: no zstd frame starts at byte %d (found 0x%08X): the seek table points into another frame, or the frames are out of place", ErrCorrupt, off, m)
	}
	desc := b[4]
	if desc&0x08 != 0 {
		return 0, fmt.Errorf("%w: zstd frame at byte %d: reserved bit set in its header", ErrCorrupt, off)
	}
	single := desc&0x20 != 0
	hdr := int64(5)
	if !single {
		hdr++ // window descriptor
	}
	hdr += []int64{0, 1, 2, 4}[desc&3] // dictionary id
	switch fcs := desc >> 6; {
	case fcs == 0 && single:
		hdr++
	case fcs > 0:
		hdr += 1 << fcs // 2, 4 or 8 bytes
	}
	pos := off + hdr
	for {
		bh, err := need(peek, pos, limit, 3, "zstd block header")
		if err != nil {
			return 0, err
		}
		v := uint32(bh[0]) | uint32(bh[1])<<8 | uint32(bh[2])<<16
		last, kind, size := v&1 != 0, (v>>1)&3, int64(v>>3)
		pos += 3
		switch kind {
		case 0, 2: // raw, compressed
			pos += size
		case 1: // RLE: one byte, repeated size times
			pos++
		default:
			return 0, fmt.Errorf("%w: zstd block at byte %d has the reserved type 3", ErrCorrupt, pos-3)
		}
		if pos > limit {
			return 0, fmt.Errorf("%w: zstd block at byte %d runs past the end of its seek table entry (byte %d)", ErrCorrupt, pos-3, limit)
		}
		if last {
			break
		}
	}
	if desc&0x04 != 0 {
		pos += 4
	}
	if pos > limit {
		return 0, fmt.Errorf("%w: zstd frame checksum at byte %d runs past the end of its seek table entry (byte %d)", ErrCorrupt, pos-4, limit)
	}
	return pos, nil
}

// lz4FrameEnd walks an LZ4 frame (lz4 frame format 1.6.x): magic, FLG, BD,
// optional content size and dictionary id, header checksum, blocks up to
// the end mark (each with an optional block checksum), optional content
// checksum.
func lz4FrameEnd(peek peeker, off, limit int64) (int64, error) {
	b, err := need(peek, off, limit, 6, "LZ4 frame header")
	if err != nil {
		return 0, err
	}
	if m := binary.LittleEndian.Uint32(b); m != lz4FrameMagic {
		return 0, fmt.Errorf("%w: no LZ4 frame starts at byte %d (found 0x%08X): the seek table points into another frame, or the frames are out of place", ErrCorrupt, off, m)
	}
	flg := b[4]
	if flg>>6 != 1 {
		return 0, fmt.Errorf("%w: LZ4 frame at byte %d has version %d, not 1", ErrCorrupt, off, flg>>6)
	}
	hdr := int64(4 + 2 + 1) // magic, FLG, BD, header checksum
	if flg&0x08 != 0 {
		hdr += 8
	}
	if flg&0x01 != 0 {
		hdr += 4
	}
	blockSum := flg&0x10 != 0
	pos := off + hdr
	for {
		bs, err := need(peek, pos, limit, 4, "LZ4 block size")
		if err != nil {
			return 0, err
		}
		size := int64(binary.LittleEndian.Uint32(bs) & 0x7FFFFFFF)
		pos += 4
		if size == 0 && binary.LittleEndian.Uint32(bs) == 0 {
			break // end mark
		}
		pos += size
		if blockSum {
			pos += 4
		}
		if pos > limit {
			return 0, fmt.Errorf("%w: LZ4 block at byte %d runs past the end of its seek table entry (byte %d)", ErrCorrupt, pos-size-4, limit)
		}
	}
	if flg&0x04 != 0 {
		pos += 4
	}
	if pos > limit {
		return 0, fmt.Errorf("%w: LZ4 content checksum at byte %d runs past the end of its seek table entry (byte %d)", ErrCorrupt, pos-4, limit)
	}
	return pos, nil
}

// declaredSize returns the content size the header of the frame of format
// f at off declares, and whether it declares one (zstd's
// Frame_Content_Size, RFC 8878 §3.1.1.1.4; LZ4's Content Size). Errors wrap
// ErrCorrupt; I/O errors are returned as they are.
func declaredSize(f Format, peek peeker, off, limit int64) (int64, bool, error) {
	if f == LZ4Seekable {
		b, err := need(peek, off, limit, 5, "LZ4 frame header")
		if err != nil || b[4]&0x08 == 0 {
			return 0, false, err
		}
		if b, err = need(peek, off+6, limit, 8, "LZ4 frame content size"); err != nil {
			return 0, false, err
		}
		return int64(binary.LittleEndian.Uint64(b)), true, nil
	}
	b, err := need(peek, off, limit, 5, "zstd frame header")
	if err != nil {
		return 0, false, err
	}
	desc := b[4]
	single, fcs := desc&0x20 != 0, desc>>6
	at := int64(5) + []int64{0, 1, 2, 4}[desc&3]
	if !single {
		at++
	}
	n := []int{0, 2, 4, 8}[fcs]
	if fcs == 0 && single {
		n = 1
	}
	if n == 0 {
		return 0, false, nil
	}
	h, err := need(peek, off+at, limit, n, "zstd frame content size")
	if err != nil {
		return 0, false, err
	}
	var v [8]byte
	copy(v[:], h)
	size := int64(binary.LittleEndian.Uint64(v[:]))
	if n == 2 {
		size += 256
	}
	return size, true, nil
}

// sizeMatches checks that the frame of format f at off, which its seek
// table entry says decompresses to ulen bytes, declares that size if it
// declares one: a seek table whose sizes are shifted between entries is
// corrupt before any frame is decoded.
func sizeMatches(f Format, peek peeker, off, limit, ulen int64) error {
	size, ok, err := declaredSize(f, peek, off, limit)
	if err != nil || !ok || size == ulen {
		return err
	}
	return fmt.Errorf("%w: the %s frame at byte %d declares %d decompressed bytes, its seek table entry %d: the seek table's sizes are out of place", ErrCorrupt, f, off, size, ulen)
}
