package compressed

import (
	"bytes"
	"cmp"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"slices"

	"github.com/klauspost/compress/zstd"

	"github.com/gosafetensors/safetensors"
)

// Result describes a finished compression or decompression.
type Result struct {
	Format       Format
	Size         int64 // original (uncompressed) bytes
	Compressed   int64 // compressed bytes
	Frames       int   // frames or chunks
	HeaderLength int64 // bytes of the original 8-byte prefix and header
}

// segment is a range of the original file compressed as one frame.
type segment struct {
	off, n int64
	dtype  safetensors.DType
	tensor string // "" for the header
}

// plan cuts the original file into frames: the 8-byte prefix and header
// (when withHeader), then the tensors in file order. A tensor larger than
// frameSize is split into pieces of at most frameSize bytes that hold whole
// elements; consecutive small tensors share a frame while it stays within
// frameSize (with sameDType, only tensors of one dtype). Every cut is at a
// tensor boundary or inside one tensor; empty tensors get no frame.
func plan(h *safetensors.Header, frameSize int64, withHeader, sameDType bool) []segment {
	var segs []segment
	for off := int64(0); withHeader && off < h.DataOffset(); off += frameSize {
		segs = append(segs, segment{off: off, n: min(frameSize, h.DataOffset()-off)})
	}
	nhdr := len(segs)
	ts := slices.Clone(h.Tensors)
	slices.SortStableFunc(ts, func(a, b safetensors.TensorInfo) int { return cmp.Compare(a.DataOffsets[0], b.DataOffsets[0]) })
	for _, t := range ts {
		size := t.Size()
		if size == 0 {
			continue
		}
		if k := len(segs) - 1; k >= nhdr && segs[k].n+size <= frameSize && (!sameDType || segs[k].dtype == t.DType) {
			segs[k].n += size // tensors are contiguous: this one starts where the frame ends
			continue
		}
		gran := granule(t.DType)
		step := max(frameSize/gran*gran, gran)
		for off := t.DataOffsets[0]; off < t.DataOffsets[1]; off += step {
			n := min(step, t.DataOffsets[1]-off)
			segs = append(segs, segment{off: h.DataOffset() + off, n: n, dtype: t.DType, tensor: t.Name})
		}
	}
	return segs
}

// granule is the fewest bytes that hold whole elements of d.
func granule(d safetensors.DType) int64 {
	b := int64(d.Bits())
	if b <= 0 {
		return 1
	}
	g := b
	for g%8 != 0 {
		g += b
	}
	return g / 8
}

// Compress reads the safetensors file src (size bytes, validated first) and
// writes it compressed to dst with the codec chosen by [WithCodec]. Frames
// are compressed on [WithConcurrency] goroutines; memory holds a window of
// 2× that many frames, whatever the file size. The grouped codec needs dst
// to be an io.WriterAt as well (an *os.File): its header, written last, holds
// the compressed sizes. When ctx is cancelled no new frame is started and
// ctx's error is returned (dst then holds part of the output).
func Compress(ctx context.Context, dst io.Writer, src io.ReaderAt, size int64, opts ...WriteOption) (*Result, error) {
	c, err := writeConfig("Compress", false, opts)
	if err != nil {
		return nil, err
	}
	return compress(ctx, dst, src, size, c)
}

