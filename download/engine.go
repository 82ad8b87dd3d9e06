package download

import (
	"context"
	"errors"
	"fmt"
	"hash"
	"io"
	"iter"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/gosafetensors/safetensors/internal/fetch"
)

// streamer is a source that streams a range through a small buffer
// (remote.File); other sources are read with ReadAtContext or ReadAt
// into a chunk-sized buffer.
type streamer interface {
	ReadRangeFunc(ctx context.Context, off, n int64, buf []byte, fn func(p []byte, pos int64) error) error
}

type contextReaderAt interface {
	ReadAtContext(ctx context.Context, p []byte, off int64) (int, error)
}

// target is one file to put on disk: Size bytes of an object, written to
// Part (with its journal beside it), checked against Digest as they
// arrive, renamed to Dest once every byte is in and checked.
type target struct {
	Name   string // for messages: the repository path, URL or key
	rel    string // path under a local directory (HTTP and buckets)
	Dest   string
	Part   string
	Size   int64
	Object string // identity recorded in the journal
	Digest Digest
	// open opens the object; its io.Closer, if any, is closed at the end.
	open func(ctx context.Context) (io.ReaderAt, error)
	// check, if set, is called with the opened object before a byte is
	// read (the Hub's X-Linked-Etag against the listing).
	check func(r io.ReaderAt) error

	src     io.ReaderAt
	f       *os.File
	direct  *os.File    // the same file opened with O_DIRECT, or nil
	buffer  atomic.Bool // set when a direct write failed: the page cache only from then on
	j       *journal
	resumed int64 // bytes found on disk at the start

	io       sync.Mutex // held by the committer and by finish: the files
	finished bool       // finished or discarded: the committer leaves it
	complete bool       // renamed into place, checked

	mu           sync.Mutex // guards what follows
	cond         sync.Cond
	h            hash.Hash // the digest being computed (nil: hashing off)
	hashed       int64     // bytes [0, hashed) are in h
	hashing      bool      // a goroutine is writing to h
	written      rangeSet  // bytes written to f (durable or not)
	durable      rangeSet  // bytes the journal records
	pending      rangeSet  // written, not yet in the journal
	pendingBytes int64
	cached       rangeSet // written through the page cache, not yet hashed
	dropped      int64    // bytes [0, dropped) were dropped from the page cache
}

func (t *target) journalPath() string { return t.Part + ".journal" }

// engine moves the bytes of many targets with one fetch run.
type engine struct {
	concurrency int
	chunk       int64  // the default range size, and what the throttle's bound is made of
	sizer       *sizer // sizes ranges to the link (nil: every range is chunk, shrinking at the end)
	streamBuf   int
	noHash      bool // benchmarks only: hashing off, to measure its cost
	noSync      bool // benchmarks only: no fdatasync of the data, to measure the disk's share
	earlyDirect bool // benchmarks only: early bytes written with O_DIRECT and read back from the disk
	noDirect    bool // benchmarks only: no O_DIRECT, every byte through the page cache
	progress    func(Progress)

	moved    atomic.Int64 // bytes written this run
	readBack atomic.Int64 // bytes the hashers read back from the files
	direct   atomic.Int64 // bytes written with O_DIRECT
	done     atomic.Int64 // bytes on disk, resumed included
	total    int64
	bufs     chan []byte // stream buffers, one per worker
	chunks   chan []byte // chunk buffers for sources that cannot stream
	kick     chan struct{}
	targets  []*target

	// Bytes written and not yet journalled, over all targets: writers
	// wait while they exceed half a chunk per connection. With a stream
	// buffer of at most a quarter chunk (bytes received, not yet written),
	// a kill loses less than a chunk per connection whatever the disk's
	// pace (the journal commits every 100 ms, or as soon as a chunk's
	// worth waits; a slow disk holds the writers back).
	jmu         sync.Mutex
	jcond       sync.Cond
	unjournaled int64
	stopped     bool
}

