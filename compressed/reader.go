package compressed

import (
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"runtime"
	"slices"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/gosafetensors/safetensors"
	"github.com/gosafetensors/safetensors/internal/fault"
	"github.com/gosafetensors/safetensors/internal/mmap"
	"github.com/klauspost/compress/zstd"
)

// ReaderAt presents a compressed safetensors file as the original,
// uncompressed bytes: ReadAt decompresses only the frames (or chunks) that
// overlap the range asked for, keeping a few recently used ones. It is safe
// for concurrent use.
type ReaderAt struct {
	src    io.ReaderAt
	csize  int64 // compressed size
	name   string
	format Format
	size   int64  // uncompressed size
	prefix []byte // bytes [0, len(prefix)) served from memory (grouped header)
	frames []frame
	decode func(dst, comp []byte, f *frame, par runner) error
	zdec   *zstd.Decoder
	conc   int
	closer io.Closer

	// mapped is the compressed file mapped read-only (by [Open]), or nil;
	// mapMu keeps Close from unmapping it under a running decode.
	mapMu  sync.RWMutex
	mapped []byte

	mu          sync.Mutex
	cache       []cached // most recently used last
	limit       int      // frames kept at most
	cacheMax    int64    // bytes kept at most
	cachedBytes int64

	// walkMu guards walked: entries [0, walked) of a seek table are known to
	// be one whole frame each, so entry walked starts where the frames, read
	// in sequence, put a frame. wholeRead (Decompress) decodes every entry,
	// checking each, and needs no walk ahead.
	walkMu    sync.Mutex
	walked    int
	wholeRead bool

	onDecode      func(n int64) // WithDecodeCounter
	framesDecoded atomic.Int64
	bytesDecoded  atomic.Int64
	cacheHits     atomic.Int64
}

type cached struct {
	i    int
	data []byte
}

// Stats counts the work a ReaderAt has done.
type Stats struct {
	FramesDecoded int64 // frames or chunks decompressed
	BytesDecoded  int64 // bytes they decompressed to
	CacheHits     int64 // frames served from the cache
}

// NewReaderAt detects the compressed format of r (size bytes), reads its
// seek table or chunk index, and returns a ReaderAt over the original file.
// A file that is not compressed is an error wrapping [ErrNotCompressed]; a
// zstd or LZ4 stream without a seek table wraps [ErrNotSeekable] (use
// [Decompress] for those).
func NewReaderAt(r io.ReaderAt, size int64, opts ...ReadOption) (*ReaderAt, error) {
	c, err := readConfig("NewReaderAt", true, false, opts)
	if err != nil {
		return nil, err
	}
	ra, err := newReaderAt(r, size, c)
	return ra, withFile(err, c.name)
}

