package compressed

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync"

	"github.com/klauspost/compress/huff0"
	"github.com/klauspost/compress/zstd"

	"github.com/gosafetensors/safetensors"
)

// A grouped chunk (one tensor of a grouped container) is
//
//	method u8 | payload | XXH64(decompressed) low 32 bits, u32 LE
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

// encodeChunk appends the chunk for src (elements of dtype dt) to dst.
func encodeChunk(dst, src []byte, dt safetensors.DType, zenc *zstd.Encoder) []byte {
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
	return binary.LittleEndian.AppendUint32(dst, checksum(src))
}

func encodePlanes(dst, src []byte, w int, rot bool) []byte {
	n := len(src) / w
	buf := make([]byte, len(src))
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
// decompressed length the chunk index claims. Nothing is written beyond
// dst; a chunk that decodes to a different length or checksum is an error.
func decodeChunk(dst, blob []byte, zdec *zstd.Decoder) error {
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
		if err := decodeZstdFrame(zdec, dst, payload, 0, false); err != nil {
			return err
		}
	case methodPlanes:
		if err := decodePlanes(dst, payload); err != nil {
			return err
		}
	default:
		return fmt.Errorf("%w: unknown chunk method %d", ErrCorrupt, method)
	}
	if checksum(dst) != sum {
		return fmt.Errorf("%w: decompressed chunk does not match its checksum", ErrChecksum)
	}
	return nil
}

var planeBufs sync.Pool

func decodePlanes(dst, p []byte) error {
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
	var buf []byte
	if w == 1 {
		buf = dst
	} else {
		bp, _ := planeBufs.Get().(*[]byte)
		if bp == nil || cap(*bp) < len(dst) {
			b := make([]byte, len(dst))
			bp = &b
		}
		defer planeBufs.Put(bp)
		buf = (*bp)[:len(dst)]
	}
	planes := make([][]byte, w)
	s := huffScratch.Get().(*huff0.Scratch)
	defer huffScratch.Put(s)
	for j := range planes {
		plane := buf[j*n : (j+1)*n]
		planes[j] = plane
		for k := 0; k < n; k += planeBlock {
			blk := plane[k:min(n, k+planeBlock)]
			if len(p) < 5 {
				return fmt.Errorf("%w: plane %d block at %d: truncated", ErrCorrupt, j, k)
			}
			kind, l := p[0], int64(binary.LittleEndian.Uint32(p[1:]))
			p = p[5:]
			if l > int64(len(p)) {
				return fmt.Errorf("%w: plane %d block at %d claims %d bytes, %d remain", ErrCorrupt, j, k, l, len(p))
			}
			data := p[:l]
			p = p[l:]
			switch kind {
			case blockRaw:
				if len(data) != len(blk) {
					return fmt.Errorf("%w: plane %d raw block at %d has %d bytes, want %d", ErrCorrupt, j, k, len(data), len(blk))
				}
				copy(blk, data)
			case blockRLE:
				if len(data) != 1 {
					return fmt.Errorf("%w: plane %d run block at %d has %d bytes, want 1", ErrCorrupt, j, k, len(data))
				}
				for i := range blk {
					blk[i] = data[0]
				}
			case blockHuff:
				s2, rest, err := huff0.ReadTable(data, s)
				if err != nil {
					return fmt.Errorf("%w: plane %d block at %d: huffman table: %v", ErrCorrupt, j, k, err)
				}
				s = s2
				out, err := s.Decoder().Decompress4X(blk[:0:len(blk)], rest)
				if err != nil {
					return fmt.Errorf("%w: plane %d block at %d: %v", ErrCorrupt, j, k, err)
				}
				if len(out) != len(blk) {
					return fmt.Errorf("%w: plane %d block at %d decodes to %d bytes, want %d", ErrCorrupt, j, k, len(out), len(blk))
				}
				if len(out) > 0 && &out[0] != &blk[0] {
					copy(blk, out)
				}
			default:
				return fmt.Errorf("%w: plane %d block at %d has unknown kind %d", ErrCorrupt, j, k, kind)
			}
		}
	}
	if len(p) != 0 {
		return fmt.Errorf("%w: %d bytes left after the last plane", ErrCorrupt, len(p))
	}
	if w > 1 {
		joinPlanes(dst, planes, w, flags&flagRotate != 0)
	}
	return nil
}