// Progress reports a download's advance.
type Progress struct {
	Bytes int64 // bytes on disk of the files being downloaded (resumed ones included)
	Total int64 // bytes of those files
	Moved int64 // bytes moved over the network in this run
}

// run downloads every target, finishing each as soon as its last byte is
// in and checked. On error, what was written is journalled for the next
// run and nothing is renamed that was not checked.
func (e *engine) run(ctx context.Context, targets []*target) (err error) {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	e.targets = targets
	e.bufs = make(chan []byte, e.concurrency)
	e.chunks = make(chan []byte, e.concurrency)
	e.kick = make(chan struct{}, 1)
	e.jcond.L = &e.jmu
	for range e.concurrency {
		e.bufs <- nil
		e.chunks <- nil
	}
	defer func() {
		for _, t := range targets {
			t.closeFiles()
			if c, ok := t.src.(io.Closer); ok && t.src != nil {
				c.Close()
			}
		}
	}()

	// Prepare: partials resumed or created, sources opened, in parallel
	// (each open is a request).
	var srcs []fetch.Source
	var active []*target
	if err := parallel(ctx, e.concurrency, len(targets), func(i int) error { return e.prepare(ctx, targets[i]) }); err != nil {
		return err
	}
	var total int64
	for _, t := range targets {
		if !e.noHash {
			t.h = t.Digest.newHash(t.Size)
		}
		e.total += t.Size
		e.done.Add(t.resumed)
		if m := t.Size - t.resumed; m > 0 {
			srcs = append(srcs, fetch.Source{R: t.src, Name: t.Name})
			active = append(active, t)
			total += m
		}
	}
	e.report()

	// The committer journals progress; hashers check and finish files.
	stopCommit := make(chan struct{})
	commitDone := make(chan error, 1)
	go func() { commitDone <- e.commitLoop(stopCommit, cancel) }()
	defer func() {
		close(stopCommit)
		if cerr := <-commitDone; err == nil && cerr != nil {
			err = cerr
		}
	}()
	var wg sync.WaitGroup
	errs := make(chan error, len(targets))
	for _, t := range targets {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := e.hashAndFinish(ctx, t); err != nil {
				errs <- err
				cancel(err)
			}
		}()
	}
	stopWake := context.AfterFunc(ctx, func() {
		e.jmu.Lock()
		e.stopped = true
		e.jcond.Broadcast()
		e.jmu.Unlock()
		for _, t := range targets {
			t.mu.Lock()
			t.cond.Broadcast()
			t.mu.Unlock()
		}
	})
	defer stopWake()

	// Files take turns, a chunk each: every file's hash frontier then
	// advances as its oldest range completes, so hashing runs beside the
	// transfer instead of after it (a file read by all connections at once
	// would have its ranges complete together, at its end). A turn is a
	// chunk (sized to the link where the sizer is on), read in ranges
	// that shrink as the end nears so that the last ones finish together.
	extents := func(yield func(fetch.Extent) bool) {
		miss := make([][]span, len(active))
		for i, t := range active {
			t.mu.Lock()
			miss[i] = t.written.missing(t.Size)
			t.mu.Unlock()
		}
		unplanned := total
		for left := len(active); left > 0; {
			left = 0
			for i := range miss {
				if len(miss[i]) == 0 {
					continue
				}
				s := &miss[i][0]
				c := e.rangeChunk()
				turn := min(s.End-s.Off, c)
				if c > e.chunk {
					// Grown for a link's latency: each cut is a request,
					// so a turn is one range (the rest waits for the
					// next), of whole O_DIRECT blocks so that the file's
					// next ranges stay aligned.
					turn = min(turn, (rangeSize(c, unplanned, e.concurrency)+directAlign-1)&^(directAlign-1))
				}
				for turn > 0 {
					n := turn
					if c <= e.chunk {
						n = min(turn, rangeSize(c, unplanned, e.concurrency))
					}
					if !yield(fetch.Extent{Src: i, Off: s.Off, Len: n, Item: i, Pos: s.Off}) {
						return
					}
					s.Off, turn, unplanned = s.Off+n, turn-n, unplanned-n
				}
				if s.Off == s.End {
					miss[i] = miss[i][1:]
				}
				if len(miss[i]) > 0 {
					left++
				}
			}
		}
	}
	_, ferr := fetch.Run(ctx, srcs, iter.Seq[fetch.Extent](extents), total, fetch.Config{
		// The extents are the ranges: fetch cuts none (MaxPieces 1: nor joins).
		Concurrency: e.concurrency, MaxChunk: e.maxRange(), MinChunk: e.maxRange(), MaxPieces: 1,
		Stream: func(ctx context.Context, c *fetch.Chunk) error { return e.stream(ctx, active[c.Src], c.Pieces[0]) },
	})
	if ferr != nil {
		cancel(ferr)
	}
	wg.Wait()
	close(errs)
	// A hasher's error (a digest mismatch) is the cause: the fetch error
	// it provoked is only its consequence.
	for herr := range errs {
		if !errors.Is(herr, context.Canceled) || ferr == nil {
			return herr
		}
	}
	if ferr != nil {
		return ferr
	}
	return context.Cause(ctx)
}

