// Package rangeread is the read path shared by remote objects (HTTP
// servers, the Hub, buckets): it serves reads of one object from the
// prefix its first request fetched, from a bounded cache of what later
// requests fetched, and from range requests made by a [Backend], so that a
// format reader's many small reads cost a few requests.
//
//   - Sequential reads (a pickle stream, a storage copied out) are detected
//     and read ahead with a window that doubles with every request the
//     stream needs, up to [Config.ReadAhead].
//   - The first read near the end of the object (a zip end record) fetches
//     the last [Config.Tail] bytes, where the end records and the central
//     directory of an archive live.
//   - Small reads and what was read ahead are kept in a cache bounded by
//     [Config.Cache] bytes (least recently used out first).
//   - Many runs at once ([Reader.ReadRuns]) are coalesced into spans, sent
//     many per request where the backend can ([MultiBackend]), else as
//     parallel single-range requests.
//
// A Reader trusts its backend to check that every response belongs to the
// object that was opened (its validator pinned); it only decides which
// ranges to ask for. Bytes served from the prefix or the cache were
// checked when they were fetched.
package rangeread

import (
	"context"
	"fmt"
	"io"
	"sort"
	"sync"
)

// Backend fetches byte ranges of one object.
type Backend interface {
	// Fetch fills the pieces of s with the object's bytes (the gaps
	// between them are read and dropped) with one request for
	// [s.Off, s.End), which lies inside the object.
	Fetch(ctx context.Context, s Span) error
}

// MultiBackend is a Backend that can fetch many spans with one request
// (HTTP multi-range requests).
type MultiBackend interface {
	Backend
	// FetchMulti fills as many of spans (sorted, disjoint) as it can with
	// as few requests as it can, and returns those it did not fill (all
	// of them when it cannot send multi-range requests), which the Reader
	// then fetches one by one.
	FetchMulti(ctx context.Context, spans []Span) (left []Span, err error)
}

// Config sets how a Reader reads. Zero values disable what they bound.
type Config struct {
	Size        int64  // the object's size
	Prefix      []byte // bytes [0, len(Prefix)) of the object, already fetched
	Concurrency int    // requests in flight for one ReadRuns (default 1)
	// Gap: runs at most Gap bytes apart are read with one single-range
	// request; MultiGap: with one part of a multi-range request.
	Gap, MultiGap int64
	// ReadAhead is the largest window read ahead of a sequential stream.
	ReadAhead int64
	// Cache bounds the bytes kept from earlier requests.
	Cache int64
	// Tail is how much of the object's end the first read there fetches.
	Tail int64
}

// Default tuning.
const (
	// smallRead: reads at most this long are kept in the cache (format
	// readers re-read their small records); longer ones are data.
	smallRead = 1 << 20
	streams   = 8
	// seqGap: a read starting this close after a stream's end continues
	// it (the gap is read with it).
	seqGap = 4 << 10
	// keepRun: read-ahead stops before a cached run this long, and reads
	// through shorter ones.
	keepRun = 64 << 10
)

// Reader reads one object through a Backend. It is safe for concurrent use.
type Reader struct {
	cfg Config
	be  Backend

	mu       sync.Mutex
	cache    cache
	streams  [streams]stream
	tick     uint64
	tailDone bool
}

// stream is one sequential reader of the object, as far as reads show.
type stream struct {
	start    int64 // where its first read started
	lo, next int64 // its last read started at lo; it has read up to next
	window   int64 // read ahead at its last miss
	last     uint64
}

// New returns a Reader of the object cfg describes, fetching through be.
func New(be Backend, cfg Config) *Reader {
	cfg.Concurrency = max(cfg.Concurrency, 1)
	cfg.Cache = max(cfg.Cache, 0)
	return &Reader{cfg: cfg, be: be, cache: cache{budget: cfg.Cache}}
}

// Size returns the object's size.
func (r *Reader) Size() int64 { return r.cfg.Size }