func newReaderAt(r io.ReaderAt, size int64, c config) (*ReaderAt, error) {
	f, err := Detect(r, size)
	if err != nil {
		return nil, err
	}
	ra := &ReaderAt{src: r, csize: size, name: c.name, format: f, limit: c.cacheFrames, cacheMax: c.cacheBytes, conc: c.concurrency, onDecode: c.onDecode}
	if ra.cacheMax == 0 {
		ra.limit = 0
	}
	switch f {
	case None:
		return nil, newErr(ErrNotCompressed, -1, -1, "not a compressed file (no zstd or lz4 seek table, no grouped container)")
	case ZstdStream, LZ4Stream:
		return nil, newErr(ErrNotSeekable, -1, -1, "%s: no seek table at the end of the file, so no random access: a plain stream (as the zstd and lz4 tools write) must be decompressed first (safetensors decompress), or the original compressed with safetensors compress; a seekable file cut short (a truncated download?) looks the same", f)
	case ZstdSeekable, LZ4Seekable:
		frames, usize, err := readSeekTable(r, size, c.maxFrame, c.maxFrames)
		if err != nil {
			return nil, err
		}
		ra.frames, ra.size = frames, usize
		if f == ZstdSeekable {
			if ra.zdec, err = newZstdDecoder(c.maxFrame, c.concurrency); err != nil {
				return nil, err
			}
			ra.decode = func(dst, comp []byte, fr *frame, _ runner) error {
				return decodeZstdFrame(ra.zdec, dst, comp, fr.coff, fr.sum, fr.hasSum)
			}
		} else {
			ra.decode = func(dst, comp []byte, fr *frame, _ runner) error {
				return decodeLZ4Frame(dst, comp, fr.coff, fr.sum, fr.hasSum)
			}
		}
	case GroupedFormat:
		g, err := readGroupedIndex(r, size, c.maxFrame, c.maxHeader)
		if err != nil {
			return nil, err
		}
		ra.frames, ra.size, ra.prefix = g.frames, g.size, g.prefix
		if ra.zdec, err = newZstdDecoder(c.maxFrame, c.concurrency); err != nil {
			return nil, err
		}
		ra.decode = func(dst, comp []byte, fr *frame, par runner) error {
			return decodeChunk(dst, comp, fr.uoff, ra.zdec, par)
		}
	}
	if c.maxRatio > 0 && ra.size > maxOriginal(size, c.maxRatio) {
		ra.Close()
		return nil, newErr(ErrLimit, -1, -1, "%d compressed bytes claim %d bytes of original (more than %d times the compressed size plus %d MiB): a decompression bomb? (decompress --max-ratio 0 reads it anyway)",
			size, ra.size, c.maxRatio, ratioSlack>>20)
	}
	if c.maxSize >= 0 && ra.size > c.maxSize {
		ra.Close()
		return nil, newErr(ErrMaxSize, -1, -1, "%s file decompresses to %d bytes, more than the limit of %d", f, ra.size, c.maxSize)
	}
	if f == ZstdSeekable || f == LZ4Seekable {
		// The original's header says how long it is; frames missing at the
		// end (with their seek table entries) leave a consistent table.
		// (The grouped index was checked against its header already.)
		var hopts []safetensors.Option
		if c.maxHeader > 0 {
			hopts = append(hopts, safetensors.WithMaxHeaderSize(c.maxHeader))
		}
		want, err := originalSize(io.NewSectionReader(ra, 0, ra.size), hopts...)
		if err == nil && want != ra.size {
			err = incomplete(f, ra.size, want)
		}
		if err != nil {
			ra.Close()
			return nil, err
		}
	}
	return ra, nil
}

// ratioSlack is the original size any compressed file may claim beyond
// its ratio cap: small files of zeros compress far beyond it.
const ratioSlack = 1 << 30

// maxOriginal returns the largest original size a compressed file of size
// bytes may claim under the ratio cap.
func maxOriginal(size, ratio int64) int64 {
	if size > (math.MaxInt64-ratioSlack)/ratio {
		return math.MaxInt64
	}
	return size*ratio + ratioSlack
}

// Open opens a compressed file for random access. Close the ReaderAt to
// close the file.
func Open(path string, opts ...ReadOption) (*ReaderAt, error) {
	c, err := readConfig("Open", true, false, append([]ReadOption{WithName(path)}, opts...))
	if err != nil {
		return nil, err
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	ra, err := newReaderAt(f, st.Size(), c)
	if err != nil {
		err = withFile(err, c.name)
		f.Close()
		return nil, err
	}
	ra.closer = f
	ra.mapped = mapSource(f, st.Size())
	return ra, nil
}

// Size returns the size of the original, uncompressed file.
func (r *ReaderAt) Size() int64 { return r.size }

// Format returns the container format.
func (r *ReaderAt) Format() Format { return r.format }

// Frames returns the number of frames or chunks.
func (r *ReaderAt) Frames() int { return len(r.frames) }

// Stats returns the work done so far.
func (r *ReaderAt) Stats() Stats {
	return Stats{FramesDecoded: r.framesDecoded.Load(), BytesDecoded: r.bytesDecoded.Load(), CacheHits: r.cacheHits.Load()}
}

// Close releases the decoder and the file opened by [Open] (a ReaderAt
// from [NewReaderAt] leaves its io.ReaderAt to the caller).
func (r *ReaderAt) Close() error {
	if r.zdec != nil {
		r.zdec.Close()
	}
	r.mu.Lock()
	r.cache = nil
	r.mu.Unlock()
	r.mapMu.Lock()
	mmap.Unmap(r.mapped)
	r.mapped = nil
	r.mapMu.Unlock()
	if r.closer != nil {
		return r.closer.Close()
	}
	return nil
}

// ReadAt reads len(p) bytes of the original file at off, decompressing the
// frames that hold them (several at once when a read spans many). Like any
// io.ReaderAt it returns io.EOF when fewer bytes remain.
func (r *ReaderAt) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, fmt.Errorf("compressed: negative offset %d", off)
	}
	if off >= r.size {
		if len(p) == 0 {
			return 0, nil
		}
		return 0, io.EOF
	}
	want := p
	if int64(len(p)) > r.size-off {
		want = p[:r.size-off]
	}
	n := 0
	if off < int64(len(r.prefix)) {
		n = copy(want, r.prefix[off:])
	}
	if n < len(want) {
		if err := r.readFrames(want[n:], off+int64(n)); err != nil {
			return 0, withFile(err, r.name)
		}
	}
	if len(want) < len(p) {
		return len(want), io.EOF
	}
	return len(p), nil
}

