package download

import (
	"context"
	"net/http/httptrace"
	"sync"
	"sync/atomic"
	"time"
)

// Ranges sized to the link. A request of c bytes on a connection that
// moves rate bytes per second, with lat from the request sent to its
// first byte back, takes lat + c/rate: its latency is a share s of it
// when c = lat·rate·(1−s)/s, the bandwidth-delay product times
// (1−s)/s. When the caller did not choose a chunk size, the engine
// measures every range request (latency and rate) and sizes the next
// ranges so that the latency is at most latencyShare of a request's
// time, from the default chunk up to maxLinkChunk. On a link with
// negligible latency (loopback, a LAN) that is the default chunk.
//
// What a kill can lose does not grow with the ranges: it is bounded by
// the throttle (half a default chunk per connection written and not
// journalled) and the stream buffer, which stay as they are.
const (
	latencyShare = 0.03
	maxLinkChunk = 64 << 20
	linkChunkRnd = 1 << 20 // sizes are whole MiB: every 1 MiB piece of a range stays aligned for O_DIRECT
)

// linkChunk is the range size for a link of latency lat (seconds) and
// per-connection rate (bytes per second): the smallest whole MiB that
// keeps lat at most latencyShare of a request's time, clamped to [base,
// max(base, maxLinkChunk)]. An unmeasured link (lat or rate 0) gets base.
func linkChunk(base int64, lat, rate float64) int64 {
	if lat <= 0 || rate <= 0 {
		return base
	}
	want := lat * rate * (1 - latencyShare) / latencyShare
	if want >= maxLinkChunk {
		return max(base, maxLinkChunk)
	}
	c := (int64(want) + linkChunkRnd - 1) / linkChunkRnd * linkChunkRnd
	return min(max(c, base), max(base, maxLinkChunk))
}

// sizer keeps what requests measured and the chunk it gives. The
// link's latency is the least seen, the opens' requests (made before any
// transfer) included: what a request waits beyond it is queueing on a
// busy machine (2-80 ms on the uncapped loopback benchmark, where the CPU
// is the bound), which larger ranges would not help — the other
// connections use the time. The rate is the bytes over the time of the
// bodies, both sums weighted towards the latest request (a quarter): a
// body that came in a burst from socket buffers does not make the link
// look faster than it is.
type sizer struct {
	base  int64
	chunk atomic.Int64 // linkChunk(base, lat, rate), read by the planner

	mu          sync.Mutex
	lat         float64 // seconds
	bytes, secs float64 // of the bodies
}

func newSizer(base int64) *sizer {
	s := &sizer{base: base}
	s.chunk.Store(base)
	return s
}

// observe records a request: lat from sent to first byte, then n bytes
// in body (n 0: the latency only, an open's). A short body (under a
// MiB, or the chunk if less) tells the latency, not the rate.
func (s *sizer) observe(lat time.Duration, n int64, body time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if v := lat.Seconds(); v > 0 && (s.lat == 0 || v < s.lat) {
		s.lat = v
	}
	if n >= min(s.base, 1<<20) && body > 0 {
		s.bytes = s.bytes*3/4 + float64(n)
		s.secs = s.secs*3/4 + body.Seconds()
	}
	rate := 0.0
	if s.secs > 0 {
		rate = s.bytes / s.secs
	}
	s.chunk.Store(linkChunk(s.base, s.lat, rate))
}

// reqClock times the requests of one call through net/http/httptrace
// (transport goroutines call the hooks, hence the atomics): the least
// latency of its requests (redirects and retries included: each is
// written, then answered), and when the first byte of the last answer
// came, for the body's time — known only if one request was sent.
type reqClock struct {
	sent, first atomic.Int64 // UnixNano
	lat         atomic.Int64 // the least latency, ns; 0: none yet
	sends       atomic.Int32
}

func (c *reqClock) trace(ctx context.Context) context.Context {
	return httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		WroteRequest: func(httptrace.WroteRequestInfo) {
			c.sends.Add(1)
			c.sent.Store(time.Now().UnixNano())
		},
		GotFirstResponseByte: func() {
			now := time.Now().UnixNano()
			c.first.Store(now)
			sent := c.sent.Load()
			if sent == 0 || now <= sent {
				return
			}
			for d := now - sent; ; {
				old := c.lat.Load()
				if old != 0 && old <= d || c.lat.CompareAndSwap(old, d) {
					return
				}
			}
		},
	})
}

// measure reports the least latency and, if one request was sent, the
// time of its body, ended at end (else 0).
func (c *reqClock) measure(end time.Time) (lat, body time.Duration) {
	lat = time.Duration(c.lat.Load())
	if first := c.first.Load(); c.sends.Load() == 1 && first > 0 {
		body = time.Duration(end.UnixNano() - first)
	}
	return lat, body
}