func compress(ctx context.Context, dst io.Writer, src io.ReaderAt, size int64, c config) (*Result, error) {
	sr, err := safetensors.NewReader(src, size, safetensors.WithName(c.name), safetensors.WithoutDecompression())
	if err != nil {
		return nil, err
	}
	segs := plan(&sr.Header, c.frameSize, c.codec != Grouped, c.codec == Grouped)
	res := &Result{Size: size, HeaderLength: sr.DataOffset()}
	zenc, err := newZstdEncoder(c.level, c.concurrency)
	if err != nil {
		return nil, err
	}
	defer zenc.Close()
	var done int64
	progress := func(n int64) {
		done += n
		if c.progress != nil {
			c.progress(done, size)
		}
	}
	// read returns the bytes of s in a pooled buffer: release it with putBuf.
	read := func(s segment) (*[]byte, error) {
		bp := getBuf(s.n) // at most the frame size, or the header (capped by the parser)
		if err := readFull(src, *bp, s.off); err != nil {
			putBuf(bp)
			return nil, fmt.Errorf("%s: reading bytes %d-%d: %w", c.name, s.off, s.off+s.n, err)
		}
		return bp, nil
	}
	if c.codec == Grouped {
		wa, ok := dst.(io.WriterAt)
		if !ok {
			return nil, fmt.Errorf("compressed: %w: the grouped codec writes to an io.WriterAt (a file), got %T", ErrOption, dst)
		}
		return compressGrouped(ctx, wa, sr, segs, c, res, zenc, read, progress)
	}
	frames := make([]frame, 0, len(segs))
	var written int64
	err = ordered(ctx, len(segs), c.concurrency, func(i int) ([]byte, error) {
		bp, err := read(segs[i])
		if err != nil {
			return nil, err
		}
		defer putBuf(bp)
		buf := *bp
		var out []byte
		if c.codec == Zstd {
			out = zenc.EncodeAll(buf, make([]byte, 0, len(buf)/2+64))
		} else {
			var bb bytes.Buffer
			bb.Grow(len(buf)/2 + 64)
			if err := encodeLZ4Frame(&bb, buf, c.level, c.frameSize); err != nil {
				return nil, err
			}
			out = bb.Bytes()
		}
		// The checksum rides behind the frame; ordered passes it on.
		return binary.LittleEndian.AppendUint32(out, checksum(buf)), nil
	}, func(i int, b []byte) error {
		body, sum := b[:len(b)-4], binary.LittleEndian.Uint32(b[len(b)-4:])
		if int64(len(body)) > 1<<32-1 {
			return fmt.Errorf("compressed: frame %d of %d bytes does not fit a seek table", i, len(body))
		}
		if _, err := dst.Write(body); err != nil {
			return err
		}
		frames = append(frames, frame{coff: written, clen: int64(len(body)), uoff: segs[i].off, ulen: segs[i].n, sum: sum, hasSum: true})
		written += int64(len(body))
		progress(segs[i].n)
		return nil
	})
	if err != nil {
		return nil, err
	}
	if int64(len(frames)) > maxSeekEntries {
		return nil, fmt.Errorf("compressed: %d frames do not fit a seek table", len(frames))
	}
	tab := appendSeekTable(nil, frames, true)
	if _, err := dst.Write(tab); err != nil {
		return nil, err
	}
	res.Compressed = written + int64(len(tab))
	res.Frames = len(frames)
	res.Format = ZstdSeekable
	if c.codec == LZ4 {
		res.Format = LZ4Seekable
	}
	return res, nil
}

func compressGrouped(ctx context.Context, dst io.WriterAt, sr *safetensors.Reader, data []segment, c config, res *Result, zenc *zstd.Encoder,
	read func(segment) (*[]byte, error), progress func(int64)) (*Result, error) {
	hseg := segment{off: 0, n: sr.DataOffset()}
	hp, err := read(hseg)
	if err != nil {
		return nil, err
	}
	origHeader := (*hp)[8:] // kept, not returned to the pool
	names := make([]string, len(data))
	ulens := make([]int64, len(data))
	bound := make([]int64, len(data))
	var total int64
	for i, s := range data {
		names[i] = chunkName(i, s.tensor)
		ulens[i] = s.n
		total += s.n + chunkOver
	}
	// Reserve room for the header with every size and offset as wide as the
	// largest possible: a chunk is never larger than its bytes stored plus
	// chunkOver, so no number exceeds total.
	for i := range bound {
		bound[i] = total
	}
	maxHdr, err := groupedHeader(origHeader, names, ulens, bound)
	if err != nil {
		return nil, err
	}
	reserved := int64(len(maxHdr)+7) / 8 * 8
	base := 8 + reserved
	clens := make([]int64, len(data))
	var written int64
	progress(hseg.n)
	err = ordered(ctx, len(data), c.concurrency, func(i int) ([]byte, error) {
		bp, err := read(data[i])
		if err != nil {
			return nil, err
		}
		defer putBuf(bp)
		out := getBuf(int64(len(*bp)) + 64)
		return encodeChunk((*out)[:0], *bp, data[i].off, data[i].dtype, zenc), nil
	}, func(i int, b []byte) error {
		_, err := dst.WriteAt(b, base+written)
		n := int64(len(b))
		putBuf(&b) // b is not used after this
		if err != nil {
			return err
		}
		clens[i] = n
		written += n
		progress(data[i].n)
		return nil
	})
	if err != nil {
		return nil, err
	}
	hdr, err := groupedHeader(origHeader, names, ulens, clens)
	if err != nil {
		return nil, err
	}
	if int64(len(hdr)) > reserved {
		return nil, fmt.Errorf("compressed: internal error: grouped header of %d bytes exceeds its reservation of %d", len(hdr), reserved)
	}
	full := make([]byte, 8, base)
	binary.LittleEndian.PutUint64(full, uint64(reserved))
	full = append(full, hdr...)
	for int64(len(full)) < base {
		full = append(full, ' ')
	}
	if _, err := dst.WriteAt(full, 0); err != nil {
		return nil, err
	}
	res.Format = GroupedFormat
	res.Frames = len(data)
	res.Compressed = base + written
	return res, nil
}