// readFrames fills p from the frames covering [off, off+len(p)): cached
// frames are copied, frames wholly inside p are decoded straight into it,
// the partial ones at the ends are decoded into the cache.
func (r *ReaderAt) readFrames(p []byte, off int64) error {
	end := off + int64(len(p))
	first := sort.Search(len(r.frames), func(i int) bool { return r.frames[i].uoff+r.frames[i].ulen > off })
	type job struct {
		i   int
		dst []byte // where it goes in p when the frame is wholly inside
	}
	var jobs []job
	for i := first; i < len(r.frames) && r.frames[i].uoff < end; i++ {
		f := &r.frames[i]
		if f.ulen == 0 {
			continue
		}
		if data := r.cached(i); data != nil {
			copyFrame(p, off, f, data)
			continue
		}
		if f.uoff >= off && f.uoff+f.ulen <= end {
			jobs = append(jobs, job{i, p[f.uoff-off : f.uoff-off+f.ulen]})
		} else {
			jobs = append(jobs, job{i, nil})
		}
	}
	if len(jobs) == 0 {
		return nil
	}
	var par runner
	if len(jobs) == 1 {
		par = r.parallel // one frame: decode its blocks in parallel
	}
	run := func(j job) error {
		f := &r.frames[j.i]
		if j.dst != nil {
			return r.decodeFrame(j.i, j.dst, par)
		}
		// A frame at either end: decode it aside, keep it if caching,
		// else recycle the buffer. f.ulen is capped by the max frame size.
		if !r.cacheable(f.ulen) {
			bp := getBuf(f.ulen)
			defer putBuf(bp)
			if err := r.decodeFrame(j.i, *bp, par); err != nil {
				return err
			}
			copyFrame(p, off, f, *bp)
			return nil
		}
		dst := make([]byte, f.ulen)
		if err := r.decodeFrame(j.i, dst, par); err != nil {
			return err
		}
		copyFrame(p, off, f, dst)
		r.store(j.i, dst)
		return nil
	}
	return r.parallel(len(jobs), func(k int) error { return run(jobs[k]) })
}

// parallel runs f(0..n-1) on up to r.conc goroutines and returns the first
// error.
func (r *ReaderAt) parallel(n int, f func(k int) error) error {
	if n == 1 || r.conc <= 1 {
		for k := range n {
			if err := f(k); err != nil {
				return err
			}
		}
		return nil
	}
	var (
		next     atomic.Int64
		wg       sync.WaitGroup
		errMu    sync.Mutex
		firstErr error
	)
	for range min(r.conc, n, runtime.GOMAXPROCS(0)) {
		wg.Go(func() {
			for {
				k := int(next.Add(1) - 1)
				if k >= n {
					return
				}
				if err := f(k); err != nil {
					errMu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					errMu.Unlock()
					next.Store(int64(n))
					return
				}
			}
		})
	}
	wg.Wait()
	return firstErr
}

// frameRange returns the frames [a, b) that overlap [off, off+n).
func (r *ReaderAt) frameRange(off, n int64) (int, int) {
	a := sort.Search(len(r.frames), func(i int) bool { return r.frames[i].uoff+r.frames[i].ulen > off })
	b := a
	for b < len(r.frames) && r.frames[b].uoff < off+n {
		b++
	}
	return a, b
}

