package compressed

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync"

	"github.com/cespare/xxhash/v2"
	"github.com/klauspost/compress/huff0"
	"github.com/klauspost/compress/zstd"

	"github.com/gosafetensors/safetensors"
)

// A grouped chunk (one tensor of a grouped container) is
//
//	method u8 | payload | chunk checksum, u32 LE
//
// The chunk checksum is the low 32 bits of XXH64 over the chunk's offset in
// the original file (u64 LE) followed by its decompressed bytes: a chunk is
// checked against its position, so chunks swapped, duplicated or renamed
// in the container are refused although each is intact (version 2; version
// 1 hashed the bytes alone).
//
// method 0 stored: payload is the bytes themselves.
// method 1 zstd:   payload is one zstd frame.
// method 2 planes: payload is width u8 (1, 2, 4 or 8) | flags u8 (bit 0:
// rotate each element left by one bit before splitting) | width planes,
// plane j holding byte j of every element, each plane a sequence of blocks
// of planeBlock bytes (the last one shorter), each block
//
//	kind u8 (0 raw, 1 run of one byte, 2 huff0 4-stream) | length u32 LE | data
const (
	methodStored = 0
	methodZstd   = 1
	methodPlanes = 2

	blockRaw  = 0
	blockRLE  = 1
	blockHuff = 2

	flagRotate = 1
	planeBlock = 128 << 10
	chunkOver  = 1 + 4 // method byte + checksum
)

// groupingFor returns the element width and rotation used for a dtype, or
// width 0 when its chunks are better compressed with zstd as they are.
func groupingFor(dt safetensors.DType) (w int, rot bool) {
	switch dt {
	case safetensors.BF16, safetensors.F16:
		return 2, true
	case safetensors.F32, safetensors.C64:
		return 4, true
	case safetensors.F64:
		return 8, true
	case safetensors.F8_E4M3, safetensors.F8_E5M2, safetensors.F8_E8M0, safetensors.F8_E4M3FNUZ, safetensors.F8_E5M2FNUZ:
		return 1, false
	}
	return 0, false
}

var huffScratch = sync.Pool{New: func() any { return &huff0.Scratch{Reuse: huff0.ReusePolicyNone} }}

// chunkSum is the checksum of a chunk holding b at offset off of the
// original file.
func chunkSum(off int64, b []byte) uint32 {
	d := xxhash.New()
	var o [8]byte
	binary.LittleEndian.PutUint64(o[:], uint64(off))
	d.Write(o[:])
	d.Write(b)
	return uint32(d.Sum64())
}

// encodeChunk appends the chunk for src (elements of dtype dt, at offset off
// of the original file) to dst.
func encodeChunk(dst, src []byte, off int64, dt safetensors.DType, zenc *zstd.Encoder) []byte {
	start := len(dst)
	w, rot := groupingFor(dt)
	if w > 0 && len(src)%w == 0 && len(src) >= 64 {
		dst = encodePlanes(dst, src, w, rot)
	} else {
		dst = append(dst, methodZstd)
		dst = zenc.EncodeAll(src, dst)
	}
	if len(dst)-start-1 >= len(src) {
		dst = append(dst[:start], methodStored)
		dst = append(dst, src...)
	}
	return binary.LittleEndian.AppendUint32(dst, chunkSum(off, src))
}

func encodePlanes(dst, src []byte, w int, rot bool) []byte {
	n := len(src) / w
	bp := getBuf(int64(len(src)))
	defer putBuf(bp)
	buf := *bp
	planes := make([][]byte, w)
	for j := range planes {
		planes[j] = buf[j*n : (j+1)*n]
	}
	splitPlanes(planes, src, w, rot)
	flags := byte(0)
	if rot {
		flags = flagRotate
	}
	dst = append(dst, methodPlanes, byte(w), flags)
	s := huffScratch.Get().(*huff0.Scratch)
	defer huffScratch.Put(s)
	for _, p := range planes {
		for len(p) > 0 {
			blk := p[:min(len(p), planeBlock)]
			p = p[len(blk):]
			out, _, err := huff0.Compress4X(blk, s)
			switch {
			case errors.Is(err, huff0.ErrUseRLE):
				dst = append(dst, blockRLE, 1, 0, 0, 0, blk[0])
			case err != nil || len(out) >= len(blk):
				dst = append(dst, blockRaw)
				dst = binary.LittleEndian.AppendUint32(dst, uint32(len(blk)))
				dst = append(dst, blk...)
			default:
				dst = append(dst, blockHuff)
				dst = binary.LittleEndian.AppendUint32(dst, uint32(len(out)))
				dst = append(dst, out...)
			}
		}
	}
	return dst
}

// decodeChunk decodes the grouped chunk blob into dst, which has exactly the
// decompressed length the chunk index claims and starts at byte off of the
// original file. Nothing is written beyond
// dst; a chunk that decodes to a different length or checksum is an error.
// par, when not nil, runs the blocks of a planes chunk in parallel.
func decodeChunk(dst, blob []byte, off int64, zdec *zstd.Decoder, par runner) error {
	if len(blob) < chunkOver {
		return fmt.Errorf("%w: chunk of %d bytes is too short", ErrCorrupt, len(blob))
	}
	sum := binary.LittleEndian.Uint32(blob[len(blob)-4:])
	method, payload := blob[0], blob[1:len(blob)-4]
	switch method {
	case methodStored:
		if len(payload) != len(dst) {
			return fmt.Errorf("%w: stored chunk holds %d bytes, the index says %d", ErrCorrupt, len(payload), len(dst))
		}
		copy(dst, payload)
	case methodZstd:
		if err := decodeZstdFrame(zdec, dst, payload, 0, 0, false); err != nil {
			return err
		}
	case methodPlanes:
		if err := decodePlanes(dst, payload, par); err != nil {
			return err
		}
	default:
		return fmt.Errorf("%w: unknown chunk method %d", ErrCorrupt, method)
	}
	if chunkSum(off, dst) != sum {
		return fmt.Errorf("%w: decompressed chunk does not match its checksum for byte %d of the original: damaged, or out of place (swapped, duplicated or renamed)", ErrChecksum, off)
	}
	return nil
}

