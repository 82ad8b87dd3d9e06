package remote

import (
	"context"
	"errors"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/gosafetensors/safetensors/internal/rangeread"
)

// errNoMulti tells ReadRuns to read a batch with single ranges: the server
// answered a multi-range request with a 200 (never used as data).
var errNoMulti = errors.New("server does not support multi-range requests")

// ReadRuns reads len(bufs[i]) bytes at offs[i] into bufs[i] for every i,
// with the context given to Open. Runs must be sorted and disjoint.
func (f *File) ReadRuns(bufs [][]byte, offs []int64) error {
	return f.ReadRunsContext(f.ctx, bufs, offs)
}

// ReadRunsContext is ReadRuns with its own context. Runs closer than the
// coalesce gap share a range ([WithCoalesceGap]); ranges are requested many
// at a time with multi-range requests (multipart/byteranges), each part of
// the answer checked against the ranges asked for. A server that answers a
// multi-range request with a 200 or with a single range is read with
// parallel single-range requests instead, and remembered as such.
func (f *File) ReadRunsContext(ctx context.Context, bufs [][]byte, offs []int64) error {
	if f.closed.Load() {
		return &Error{Name: f.name, Op: "read runs", Off: -1, Len: -1, Err: ErrClosed}
	}
	err := f.core.ReadRuns(ctx, bufs, offs)
	if errors.Is(err, rangeread.ErrInvalidRuns) {
		return &Error{Name: f.name, Op: "read runs", Off: -1, Len: -1, Err: err}
	}
	return err
}

// Prefetch fetches the byte ranges [offs[i], offs[i]+lens[i]) (in any
// order, overlapping or not, with the context given to Open) as ReadRuns
// would, and keeps them in memory
// (within the read-ahead cache's budget), so that reading them afterwards
// costs no request: a format reader about to read many small records at
// known offsets (every local header of a zip) announces them first.
func (f *File) Prefetch(offs, lens []int64) error {
	return f.PrefetchContext(f.ctx, offs, lens)
}

// PrefetchContext is Prefetch with its own context.
func (f *File) PrefetchContext(ctx context.Context, offs, lens []int64) error {
	if f.closed.Load() {
		return &Error{Name: f.name, Op: "prefetch", Off: -1, Len: -1, Err: ErrClosed}
	}
	err := f.core.Prefetch(ctx, offs, lens)
	if errors.Is(err, rangeread.ErrInvalidRuns) {
		return &Error{Name: f.name, Op: "prefetch", Off: -1, Len: -1, Err: err}
	}
	return err
}

// Coalescing gaps: below multipartGap a gap is cheaper to read than a
// multipart part's headers. Without multi-range requests every span is a
// request, and a request costs about as long as reading singleRangeGap
// bytes (a 40 ms round trip at 200 MB/s, shared by the 8 requests in
// flight): merging two spans saves a request and costs the gap, so gaps up
// to singleRangeGap are read rather than asked for separately. A column
// slice of a matrix is then a few requests, not one per row; an audit of a
// 10,000-tensor checkpoint of 1 GB, whose record headers lie 100 KB apart,
// one request that reads through the storages, not 10,000.
const (
	multipartGap   = 256
	singleRangeGap = 1 << 20
)

// backend is how the range-reader core fetches bytes of f.
type backend struct{ f *File }

// Fetch reads one span with one range request.
func (b backend) Fetch(ctx context.Context, s rangeread.Span) error {
	f := b.f
	rng := fmt.Sprintf("bytes=%d-%d", s.Off, s.End-1)
	r := &request{f: f, op: "read", off: s.Off, n: s.Len(), rng: rng}
	r.consume = func(resp *http.Response, body io.Reader) error {
		if err := f.checkRangeStatus(resp, rng); err != nil {
			return err
		}
		if err := f.checkPartRange(resp.Header.Get("Content-Range"), s); err != nil {
			return err
		}
		if resp.ContentLength >= 0 && resp.ContentLength != s.Len() {
			return protocolf("Content-Length %d for a %d-byte range", resp.ContentLength, s.Len())
		}
		return fillExact(body, s)
	}
	return f.conn.do(ctx, r)
}