// ReadAt reads len(p) bytes at off (off >= 0), returning io.EOF with fewer
// bytes only at the end of the object. What the prefix and the cache hold
// costs no request; the rest costs one, read ahead when the read continues
// a stream and fetched with the object's tail when it is near its end.
func (r *Reader) ReadAt(ctx context.Context, p []byte, off int64) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	size := r.cfg.Size
	if off >= size {
		return 0, io.EOF
	}
	var eof error
	if int64(len(p)) > size-off {
		p, eof = p[:size-off], io.EOF
	}
	end := off + int64(len(p))
	n := 0
	if off < int64(len(r.cfg.Prefix)) {
		n = copy(p, r.cfg.Prefix[off:])
	}
	r.mu.Lock()
	if n < len(p) {
		n += r.cache.get(p[n:], off+int64(n))
	}
	m := 0 // bytes at the end of p held too, when worth a shorter fetch
	if n < len(p) {
		if m = r.cache.getBack(p[n:], end); m < keepRun && n+m < len(p) {
			m = 0 // a small island: fetched again, with the read-ahead
		}
	}
	var fa, fe int64
	missEnd := end - int64(m)
	if n+m < len(p) {
		fa, fe = r.plan(off, off+int64(n), missEnd, end)
	} else {
		r.track(off, end, false)
	}
	r.mu.Unlock()
	if n+m == len(p) {
		return len(p), eof
	}
	a := off + int64(n)
	miss := p[n : len(p)-m]
	s := Span{Off: fa, End: fe}
	var head, tail []byte
	if fa < a {
		head = make([]byte, a-fa)
		s.Pieces = append(s.Pieces, Piece{Buf: head, Off: fa})
	}
	s.Pieces = append(s.Pieces, Piece{Buf: miss, Off: a})
	if fe > missEnd {
		tail = make([]byte, fe-missEnd)
		s.Pieces = append(s.Pieces, Piece{Buf: tail, Off: missEnd})
	}
	if err := r.be.Fetch(ctx, s); err != nil {
		return n, err
	}
	r.mu.Lock()
	r.cache.put(head, fa, true)
	if len(miss) <= smallRead || fa < a { // metadata, or read with the tail
		r.cache.put(miss, a, false)
	}
	r.cache.put(tail, missEnd, true)
	r.mu.Unlock()
	return len(p), eof
}

// plan records a read of [off, end) that misses [a, missEnd) (the rest is
// held), and returns the range to fetch: at least [a, missEnd), read ahead
// for a stream (when the read's end was not held), the tail for a first
// read near the end. r.mu is held.
func (r *Reader) plan(off, a, missEnd, end int64) (fa, fe int64) {
	size := r.cfg.Size
	fa, fe = a, missEnd
	if s := r.track(off, end, true); s != nil && r.cfg.ReadAhead > 0 && missEnd == end {
		fe = max(fe, min(a+s.window, size))
	}
	if !r.tailDone && r.cfg.Tail > 0 && end > size-r.cfg.Tail {
		r.tailDone = true
		fa = min(fa, max(size-r.cfg.Tail, int64(len(r.cfg.Prefix))))
		if missEnd == end {
			fe = size
		}
	}
	// Do not fetch again what the cache holds after the read, unless it is
	// a small island (prefetched record headers between storages): that is
	// cheaper read again than cut around.
	if fe > missEnd {
		fe = max(missEnd, r.cache.nextCached(missEnd, fe, keepRun))
	}
	return fa, fe
}

// track records a read of [off, end) and returns the stream it continues
// (a read that starts inside the stream's last read or at most seqGap
// bytes after its end: the records of an archive have headers between
// them), its window grown when the read missed, or nil for a read that
// starts a new stream. A stream's window is at most twice what it has read
// so far, and doubles with each miss: a stream of a few small reads
// (a record header, then its name) reads ahead next to nothing, a long one
// (a pickle, a storage copied out) ever larger ranges, so that what is read
// ahead and never used is at most about what was used. r.mu is held.
func (r *Reader) track(off, end int64, missed bool) *stream {
	r.tick++
	oldest := 0
	for i := range r.streams {
		s := &r.streams[i]
		if s.last > 0 && off >= s.lo && off <= s.next+seqGap {
			s.lo, s.next, s.last = off, max(s.next, end), r.tick
			if missed {
				s.window = min(max(2*s.window, 2*(s.next-s.start)), r.cfg.ReadAhead)
			}
			return s
		}
		if s.last < r.streams[oldest].last {
			oldest = i
		}
	}
	r.streams[oldest] = stream{start: off, lo: off, next: end, last: r.tick}
	return nil
}

// Prefetcher is implemented by readers for which fetching many ranges at
// once is much cheaper than one by one (a remote object): a format reader
// about to read many small records at known offsets (the local headers of
// a zip, the storage headers of a legacy checkpoint) announces them, and
// its later reads of them cost nothing.
type Prefetcher interface {
	// Prefetch fetches the ranges [offs[i], offs[i]+lens[i]) (any order,
	// overlaps allowed, clipped to the object) so that reads inside them
	// cost no request, with the context of the reader's ReadAt. An error
	// only means that they were not fetched: the reads then fetch what
	// they need themselves.
	Prefetch(offs, lens []int64) error
}

