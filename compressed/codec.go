package compressed

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/cespare/xxhash/v2"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// checksum is the seek table's checksum: the low 32 bits of XXH64.
func checksum(b []byte) uint32 { return uint32(xxhash.Sum64(b)) }

func zstdLevel(level int) zstd.EncoderLevel {
	switch level {
	case 1:
		return zstd.SpeedFastest
	case 3:
		return zstd.SpeedBetterCompression
	case 4:
		return zstd.SpeedBestCompression
	}
	return zstd.SpeedDefault
}

func newZstdEncoder(level, concurrency int) (*zstd.Encoder, error) {
	return zstd.NewWriter(nil,
		zstd.WithEncoderLevel(zstdLevel(level)),
		zstd.WithEncoderConcurrency(concurrency),
		zstd.WithEncoderCRC(true),
		zstd.WithZeroFrames(true),
		zstd.WithAllLitEntropyCompression(true),
		zstd.WithLowerEncoderMem(true))
}

// newZstdDecoder returns a decoder whose memory is capped by maxFrame: no
// frame may use a window or produce output beyond it.
func newZstdDecoder(maxFrame int64, concurrency int) (*zstd.Decoder, error) {
	win := max(uint64(maxFrame), zstd.MinWindowSize)
	return zstd.NewReader(nil,
		zstd.WithDecoderConcurrency(concurrency),
		zstd.WithDecoderMaxMemory(uint64(maxFrame)),
		zstd.WithDecoderMaxWindow(win),
		zstd.WithDecodeAllCapLimit(true),
		zstd.WithDecoderLowmem(true))
}

// decodeZstdFrame decodes comp, which must be exactly one zstd frame (at
// byte base of the compressed file) that decompresses to exactly len(dst)
// bytes, into dst. The frame's extent and its own content size are checked
// before decoding; sum (if hasSum) is the checksum the seek table gives for
// this position, and is always checked: a frame's own checksum proves only
// that it is intact, not that it is the frame that belongs here.
func decodeZstdFrame(d *zstd.Decoder, dst, comp []byte, base int64, sum uint32, hasSum bool) error {
	var h zstd.Header
	if err := h.Decode(comp); err != nil {
		return fmt.Errorf("%w: zstd frame header: %v", ErrCorrupt, err)
	}
	if h.Skippable {
		return fmt.Errorf("%w: seek table points at a skippable frame", ErrCorrupt)
	}
	if err := exactlyOneFrame(ZstdSeekable, comp, base); err != nil {
		return err
	}
	if h.HasFCS && h.FrameContentSize != uint64(len(dst)) {
		return fmt.Errorf("%w: zstd frame declares %d bytes, the seek table %d", ErrCorrupt, h.FrameContentSize, len(dst))
	}
	out, err := d.DecodeAll(comp, dst[:0:len(dst)])
	if err != nil {
		if errors.Is(err, zstd.ErrCRCMismatch) {
			return fmt.Errorf("%w: zstd frame checksum: %v", ErrChecksum, err)
		}
		if errors.Is(err, zstd.ErrDecoderSizeExceeded) || errors.Is(err, zstd.ErrWindowSizeExceeded) {
			return fmt.Errorf("%w: zstd frame decompresses to more than the %d bytes it claims: %v", ErrLimit, len(dst), err)
		}
		return fmt.Errorf("%w: zstd: %v", ErrCorrupt, err)
	}
	if len(out) != len(dst) {
		return fmt.Errorf("%w: zstd frame decompressed to %d bytes, the seek table says %d", ErrCorrupt, len(out), len(dst))
	}
	if len(out) > 0 && &out[0] != &dst[0] {
		copy(dst, out)
	}
	if !hasSum {
		return nil
	}
	// The frame's own checksum (its last 4 bytes, verified by the decoder)
	// is the same function of the content as the seek table's: comparing
	// the two costs nothing. Without one, hash the content.
	got := uint32(0)
	if h.HasCheckSum {
		got = binary.LittleEndian.Uint32(comp[len(comp)-4:])
	} else {
		got = checksum(dst)
	}
	if got != sum {
		return fmt.Errorf("%w: the frame at byte %d decompresses to bytes whose checksum %08x is not the %08x the seek table gives for this position: frames out of place (swapped, duplicated or replaced)", ErrChecksum, base, got, sum)
	}
	return nil
}