// ReadRuns fills bufs[i] from offset offs[i] of the original file, for
// many small runs at once (a strided slice): the frames the runs touch are
// decompressed together, in parallel, each once, instead of run by run.
// It implements safetensors.RunReader.
func (r *ReaderAt) ReadRuns(bufs [][]byte, offs []int64) error {
	if len(bufs) != len(offs) {
		return fmt.Errorf("compressed: ReadRuns with %d buffers and %d offsets", len(bufs), len(offs))
	}
	group := max(2*r.conc, 8)
	for i := 0; i < len(bufs); {
		// Runs in the in-memory prefix, past the end, or spanning many
		// frames on their own go through ReadAt.
		if a, b := r.frameRange(offs[i], int64(len(bufs[i]))); offs[i] < int64(len(r.prefix)) || offs[i] < 0 ||
			offs[i]+int64(len(bufs[i])) > r.size || b-a > group {
			if _, err := r.ReadAt(bufs[i], offs[i]); err != nil {
				return err
			}
			i++
			continue
		}
		// Collect the following runs while they need at most group frames.
		// A frame wholly inside one run is decoded straight into that
		// run's buffer (direct[f] is the run); the others into scratch.
		var need []int
		have := map[int][]byte{}
		direct := map[int]directFrame{}
		j := i
		for ; j < len(bufs); j++ {
			if offs[j] < int64(len(r.prefix)) || offs[j] < 0 || offs[j]+int64(len(bufs[j])) > r.size {
				break
			}
			a, b := r.frameRange(offs[j], int64(len(bufs[j])))
			var add []int
			for f := a; f < b; f++ {
				if _, ok := have[f]; !ok && !slices.Contains(add, f) {
					add = append(add, f)
				}
			}
			if len(need)+len(add) > group {
				break
			}
			for _, f := range add {
				have[f] = r.cached(f)
				if have[f] != nil {
					continue
				}
				need = append(need, f)
				if fr := &r.frames[f]; fr.uoff >= offs[j] && fr.uoff+fr.ulen <= offs[j]+int64(len(bufs[j])) {
					direct[f] = directFrame{j, bufs[j][fr.uoff-offs[j] : fr.uoff-offs[j]+fr.ulen]}
				}
			}
		}
		var mu sync.Mutex
		var par runner
		if len(need) == 1 {
			par = r.parallel
		}
		// Without a cache the frames are decoded into pooled buffers,
		// released once the runs are copied out.
		var pooled []*[]byte
		err := r.parallel(len(need), func(k int) error {
			f := need[k]
			if d, ok := direct[f]; ok {
				return r.decodeFrame(f, d.dst, par)
			}
			var buf []byte
			var bp *[]byte
			if !r.cacheable(r.frames[f].ulen) {
				bp = getBuf(r.frames[f].ulen) // capped by the max frame size
				buf = *bp
			} else {
				buf = make([]byte, r.frames[f].ulen)
			}
			err := r.decodeFrame(f, buf, par)
			mu.Lock()
			if bp != nil {
				pooled = append(pooled, bp)
			}
			if err == nil {
				have[f] = buf
			}
			mu.Unlock()
			if err != nil {
				return err
			}
			r.store(f, buf)
			return nil
		})
		if err == nil {
			for ; i < j; i++ {
				a, b := r.frameRange(offs[i], int64(len(bufs[i])))
				for f := a; f < b; f++ {
					if d, ok := direct[f]; !ok {
						copyFrame(bufs[i], offs[i], &r.frames[f], have[f])
					} else if d.run != i {
						copyFrame(bufs[i], offs[i], &r.frames[f], d.dst)
					}
				}
			}
		}
		for _, bp := range pooled {
			putBuf(bp)
		}
		if err != nil {
			return withFile(err, r.name)
		}
	}
	return nil
}

// directFrame is a frame that ReadRuns decodes straight into the buffer
// of the run that wholly holds it.
type directFrame struct {
	run int
	dst []byte
}

// decodeFrame reads frame i's compressed bytes and decodes them into dst;
// par (if not nil) may decode parts of the frame in parallel.
func (r *ReaderAt) decodeFrame(i int, dst []byte, par runner) error {
	f := &r.frames[i]
	if err := r.walkTo(i); err != nil {
		return err
	}
	var err error
	r.mapMu.RLock()
	if comp, ok := r.mappedFrame(f.coff, f.clen); ok {
		if par != nil {
			// Blocks decoded on other goroutines need their own guard.
			outer := par
			par = func(n int, g func(k int) error) error {
				return outer(n, func(k int) error { return fault.Catch(func() error { return g(k) }) })
			}
		}
		err = fault.Catch(func() error { return r.decode(dst, comp, f, par) })
		r.mapMu.RUnlock()
		if errors.Is(err, fault.ErrFault) {
			return fmt.Errorf("reading frame %d at byte %d: %w", i, f.coff, err)
		}
	} else {
		r.mapMu.RUnlock()
		bp := getBuf(f.clen) // within the file: its size was checked
		defer putBuf(bp)
		comp := *bp
		if err := readFull(r.src, comp, f.coff); err != nil {
			if errors.Is(err, io.ErrUnexpectedEOF) {
				return &Error{Frame: i, Offset: f.coff, Msg: "compressed file is shorter than its seek table says", Err: ErrCorrupt, Cause: err}
			}
			return fmt.Errorf("reading frame %d at byte %d: %w", i, f.coff, err)
		}
		err = r.decode(dst, comp, f, par)
	}
	if err != nil {
		var sentinel error = ErrCorrupt
		for _, s := range []error{ErrChecksum, ErrLimit} {
			if errors.Is(err, s) {
				sentinel = s
			}
		}
		return &Error{Frame: i, Offset: f.coff, Msg: fmt.Sprintf("decompressing bytes %d-%d of the original", f.uoff, f.uoff+f.ulen), Err: sentinel, Cause: err}
	}
	r.framesDecoded.Add(1)
	r.bytesDecoded.Add(f.ulen)
	if r.onDecode != nil {
		r.onDecode(f.ulen)
	}
	r.walkMu.Lock()
	if r.walked == i {
		r.walked = i + 1 // its decoder checked it is one whole frame
	}
	r.walkMu.Unlock()
	return nil
}