// Prefetch announces ranges to r if it is a [Prefetcher], and does nothing
// otherwise (a local file reads them as cheaply one by one). Its error is
// deliberately dropped: the reads that follow fetch what is missing and
// report their own errors.
func Prefetch(r io.ReaderAt, offs, lens []int64) {
	if p, ok := r.(Prefetcher); ok {
		_ = p.Prefetch(offs, lens)
	}
}

// Prefetch fetches ranges as [Prefetcher] says, with ctx: the ranges not
// already held are coalesced and fetched as ReadRuns does, and kept in the
// cache (as far as its budget allows).
func (r *Reader) Prefetch(ctx context.Context, offs, lens []int64) error {
	if len(offs) != len(lens) {
		return fmt.Errorf("%w: %d offsets but %d lengths", ErrInvalidRuns, len(offs), len(lens))
	}
	// Decide on offsets what to fetch (not what the cache holds whole,
	// within half its budget) before allocating anything.
	rs := clipRanges(offs, lens, int64(len(r.cfg.Prefix)), r.cfg.Size)
	var total int64
	kept := make([]Piece, 0, len(rs))
	r.mu.Lock()
	for _, x := range rs {
		n := x[1] - x[0]
		if r.cache.covered(x[0], n) < n && total+n <= r.cfg.Cache/2 {
			kept = append(kept, Piece{Off: x[0], Buf: make([]byte, n)})
			total += n
		}
	}
	r.mu.Unlock()
	if len(kept) == 0 {
		return nil
	}
	bufs, starts := make([][]byte, len(kept)), make([]int64, len(kept))
	for i, p := range kept {
		bufs[i], starts[i] = p.Buf, p.Off
	}
	if err := r.ReadRuns(ctx, bufs, starts); err != nil {
		return err
	}
	r.mu.Lock()
	r.cache.putMany(kept, true)
	r.mu.Unlock()
	return nil
}

// clipRanges returns the ranges [offs[i], offs[i]+lens[i]) clipped to
// [lo, size), the empty and the negative ones dropped, sorted and merged
// where they overlap or touch, as [start, end) pairs. Ranges are merged as
// offsets before any buffer exists, so no buffer is ever grown past what it
// was made for.
func clipRanges(offs, lens []int64, lo, size int64) [][2]int64 {
	rs := make([][2]int64, 0, len(offs))
	for i, off := range offs {
		n := lens[i]
		if off < 0 || n <= 0 || off >= size {
			continue
		}
		a, b := max(off, lo), size
		if n < size-off { // off+n without overflow
			b = off + n
		}
		if a < b {
			rs = append(rs, [2]int64{a, b})
		}
	}
	sort.Slice(rs, func(i, j int) bool { return rs[i][0] < rs[j][0] })
	merged := rs[:0]
	for _, x := range rs {
		if n := len(merged); n > 0 && x[0] <= merged[n-1][1] {
			merged[n-1][1] = max(merged[n-1][1], x[1])
			continue
		}
		merged = append(merged, x)
	}
	return merged
}

// ReadRuns reads len(bufs[i]) bytes at offs[i] into bufs[i] for every i;
// runs must be sorted and disjoint. What the prefix and the cache hold is
// copied; the rest is coalesced into spans (runs closer than the gap share
// one), fetched many per request where the backend can, else with parallel
// single-range requests.
func (r *Reader) ReadRuns(ctx context.Context, bufs [][]byte, offs []int64) error {
	pieces, err := Check(bufs, offs, r.cfg.Size)
	if err != nil {
		return err
	}
	rest := pieces[:0]
	r.mu.Lock()
	for _, p := range pieces {
		n := 0
		if p.Off < int64(len(r.cfg.Prefix)) {
			n = copy(p.Buf, r.cfg.Prefix[p.Off:])
		}
		if n < len(p.Buf) {
			n += r.cache.get(p.Buf[n:], p.Off+int64(n))
		}
		if n < len(p.Buf) {
			rest = append(rest, Piece{Buf: p.Buf[n:], Off: p.Off + int64(n)})
		}
	}
	r.mu.Unlock()
	if len(rest) == 0 {
		return nil
	}
	if mb, ok := r.be.(MultiBackend); ok {
		if spans := Plan(rest, r.cfg.MultiGap, 0); len(spans) > 1 {
			left, err := mb.FetchMulti(ctx, spans)
			if err != nil {
				return err
			}
			rest = rest[:0]
			for _, s := range left {
				rest = append(rest, s.Pieces...)
			}
		}
	}
	spans := Plan(rest, r.cfg.Gap, 0)
	return Parallel(len(spans), r.cfg.Concurrency, func(i int) error {
		return r.be.Fetch(ctx, spans[i])
	})
}