// planeScratch holds one decoded block per plane.
var planeScratch = sync.Pool{New: func() any { b := make([]byte, 8*planeBlock); return &b }}

// planeBlockRef is one block of one plane inside a chunk's payload.
type planeBlockRef struct {
	kind byte
	data []byte
}

// decodePlanes decodes a planes payload into dst block by block: for each
// run of planeBlock elements, the block of every plane is taken in place
// (raw), filled (run) or Huffman-decoded into a small scratch buffer, then
// the planes are joined into dst. Working memory is w blocks, not the chunk.
func decodePlanes(dst, p []byte, par runner) error {
	if len(p) < 2 {
		return fmt.Errorf("%w: planes chunk too short", ErrCorrupt)
	}
	w, flags := int(p[0]), p[1]
	p = p[2:]
	if w != 1 && w != 2 && w != 4 && w != 8 || flags&^flagRotate != 0 {
		return fmt.Errorf("%w: planes chunk with width %d and flags 0x%02x", ErrCorrupt, w, flags)
	}
	if len(dst)%w != 0 {
		return fmt.Errorf("%w: %d bytes are not whole elements of width %d", ErrCorrupt, len(dst), w)
	}
	n := len(dst) / w
	nb := (n + planeBlock - 1) / planeBlock
	// Parse every block descriptor first: w*nb is bounded by the chunk size.
	refs := make([]planeBlockRef, w*nb)
	for j := range w {
		for k := range nb {
			blen := min(n-k*planeBlock, planeBlock)
			if len(p) < 5 {
				return fmt.Errorf("%w: plane %d block %d: truncated", ErrCorrupt, j, k)
			}
			kind, l := p[0], int64(binary.LittleEndian.Uint32(p[1:]))
			p = p[5:]
			if l > int64(len(p)) {
				return fmt.Errorf("%w: plane %d block %d claims %d bytes, %d remain", ErrCorrupt, j, k, l, len(p))
			}
			data := p[:l]
			p = p[l:]
			switch {
			case kind == blockRaw && len(data) != blen:
				return fmt.Errorf("%w: plane %d raw block %d has %d bytes, want %d", ErrCorrupt, j, k, len(data), blen)
			case kind == blockRLE && len(data) != 1:
				return fmt.Errorf("%w: plane %d run block %d has %d bytes, want 1", ErrCorrupt, j, k, len(data))
			case kind > blockHuff:
				return fmt.Errorf("%w: plane %d block %d has unknown kind %d", ErrCorrupt, j, k, kind)
			}
			refs[j*nb+k] = planeBlockRef{kind, data}
		}
	}
	if len(p) != 0 {
		return fmt.Errorf("%w: %d bytes left after the last plane", ErrCorrupt, len(p))
	}
	rot := flags&flagRotate != 0
	block := func(k int) error {
		sp := planeScratch.Get().(*[]byte)
		defer planeScratch.Put(sp)
		scratch := *sp
		s := huffScratch.Get().(*huff0.Scratch)
		defer func() { huffScratch.Put(s) }()
		var pl [8][]byte
		planes := pl[:w]
		blen := min(n-k*planeBlock, planeBlock)
		out := dst[k*planeBlock*w : (k*planeBlock+blen)*w]
		for j := range w {
			r := refs[j*nb+k]
			buf := scratch[j*planeBlock : j*planeBlock+blen]
			if w == 1 {
				buf = out
			}
			switch r.kind {
			case blockRaw:
				if w == 1 {
					copy(buf, r.data)
				}
				buf = r.data
			case blockRLE:
				for i := range buf {
					buf[i] = r.data[0]
				}
			case blockHuff:
				s2, rest, err := huff0.ReadTable(r.data, s)
				if err != nil {
					return fmt.Errorf("%w: plane %d block %d: huffman table: %v", ErrCorrupt, j, k, err)
				}
				s = s2
				got, err := s.Decoder().Decompress4X(buf[:0:blen], rest)
				if err != nil {
					return fmt.Errorf("%w: plane %d block %d: %v", ErrCorrupt, j, k, err)
				}
				if len(got) != blen {
					return fmt.Errorf("%w: plane %d block %d decodes to %d bytes, want %d", ErrCorrupt, j, k, len(got), blen)
				}
				if &got[0] != &buf[0] {
					copy(buf, got)
				}
			}
			planes[j] = buf
		}
		if w > 1 {
			joinPlanes(out, planes, w, rot)
		}
		return nil
	}
	if par != nil && nb > 1 {
		return par(nb, block)
	}
	for k := range nb {
		if err := block(k); err != nil {
			return err
		}
	}
	return nil
}

// runner runs f(0..n-1), perhaps in parallel, and returns the first error.
type runner func(n int, f func(k int) error) error