// walkTo makes sure entry i of a seek table starts where a frame starts
// when the file is read in sequence: it walks the frame and block headers
// of the entries before it not yet known to be one whole frame each (a few
// bytes per block, from the mapping when there is one). Without this, an
// entry could point at a frame hidden inside another frame's raw block: it
// decodes and checks fine on its own, but `zstd -d` never sees it.
func (r *ReaderAt) walkTo(i int) error {
	if r.wholeRead || r.format != ZstdSeekable && r.format != LZ4Seekable {
		return nil
	}
	r.walkMu.Lock()
	defer r.walkMu.Unlock()
	if r.walked >= i {
		return nil
	}
	r.mapMu.RLock()
	defer r.mapMu.RUnlock()
	peek := readerPeeker(r.src, r.csize)
	if r.mapped != nil {
		peek = bytesPeeker(r.mapped, 0)
	}
	for ; r.walked < i; r.walked++ {
		f := &r.frames[r.walked]
		limit := f.coff + f.clen
		var end int64
		err := fault.Catch(func() error {
			var err error
			end, err = frameEnd(r.format, peek, f.coff, limit)
			return err
		})
		if err == nil && end != limit {
			err = fmt.Errorf("%w: the frame at byte %d ends at byte %d, but its seek table entry goes on to byte %d: the frames are out of place", ErrCorrupt, f.coff, end, limit)
		}
		if err == nil {
			err = fault.Catch(func() error { return sizeMatches(r.format, peek, f.coff, limit, f.ulen) })
		}
		if err != nil {
			if errors.Is(err, ErrCorrupt) {
				msg := fmt.Sprintf("frame %d, before the frame %d being read, is not where the seek table says", r.walked, i)
				if i == len(r.frames) { // Verify: every frame walked
					msg = "not where the seek table says"
				}
				return &Error{Frame: r.walked, Offset: f.coff, Msg: msg, Err: ErrCorrupt, Cause: err}
			}
			return fmt.Errorf("walking the frames before frame %d, at byte %d: %w", i, f.coff, err)
		}
	}
	return nil
}

func copyFrame(p []byte, off int64, f *frame, data []byte) {
	lo := max(off, f.uoff)
	hi := min(off+int64(len(p)), f.uoff+f.ulen)
	copy(p[lo-off:hi-off], data[lo-f.uoff:hi-f.uoff])
}

func (r *ReaderAt) cached(i int) []byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	for k := len(r.cache) - 1; k >= 0; k-- {
		if r.cache[k].i == i {
			c := r.cache[k]
			copy(r.cache[k:], r.cache[k+1:])
			r.cache[len(r.cache)-1] = c
			r.cacheHits.Add(1)
			return c.data
		}
	}
	return nil
}

// cacheable reports whether a decoded frame of n bytes may be kept.
func (r *ReaderAt) cacheable(n int64) bool { return r.limit > 0 && n <= r.cacheMax }

func (r *ReaderAt) store(i int, data []byte) {
	n := int64(len(data))
	if !r.cacheable(n) {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, c := range r.cache {
		if c.i == i {
			return
		}
	}
	for len(r.cache) > 0 && (len(r.cache) >= r.limit || r.cachedBytes+n > r.cacheMax) {
		r.cachedBytes -= int64(len(r.cache[0].data))
		copy(r.cache, r.cache[1:])
		r.cache[len(r.cache)-1] = cached{}
		r.cache = r.cache[:len(r.cache)-1]
	}
	r.cache = append(r.cache, cached{i, data})
	r.cachedBytes += n
}