// FetchMulti reads spans with multi-range requests, in parallel, and
// returns the spans the answers did not cover (all of them when
// multi-range requests are disabled or the server is known not to answer
// them). The first request to a server goes alone, with the configured
// limits; once a server has answered one well, its requests may carry far
// more ranges (see [multiLimits]), and one that refuses a Range header as
// too large is asked again with smaller ones.
func (b backend) FetchMulti(ctx context.Context, spans []rangeread.Span) ([]rangeread.Span, error) {
	f := b.f
	if !f.conn.cfg.multiRange {
		return spans, nil
	}
	var (
		mu       sync.Mutex
		leftover []rangeread.Span
	)
	for len(spans) > 0 && !f.conn.noMulti.Load() {
		ranges, hdrBytes, tried := f.conn.multi.limits()
		batches := batches(spans, ranges, hdrBytes)
		if !tried {
			batches = batches[:1] // one alone, until the server has answered one this long
		}
		var retry []rangeread.Span
		err := rangeread.Parallel(len(batches), f.conn.cfg.concurrency, func(i int) error {
			left, err := f.readBatch(ctx, batches[i])
			mu.Lock()
			defer mu.Unlock()
			if err != nil && f.conn.multi.tooLarge(err, len(rangeHeader(batches[i]))) {
				retry = append(retry, batches[i]...)
				return nil
			}
			leftover = append(leftover, left...)
			return err
		})
		if err != nil {
			return nil, err
		}
		n := 0
		for _, b := range batches {
			n += len(b)
		}
		spans = append(retry, spans[n:]...)
		sort.Slice(spans, func(i, j int) bool { return spans[i].Off < spans[j].Off })
	}
	leftover = append(leftover, spans...) // the server turned out not to answer them
	sort.Slice(leftover, func(i, j int) bool { return leftover[i].Off < leftover[j].Off })
	return leftover, nil
}

// Multi-range limits once a server has answered one multi-range request
// well: a Range header of up to 256 KiB (net/http servers accept 1 MiB of
// headers; nginx, Apache and most CDNs 8 to 16 KiB, and refuse more with
// 400, 413, 414 or 431, after which this package asks again with smaller
// ones and remembers).
const (
	grownRanges = 16384
	grownBytes  = 256 << 10
)

// multiLimits are the limits of one conn's multi-range requests, learned
// from its servers' answers. The configured limits hold until a server
// answers a multi-range request well; then they grow to grownRanges and
// grownBytes, unless set with [WithMultiRange] (fixed).
type multiLimits struct {
	mu             sync.Mutex
	ranges, bytes  int // current
	initBytes      int // configured
	good, refused  int // largest header answered well, smallest refused as too large
	fixed, started bool
}

func (m *multiLimits) init(ranges, bytes int, fixed bool) {
	m.ranges, m.bytes, m.initBytes, m.fixed, m.started = ranges, bytes, bytes, fixed, true
}

// limits returns the current limits and whether a request as long as they
// allow was answered well.
func (m *multiLimits) limits() (ranges, bytes int, tried bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.ranges, m.bytes, m.good > 0 && m.good >= m.bytes/2
}

// ok records a multi-range request of hdr header bytes answered well.
func (m *multiLimits) ok(hdr int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.good = max(m.good, hdr)
	if m.fixed {
		return
	}
	m.ranges, m.bytes = grownRanges, grownBytes
	if m.refused > 0 {
		m.bytes = max(m.good, min(m.bytes, m.refused/2))
	}
}

