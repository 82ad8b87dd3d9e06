package compressed

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// Decompress writes the original file held by the compressed src (size
// bytes) to dst. Seekable files are decompressed frame by frame on
// [WithConcurrency] goroutines with a bounded window; plain zstd and LZ4
// streams (no seek table) are decompressed as streams, their window capped
// by [WithMaxFrameSize]. Every frame's size and checksum is checked, each
// against its position, and the result against the size the original's own
// header gives: a file cut short is an error, never a short original. When
// ctx is cancelled no new frame is started and ctx's error is returned.
func Decompress(ctx context.Context, dst io.Writer, src io.ReaderAt, size int64, opts ...ReadOption) (*Result, error) {
	c, err := readConfig("Decompress", false, false, opts)
	if err != nil {
		return nil, err
	}
	return decompress(ctx, dst, src, size, c)
}

func decompress(ctx context.Context, dst io.Writer, src io.ReaderAt, size int64, c config) (*Result, error) {
	res, err := decompressAll(ctx, dst, src, size, c)
	return res, withFile(err, c.name)
}

func decompressAll(ctx context.Context, dst io.Writer, src io.ReaderAt, size int64, c config) (*Result, error) {
	f, err := Detect(src, size)
	if err != nil {
		return nil, err
	}
	rec := &ioRecorder{r: src}
	switch f {
	case ZstdStream:
		zr, err := zstd.NewReader(io.NewSectionReader(rec, 0, size),
			zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxWindow(uint64(max(c.maxFrame, zstd.MinWindowSize))))
		if err != nil {
			return nil, err
		}
		defer zr.Close()
		return copyStream(ctx, dst, zr, rec, f, size, c)
	case LZ4Stream:
		return copyStream(ctx, dst, lz4.NewReader(io.NewSectionReader(rec, 0, size)), rec, f, size, c)
	}
	ra, err := newReaderAt(src, size, c)
	if err != nil {
		return nil, err
	}
	defer ra.Close()
	ra.mapped = mapSource(src, size) // unmapped by ra.Close
	ra.wholeRead = true              // (newReaderAt checked the original's size) every frame is decoded and checked
	var done int64
	if len(ra.prefix) > 0 {
		if _, err := dst.Write(ra.prefix); err != nil {
			return nil, err
		}
		done = int64(len(ra.prefix))
	}
	batches := batchFrames(ra.frames, decodeBatch)
	err = ordered(ctx, len(batches)-1, c.concurrency, func(k int) ([]byte, error) {
		fs := ra.frames[batches[k]:batches[k+1]]
		bp := getBuf(fs[len(fs)-1].uoff + fs[len(fs)-1].ulen - fs[0].uoff) // at most max(decodeBatch, one frame)
		buf := *bp
		for j := range fs {
			d := buf[fs[j].uoff-fs[0].uoff:][:fs[j].ulen]
			if err := ra.decodeFrame(batches[k]+j, d, nil); err != nil {
				putBuf(bp)
				return nil, err
			}
		}
		return buf, nil
	}, func(i int, b []byte) error {
		_, err := dst.Write(b)
		n := int64(len(b))
		putBuf(&b) // b is not used after this
		if err != nil {
			return err
		}
		done += n
		if c.progress != nil {
			c.progress(done, ra.size)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return &Result{Format: f, Size: ra.size, Compressed: size, Frames: len(ra.frames), HeaderLength: int64(len(ra.prefix))}, nil
}

// copyStream decompresses a plain stream; errors in the data become
// ErrCorrupt (or ErrChecksum), write errors stay as they are.
func copyStream(ctx context.Context, dst io.Writer, r io.Reader, rec *ioRecorder, f Format, size int64, c config) (*Result, error) {
	out := &checkedWriter{w: dst, format: f, want: -1}
	var done int64
	buf := make([]byte, 1<<20)
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		n, rerr := r.Read(buf)
		if n > 0 {
			if c.maxSize >= 0 && done+int64(n) > c.maxSize {
				return nil, newErr(ErrMaxSize, -1, -1, "%s decompresses to more than the limit of %d bytes", f, c.maxSize)
			}
			if _, err := out.Write(buf[:n]); err != nil {
				return nil, err
			}
			done += int64(n)
			if c.progress != nil {
				c.progress(done, -1)
			}
		}
		if rerr == io.EOF {
			if err := out.finish(); err != nil {
				return nil, err
			}
			break
		}
		if rerr != nil {
			if err := rec.failed(); err != nil {
				return nil, fmt.Errorf("reading %s: %w", f, err)
			}
			var sentinel error = ErrCorrupt
			if errors.Is(rerr, zstd.ErrCRCMismatch) || errors.Is(rerr, lz4.ErrInvalidFrameChecksum) || errors.Is(rerr, lz4.ErrInvalidBlockChecksum) {
				sentinel = ErrChecksum
			}
			return nil, &Error{Frame: -1, Offset: -1, Msg: fmt.Sprintf("%s after %d decompressed bytes", f, done), Err: sentinel, Cause: rerr}
		}
	}
	return &Result{Format: f, Size: done, Compressed: size}, nil
}

// ioRecorder remembers the first error of the underlying reader (other
// than io.EOF), so that a stream decoder's failure caused by I/O is
// reported as the I/O error it is, not as corrupt data.
type ioRecorder struct {
	r   io.ReaderAt
	mu  sync.Mutex
	err error
}

func (r *ioRecorder) ReadAt(p []byte, off int64) (int, error) {
	n, err := r.r.ReadAt(p, off)
	if err != nil && err != io.EOF {
		r.mu.Lock()
		if r.err == nil {
			r.err = err
		}
		r.mu.Unlock()
	}
	return n, err
}

func (r *ioRecorder) failed() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.err
}

// decodeBatch is how many decompressed bytes one worker of [Decompress]
// decodes per hand-off: small frames are decoded a few at a time, so the
// goroutines pass each other a buffer per megabyte, not per frame.
const decodeBatch = 1 << 20

// batchFrames cuts frames into runs of consecutive frames of at most limit
// decompressed bytes together (a larger frame is a run of its own) and
// returns the runs' boundaries: run k is frames [b[k], b[k+1]). Frames are
// contiguous in the decompressed file.
func batchFrames(frames []frame, limit int64) []int {
	b := []int{0}
	var n int64
	for i, f := range frames {
		if i > b[len(b)-1] && n+f.ulen > limit {
			b = append(b, i)
			n = 0
		}
		n += f.ulen
	}
	if len(frames) > 0 {
		b = append(b, len(frames))
	}
	return b
}