// rangeChunk is the size of the next range before the end's shrinking.
func (e *engine) rangeChunk() int64 {
	if e.sizer != nil {
		return e.sizer.chunk.Load()
	}
	return e.chunk
}

// maxRange bounds every range.
func (e *engine) maxRange() int64 {
	if e.sizer != nil {
		return max(e.chunk, maxLinkChunk)
	}
	return e.chunk
}

// rangeSize is the size of the next range of a chunk c when unplanned
// bytes remain for n connections: fetch.CutSize within [c/8, c] — the
// end's shrinking, so that the connections' last ranges finish together
// (c/8 measured best among c/16 to c).
func rangeSize(c, unplanned int64, n int) int64 {
	return fetch.CutSize(unplanned, n, max(c/8, 1), c)
}

// parallel runs fn(0..n-1) with at most limit at once; the first error
// stops the others from starting.
func parallel(ctx context.Context, limit, n int, fn func(i int) error) error {
	var wg sync.WaitGroup
	sem := make(chan struct{}, max(limit, 1))
	var first error
	var mu sync.Mutex
	for i := range n {
		mu.Lock()
		stop := first != nil
		mu.Unlock()
		if stop || ctx.Err() != nil {
			break
		}
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			if err := fn(i); err != nil {
				mu.Lock()
				if first == nil {
					first = err
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if first == nil && ctx.Err() != nil {
		return context.Cause(ctx)
	}
	return first
}

// prepare resumes a target's partial file (or starts one) and opens its
// object when bytes are missing.
func (e *engine) prepare(ctx context.Context, t *target) error {
	t.cond.L = &t.mu
	if err := mkdirFor(t.Part); err != nil {
		return err
	}
	if err := mkdirFor(t.Dest); err != nil {
		return err
	}
	if err := e.resume(t); err != nil {
		if !errors.Is(err, errStale) && !errors.Is(err, os.ErrNotExist) {
			return err
		}
		if err := e.start(t); err != nil {
			return err
		}
	}
	if t.resumed == t.Size {
		return nil
	}
	if !e.noDirect {
		t.direct = openDirect(t.Part)
	}
	// An open's requests tell the link's latency while the machine is
	// still idle (no transfer yet): the floor the sizer starts from.
	octx := ctx
	var clk reqClock
	if e.sizer != nil {
		octx = clk.trace(ctx)
	}
	r, err := t.open(octx)
	if err != nil {
		return err
	}
	if e.sizer != nil {
		lat, _ := clk.measure(time.Now())
		e.sizer.observe(lat, 0, 0)
	}
	t.src = r
	if t.check != nil {
		if err := t.check(r); err != nil {
			return err
		}
	}
	return nil
}

// resume reopens a partial and its journal.
func (e *engine) resume(t *target) error {
	set, err := readJournal(t.journalPath(), t.Object, t.Size)
	if err != nil {
		return err
	}
	if n := regularSize(t.Part); n != t.Size {
		return fmt.Errorf("%w: the partial file holds %d bytes, not %d", errStale, n, t.Size)
	}
	f, err := os.OpenFile(t.Part, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	j, err := createJournal(t.journalPath(), t.Object, t.Size, set.s) // compacted
	if err != nil {
		f.Close()
		return err
	}
	t.f, t.j = f, j
	t.written.s = append([]span(nil), set.s...)
	t.durable = *set
	t.resumed = set.bytes()
	return nil
}

// start creates a new partial, preallocated, and its journal.
func (e *engine) start(t *target) error {
	if err := removeIfExists(t.journalPath()); err != nil {
		return err
	}
	f, err := os.OpenFile(t.Part, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o666)
	if err != nil {
		return err
	}
	if err := preallocate(f, t.Size); err != nil {
		f.Close()
		os.Remove(t.Part)
		return err
	}
	j, err := createJournal(t.journalPath(), t.Object, t.Size, nil)
	if err != nil {
		f.Close()
		return err
	}
	t.f, t.j, t.resumed = f, j, 0
	t.written, t.durable = rangeSet{}, rangeSet{}
	return nil
}

func (t *target) closeFiles() {
	t.io.Lock()
	defer t.io.Unlock()
	if t.f != nil {
		t.f.Close()
		t.f = nil
	}
	t.closeDirect()
	if t.j != nil {
		t.j.close()
		t.j = nil
	}
}

func (t *target) closeDirect() {
	if t.direct != nil {
		t.direct.Close()
		t.direct = nil
	}
}

// stream reads one chunk of a target and writes it at its place.
func (e *engine) stream(ctx context.Context, t *target, p fetch.Extent) error {
	write := func(b []byte, pos int64) error {
		if err := t.writeAt(e, b, pos); err != nil {
			return fmt.Errorf("%s: writing %s: %w", t.Name, t.Part, err)
		}
		e.moved.Add(int64(len(b)))
		e.done.Add(int64(len(b)))
		t.wrote(e, b, pos)
		e.report()
		return e.throttle(int64(len(b)))
	}
	if s, ok := t.src.(streamer); ok {
		buf := <-e.bufs
		if buf == nil {
			buf = make([]byte, e.streamBuf)
		}
		defer func() { e.bufs <- buf }()
		if e.sizer == nil {
			return s.ReadRangeFunc(ctx, p.Off, p.Len, buf, write)
		}
		var clk reqClock
		err := s.ReadRangeFunc(clk.trace(ctx), p.Off, p.Len, buf, write)
		if lat, body := clk.measure(time.Now()); err == nil {
			e.sizer.observe(lat, p.Len, body)
		}
		return err
	}
	// A source that cannot stream is read in pieces of up to
	// readPiece bytes, each one request, into a buffer per worker.
	buf := <-e.chunks
	if buf == nil {
		buf = make([]byte, min(e.chunk, readPiece))
	}
	defer func() { e.chunks <- buf }()
	for off, end := p.Off, p.Off+p.Len; off < end; {
		b := buf[:min(int64(len(buf)), end-off)]
		var n int
		var err error
		if r, ok := t.src.(contextReaderAt); ok {
			n, err = r.ReadAtContext(ctx, b, off)
		} else {
			n, err = t.src.ReadAt(b, off)
		}
		if n == len(b) && errors.Is(err, io.EOF) {
			err = nil
		}
		if err == nil && n < len(b) {
			err = fmt.Errorf("%w: %d of %d bytes", fetch.ErrShortRead, n, len(b))
		}
		if err != nil {
			return fmt.Errorf("%s: reading bytes %d-%d: %w", t.Name, off, off+int64(len(b))-1, err)
		}
		if err := write(b, off); err != nil {
			return err
		}
		off += int64(n)
	}
	return nil
}

// directAlign is the alignment of O_DIRECT transfers: offsets, lengths
// and buffer addresses (the logical block size of common devices is 512
// or 4096 bytes).
const directAlign = 4096

func aligned(b []byte, off int64) bool {
	return len(b) > 0 && off%directAlign == 0 && len(b)%directAlign == 0 && uintptr(unsafe.Pointer(unsafe.SliceData(b)))%directAlign == 0
}

// writeAt writes b at off. Bytes that come next in the file's hash
// order (the worker hashes them from b right after) go with O_DIRECT
// where the file has it and b is aligned (every piece of a stream buffer
// but a file's last), from the buffer to the device without a page-cache
// page each — on a VM, fresh page-cache pages cost 0.3-3 CPU-seconds per
// GB, a direct write 0.2. Bytes that arrive early (before their
// predecessors) go through the page cache: the hasher reads them back
// soon, and from memory that is a copy, where a direct read-back waits
// for the disk in the hasher's path; the committer drops them from the
// cache once they are hashed and durable. A direct write that fails (a
// device that wants more alignment) is made again through the page
// cache, and the file's later writes too.
func (t *target) writeAt(e *engine, b []byte, off int64) error {
	if t.direct != nil && !t.buffer.Load() && aligned(b, off) && (e.earlyDirect || !t.early(off)) {
		if _, err := t.direct.WriteAt(b, off); err == nil {
			e.direct.Add(int64(len(b)))
			return nil
		}
		t.buffer.Store(true)
	}
	if _, err := t.f.WriteAt(b, off); err != nil {
		return err
	}
	t.mu.Lock()
	t.cached.add(off, off+int64(len(b)))
	t.mu.Unlock()
	return nil
}

// early reports whether bytes at off would be hashed by reading them
// back: hashing is on and they are not the next ones to hash.
func (t *target) early(off int64) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.h != nil && off != t.hashed
}

// readPiece bounds a read of a source that cannot stream (a bucket
// object): memory is a buffer of this size per worker.
const readPiece = 4 << 20

// wrote records bytes b written at off: the committer journals them, and
// the hasher may read them back. If they are the next bytes to hash and
// no one is hashing, they are hashed here, from the buffer they arrived
// in, while it is still in the CPU's cache: no read back.
func (t *target) wrote(e *engine, b []byte, off int64) {
	end := off + int64(len(b))
	t.mu.Lock()
	t.written.add(off, end)
	t.pending.add(off, end)
	t.pendingBytes += end - off
	big := t.pendingBytes >= e.chunk
	if t.h != nil && !t.hashing && t.hashed == off {
		t.hashing = true
		t.mu.Unlock()
		t.h.Write(b)
		t.mu.Lock()
		t.hashed, t.hashing = end, false
	}
	t.cond.Broadcast()
	t.mu.Unlock()
	if big {
		select {
		case e.kick <- struct{}{}:
		default:
		}
	}
}

// throttle counts n bytes written and not journalled, and waits while
// more than half a chunk per connection are.
func (e *engine) throttle(n int64) error {
	limit := int64(e.concurrency) * e.chunk / 2
	e.jmu.Lock()
	defer e.jmu.Unlock()
	e.unjournaled += n
	for e.unjournaled > limit && !e.stopped {
		select {
		case e.kick <- struct{}{}:
		default:
		}
		e.jcond.Wait()
	}
	return nil
}

// journalled counts n bytes made durable and journalled.
func (e *engine) journalled(n int64) {
	e.jmu.Lock()
	e.unjournaled -= n
	e.jcond.Broadcast()
	e.jmu.Unlock()
}

func (e *engine) report() {
	if e.progress != nil {
		e.progress(Progress{Bytes: e.done.Load(), Total: e.total, Moved: e.moved.Load()})
	}
}

// commitPeriod is how often progress is journalled (more often when a
// chunk's worth of bytes waits): what a kill loses is what arrived since.
const commitPeriod = 100 * time.Millisecond

// commitLoop journals progress until stop, then once more. A failure to
// make bytes durable (a failing disk) stops the download.
func (e *engine) commitLoop(stop <-chan struct{}, cancel context.CancelCauseFunc) error {
	tick := time.NewTicker(commitPeriod)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return e.commit()
		case <-tick.C:
		case <-e.kick:
		}
		if err := e.commit(); err != nil {
			cancel(err)
			<-stop
			return err
		}
	}
}

// commit makes every target's pending bytes durable, then journals them.
func (e *engine) commit() error {
	var first error
	for _, t := range e.targets {
		n, err := t.commit(e.noSync)
		if err != nil && first == nil {
			first = err
		}
		e.journalled(n)
	}
	return first
}

// commit journals the target's pending bytes; it returns how many bytes
// it took off the pending list (journalled, or given up on: a finished
// target's, or a failed commit's, which then stops the download).
func (t *target) commit(noSync bool) (int64, error) {
	t.io.Lock()
	defer t.io.Unlock()
	t.mu.Lock()
	spans := t.pending.take()
	n := t.pendingBytes
	t.pendingBytes = 0
	hashed := t.hashed
	t.mu.Unlock()
	if t.finished || t.f == nil || len(spans) == 0 {
		return n, nil
	}
	if !noSync {
		if err := datasync(t.f); err != nil {
			return n, err
		}
	}
	// Bytes below hashed were written before the sync: clean now, and
	// not needed again.
	if hashed > t.dropped {
		dropCache(t.f, t.dropped, hashed)
		t.dropped = hashed
	}
	for _, s := range spans {
		t.durable.add(s.Off, s.End)
	}
	if t.j.records+len(spans) > compactAfter && len(t.durable.s) < compactAfter/2 {
		j, err := createJournal(t.journalPath(), t.Object, t.Size, t.durable.s)
		if err != nil {
			return n, err
		}
		t.j.close()
		t.j = j
		return n, nil
	}
	return n, t.j.append(spans)
}

// hashBufSize is the read size of the hashers, which read back from the
// page cache what the workers wrote.
const hashBufSize = 1 << 20

var hashBufs = sync.Pool{New: func() any { b := make([]byte, hashBufSize); return &b }}

// hashAndFinish sees that a target's bytes are hashed in order: those the
// workers did not hash as they arrived (bytes that came before their
// predecessors, and on resume the bytes already on disk) it reads back
// from the file, where the page cache still holds them, as soon as the
// contiguous prefix reaches them. Then it checks the digest and moves the
// file into place.
func (e *engine) hashAndFinish(ctx context.Context, t *target) error {
	var bp *[]byte
	defer func() {
		if bp != nil {
			hashBufs.Put(bp)
		}
	}()
	t.mu.Lock()
	for {
		if t.hashed == t.Size && !t.hashing {
			break
		}
		if ctx.Err() != nil {
			t.mu.Unlock()
			return context.Cause(ctx)
		}
		end := t.written.reach(t.hashed)
		if end == t.hashed || t.hashing {
			t.cond.Wait()
			continue
		}
		if t.h == nil {
			t.hashed = end
			t.cached.trim(end)
			continue
		}
		from := t.hashed
		t.hashing = true
		t.mu.Unlock()
		if bp == nil {
			bp = hashBufs.Get().(*[]byte)
		}
		err := t.readBack(ctx, *bp, from, end)
		e.readBack.Add(end - from)
		t.mu.Lock()
		t.hashing = false
		if err != nil {
			t.mu.Unlock()
			return err
		}
		t.hashed = end
		t.cached.trim(end)
	}
	t.mu.Unlock()
	if t.h != nil {
		if got := hexSum(t.h); got != t.Digest.Hex {
			t.discard()
			return &DigestError{File: t.Name, Expected: t.Digest, Actual: got}
		}
	}
	return t.finish(e.noSync)
}

// readBack hashes bytes [from, end) of the partial file, reading them
// through buf. The caller holds t.hashing. Bytes written through the page
// cache (those that arrived early) are read from it: a copy. Bytes
// written with O_DIRECT are not in the page cache: they are read back
// with O_DIRECT too, in aligned blocks of which only [from, end) is
// hashed (a buffered read would put each into a fresh page-cache page,
// the cost the direct write avoided). The kernel writes back dirty cached
// pages of a range before a direct read of it, so bytes written either
// way read back alike whichever way they are read.
func (t *target) readBack(ctx context.Context, buf []byte, from, end int64) error {
	for from < end {
		t.mu.Lock()
		cachedTo, next := t.cached.reach(from), t.cached.next(from)
		t.mu.Unlock()
		var b []byte
		if cachedTo == from { // not in the cache: direct where it can
			b = t.readBackDirect(buf, from, min(end, next))
		}
		if b == nil {
			lim := min(end, next)
			if cachedTo > from {
				lim = min(end, cachedTo)
			}
			b = buf[:min(int64(len(buf)), lim-from)]
			if n, err := t.f.ReadAt(b, from); n < len(b) {
				if err == nil {
					err = io.ErrUnexpectedEOF
				}
				return fmt.Errorf("%s: reading back bytes %d-%d of %s: %w", t.Name, from, from+int64(len(b))-1, t.Part, err)
			}
		}
		t.h.Write(b)
		from += int64(len(b))
		if ctx.Err() != nil {
			return context.Cause(ctx)
		}
	}
	return nil
}

// readBackDirect reads the aligned blocks that hold the start of [from,
// end) with O_DIRECT into buf and returns their part in [from, end), or
// nil where it cannot: no direct descriptor, a buffer not aligned, a
// direct read that fails or comes short (the bytes are then read again
// through the page cache, which reports the error if there is one).
func (t *target) readBackDirect(buf []byte, from, end int64) []byte {
	if t.direct == nil || t.buffer.Load() || len(buf) < directAlign || !aligned(buf[:directAlign], 0) {
		return nil
	}
	a := from &^ (directAlign - 1)
	n := min(int64(len(buf))&^(directAlign-1), (end-a+directAlign-1)&^(directAlign-1))
	k, err := t.direct.ReadAt(buf[:n], a)
	want := min(end, a+n) - a
	if int64(k) < want || (err != nil && err != io.EOF) {
		return nil
	}
	return buf[from-a : want]
}

// discard removes a target's partial and journal.
func (t *target) discard() {
	t.io.Lock()
	defer t.io.Unlock()
	t.finished = true
	if t.f != nil {
		t.f.Close()
		t.f = nil
	}
	t.closeDirect()
	if t.j != nil {
		t.j.close()
		t.j = nil
	}
	os.Remove(t.Part)
	os.Remove(t.journalPath())
}

// finish syncs a complete, checked file and renames it into place.
func (t *target) finish(noSync bool) error {
	t.io.Lock()
	defer t.io.Unlock()
	t.finished = true
	var err error
	if !noSync {
		err = t.f.Sync()
	}
	if err == nil && t.dropped < t.Size {
		dropCache(t.f, t.dropped, t.Size) // synced: clean
	}
	if cerr := t.f.Close(); err == nil {
		err = cerr
	}
	t.f = nil
	t.closeDirect()
	t.j.close()
	t.j = nil
	if err == nil {
		err = os.Rename(t.Part, t.Dest)
	}
	if err == nil {
		err = syncDir(filepath.Dir(t.Dest))
	}
	if err != nil {
		return fmt.Errorf("%s: %w", t.Name, err)
	}
	t.complete = true
	return removeIfExists(t.journalPath())
}