// exactlyOneFrame checks that comp (at byte base) is one whole frame of
// format f, no more, no less.
func exactlyOneFrame(f Format, comp []byte, base int64) error {
	limit := base + int64(len(comp))
	end, err := frameEnd(f, bytesPeeker(comp, base), base, limit)
	if err != nil {
		return err
	}
	if end != limit {
		return fmt.Errorf("%w: the frame at byte %d ends at byte %d, but its seek table entry goes on to byte %d: the frames are out of place", ErrCorrupt, base, end, limit)
	}
	return nil
}

func lz4BlockSize(n int64) lz4.BlockSize {
	switch {
	case n <= 64<<10:
		return lz4.Block64Kb
	case n <= 256<<10:
		return lz4.Block256Kb
	case n <= 1<<20:
		return lz4.Block1Mb
	}
	return lz4.Block4Mb
}

// encodeLZ4Frame appends to dst one LZ4 frame holding src: independent
// blocks, content size and content checksum.
func encodeLZ4Frame(dst *bytes.Buffer, src []byte, level int, frameSize int64) error {
	zw := lz4.NewWriter(dst)
	lv := lz4.Fast
	if level > 2 {
		lv = lz4.Level9
	}
	if err := zw.Apply(
		lz4.BlockSizeOption(lz4BlockSize(frameSize)),
		lz4.ChecksumOption(true),
		lz4.SizeOption(uint64(len(src))),
		lz4.ConcurrencyOption(1),
		lz4.CompressionLevelOption(lv),
	); err != nil {
		return err
	}
	if _, err := zw.Write(src); err != nil {
		return err
	}
	return zw.Close()
}

var lz4Readers = sync.Pool{New: func() any { return lz4.NewReader(nil) }}

// decodeLZ4Frame decodes comp, which must be exactly one LZ4 frame (at byte
// base) that decompresses to exactly len(dst) bytes, into dst; the content
// checksum is verified by reading to the end, then the seek table's.
func decodeLZ4Frame(dst, comp []byte, base int64, sum uint32, hasSum bool) error {
	if err := exactlyOneFrame(LZ4Seekable, comp, base); err != nil {
		return err
	}
	if err := sizeMatches(LZ4Seekable, bytesPeeker(comp, base), base, base+int64(len(comp)), int64(len(dst))); err != nil {
		return err
	}
	zr := lz4Readers.Get().(*lz4.Reader)
	defer lz4Readers.Put(zr)
	zr.Reset(bytes.NewReader(comp))
	if _, err := io.ReadFull(zr, dst); err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return fmt.Errorf("%w: LZ4 frame ends before the %d bytes the seek table claims", ErrCorrupt, len(dst))
		}
		return lz4Error(err)
	}
	var one [1]byte
	n, err := zr.Read(one[:])
	if n != 0 {
		return fmt.Errorf("%w: LZ4 frame decompresses to more than the %d bytes the seek table claims", ErrLimit, len(dst))
	}
	if err != io.EOF {
		if err == nil {
			err = errors.New("no end of frame")
		}
		return lz4Error(err)
	}
	if got := checksum(dst); hasSum && got != sum {
		return fmt.Errorf("%w: the frame at byte %d decompresses to bytes whose checksum %08x is not the %08x the seek table gives for this position: frames out of place (swapped, duplicated or replaced)", ErrChecksum, base, got, sum)
	}
	return nil
}

func lz4Error(err error) error {
	if errors.Is(err, lz4.ErrInvalidFrameChecksum) || errors.Is(err, lz4.ErrInvalidBlockChecksum) || errors.Is(err, lz4.ErrInvalidHeaderChecksum) {
		return fmt.Errorf("%w: lz4: %v", ErrChecksum, err)
	}
	return fmt.Errorf("%w: lz4: %v", ErrCorrupt, err)
}