// tooLarge reports whether err refused a request of hdr header bytes that
// may have been too large, and if so makes the limits smaller: the
// request can then be sent again, split.
func (m *multiLimits) tooLarge(err error, hdr int) bool {
	var se *StatusError
	if !errors.As(err, &se) {
		return false
	}
	switch se.StatusCode {
	case http.StatusBadRequest, http.StatusRequestEntityTooLarge, http.StatusRequestURITooLong, http.StatusRequestHeaderFieldsTooLarge:
	default:
		return false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.fixed || hdr <= max(m.good, m.initBytes) {
		return false // not a matter of size
	}
	if m.refused == 0 || hdr < m.refused {
		m.refused = hdr
	}
	m.bytes = max(m.good, m.initBytes, min(m.bytes, m.refused/2))
	return true
}

// checkPartRange requires Content-Range to be exactly span s of this object.
func (f *File) checkPartRange(h string, s rangeread.Span) error {
	cr, err := parseContentRange(h)
	if err != nil {
		return protocolf("%v", err)
	}
	if cr.size != f.size {
		return changedf("size was %d, now %d", f.size, cr.size)
	}
	if cr.first != s.Off || cr.last != s.End-1 {
		return protocolf("asked for bytes %d-%d, got Content-Range %s", s.Off, s.End-1, cr)
	}
	return nil
}

// fillExact fills s from r and requires r to end right after it.
func fillExact(r io.Reader, s rangeread.Span) error {
	if err := rangeread.Fill(r, s); err != nil {
		return err
	}
	var one [1]byte
	if m, _ := r.Read(one[:]); m > 0 {
		return protocolf("body longer than the %d-byte range %d-%d", s.Len(), s.Off, s.End-1)
	}
	return nil
}

// batches groups spans into multi-range requests of at most maxRanges
// ranges and a Range header of at most maxBytes bytes.
func batches(spans []rangeread.Span, maxRanges, maxBytes int) [][]rangeread.Span {
	var out [][]rangeread.Span
	start, hdr := 0, len("bytes=")
	for i, s := range spans {
		n := len(strconv.FormatInt(s.Off, 10)) + len(strconv.FormatInt(s.End-1, 10)) + 2
		if i > start && (i-start >= maxRanges || hdr+n > maxBytes) {
			out = append(out, spans[start:i])
			start, hdr = i, len("bytes=")
		}
		hdr += n
	}
	return append(out, spans[start:])
}

func rangeHeader(spans []rangeread.Span) string {
	var b strings.Builder
	b.WriteString("bytes=")
	for i, s := range spans {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%d-%d", s.Off, s.End-1)
	}
	return b.String()
}

// readBatch reads spans with one multi-range request and returns the spans
// the answer did not cover (all of them when the server refused).
func (f *File) readBatch(ctx context.Context, spans []rangeread.Span) ([]rangeread.Span, error) {
	if len(spans) == 1 || f.conn.noMulti.Load() {
		return spans, nil
	}
	rng := rangeHeader(spans)
	var left []rangeread.Span
	r := &request{f: f, op: "read runs", off: spans[0].Off, n: spans[len(spans)-1].End - spans[0].Off, rng: rng}
	r.consume = func(resp *http.Response, body io.Reader) error {
		left = nil
		switch resp.StatusCode {
		case http.StatusPartialContent:
		case http.StatusOK:
			// The whole object: never read as data. Close it and fall back.
			f.conn.noMulti.Store(true)
			return permanent{errNoMulti}
		default:
			return f.checkRangeStatus(resp, rng)
		}
		if err := checkEncoding(resp); err != nil {
			return err
		}
		boundary, ok := isMultipart(resp)
		if !ok {
			return f.singleAnswer(resp, body, spans, &left)
		}
		seen := make([]bool, len(spans))
		mr := multipart.NewReader(body, boundary)
		for {
			part, err := mr.NextRawPart()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return fmt.Errorf("multipart/byteranges: %w", err)
			}
			i, err := f.matchPart(part.Header.Get("Content-Range"), spans, seen)
			if err != nil {
				return err
			}
			if err := fillExact(part, spans[i]); err != nil {
				return fmt.Errorf("part %d-%d: %w", spans[i].Off, spans[i].End-1, err)
			}
			seen[i] = true
		}
		for i, ok := range seen {
			if !ok {
				return fmt.Errorf("multipart/byteranges ended without bytes %d-%d: %w", spans[i].Off, spans[i].End-1, io.ErrUnexpectedEOF)
			}
		}
		f.conn.multi.ok(len(rng))
		return nil
	}
	err := f.conn.do(ctx, r)
	if errors.Is(err, errNoMulti) {
		return spans, nil
	}
	return left, err
}

// matchPart finds the span a part's Content-Range names exactly, once.
func (f *File) matchPart(h string, spans []rangeread.Span, seen []bool) (int, error) {
	cr, err := parseContentRange(h)
	if err != nil {
		return 0, protocolf("multipart part: %v", err)
	}
	if cr.size != f.size {
		return 0, changedf("size was %d, part says %d", f.size, cr.size)
	}
	for i, s := range spans {
		if cr.first == s.Off && cr.last == s.End-1 {
			if seen[i] {
				return 0, protocolf("multipart part %s sent twice", cr)
			}
			return i, nil
		}
	}
	return 0, protocolf("multipart part %s matches no range asked for", cr)
}

// singleAnswer handles a 206 with one range to a multi-range request: the
// server coalesced the ranges or served only some. Its bytes are used for
// the spans wholly inside its Content-Range when that range lies within the
// batch and is not much longer than those spans; the rest is left over.
func (f *File) singleAnswer(resp *http.Response, body io.Reader, spans []rangeread.Span, left *[]rangeread.Span) error {
	f.conn.noMulti.Store(true)
	cr, err := parseContentRange(resp.Header.Get("Content-Range"))
	if err != nil {
		return protocolf("%v", err)
	}
	if cr.size != f.size {
		return changedf("size was %d, now %d", f.size, cr.size)
	}
	if cr.first < spans[0].Off || cr.last >= spans[len(spans)-1].End {
		return protocolf("multi-range request for bytes %d-%d answered with %s", spans[0].Off, spans[len(spans)-1].End-1, cr)
	}
	var inside []rangeread.Piece
	var want int64
	for _, s := range spans {
		if s.Off >= cr.first && s.End-1 <= cr.last {
			inside = append(inside, s.Pieces...)
			want += s.Len()
		} else {
			*left = append(*left, s)
		}
	}
	n := cr.last - cr.first + 1
	if len(inside) == 0 || n > 2*want+64<<10 {
		*left = spans
		return nil // not worth reading: close it
	}
	if resp.ContentLength >= 0 && resp.ContentLength != n {
		return protocolf("Content-Length %d for %s", resp.ContentLength, cr)
	}
	all := rangeread.Span{Off: cr.first, End: cr.last + 1, Pieces: inside}
	return fillExact(body, all)
}
