package compressed

import (
	"context"
	"sync"
)

// Verify checks the whole container, as `zstd -t` or `gzip -t` do: the
// frames against the seek table (every entry one whole frame, where the
// frames read in sequence put it: the walk of the frame and block headers,
// cheap, first), then every frame or chunk decompressed and checked against
// its entry (decompressed size, checksum for its position; a grouped
// chunk's checksum over its offset and bytes). It is the check every read
// of the data makes, for all of it: a container that passes cannot be
// refused by a later ReadAt, ReadRuns or Decompress of the same bytes, and
// one that any of them would refuse fails here, with the frame and the byte
// offset. Only decompression tells a swapped, duplicated or corrupted frame
// whose sizes still fit, so Verify costs about what decompressing the file
// does (the data is discarded; memory is one frame per goroutine). The
// frames are decoded on the ReaderAt's [WithConcurrency] goroutines; when
// ctx is cancelled no new frame is started and ctx's error is returned.
// Nothing is cached. I/O errors are returned as they are.
func (r *ReaderAt) Verify(ctx context.Context) error {
	if err := r.walkTo(len(r.frames)); err != nil {
		return withFile(err, r.name)
	}
	// Goroutines take frames in order and finish the one they hold, so
	// every frame before the first failing one is decoded: the error
	// reported is the first frame's in file order, whatever the timing.
	var mu sync.Mutex
	first, firstErr := len(r.frames), error(nil)
	r.parallel(len(r.frames), func(i int) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		f := &r.frames[i]
		bp := getBuf(f.ulen) // capped by the max frame size at open
		defer putBuf(bp)
		err := r.decodeFrame(i, (*bp)[:f.ulen], nil)
		if err != nil {
			mu.Lock()
			if i < first {
				first, firstErr = i, err
			}
			mu.Unlock()
		}
		return err
	})
	err := firstErr
	if cerr := ctx.Err(); cerr != nil {
		return cerr
	}
	return withFile(err, r.name)
}
