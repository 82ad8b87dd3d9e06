package remote

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"sync/atomic"
	"time"

	redactpkg "github.com/gosafetensors/safetensors/internal/redact"
)

// Stats counts the HTTP traffic of a File (or of all files of a Hub).
type Stats struct {
	Requests int64 // HTTP round trips, redirects and retries included
	Retries  int64 // attempts repeated after a transient failure
	Bytes    int64 // response body bytes received (multipart framing included)
}

type counters struct {
	requests, retries, bytes atomic.Int64
}

func (c *counters) snapshot() Stats {
	return Stats{Requests: c.requests.Load(), Retries: c.retries.Load(), Bytes: c.bytes.Load()}
}

// conn is what files opened together share: configuration, client,
// concurrency bound, traffic counters and what was learned about servers.
type conn struct {
	cfg        config
	client     *http.Client
	sem        chan struct{}
	stats      counters
	authHost   string // host (with port) that receives the token
	authScheme string // and its scheme
	token      string
	noMulti    atomic.Bool  // a server answered a multi-range request badly
	multi      multiLimits  // what its servers accept in one multi-range request
	hint       atomic.Int64 // adaptive prefetch: largest header seen
}

func newConn(cfg config) *conn {
	cl := *cfg.client
	cl.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	c := &conn{cfg: cfg, client: &cl, sem: make(chan struct{}, cfg.concurrency)}
	c.multi.init(cfg.maxRanges, cfg.maxRangeBytes, cfg.multiFixed)
	return c
}

const maxRedirects = 10

// request describes one logical GET: where it starts, its headers and how
// its response is consumed. consume must read what it needs from body; it is
// called once per attempt.
type request struct {
	f       *File
	op      string
	off     int64
	n       int64
	rng     string // Range header value
	consume func(resp *http.Response, body io.Reader) error
}

// permanent marks an error that must not be retried.
type permanent struct{ err error }

func (p permanent) Error() string { return p.err.Error() }
func (p permanent) Unwrap() error { return p.err }

// retryAfterError carries a server's Retry-After.
type retryAfterError struct {
	*StatusError
	after time.Duration
}

func (e *retryAfterError) Unwrap() error { return e.StatusError }

// do runs r with retries and backoff, bounded in attempts and time.
func (c *conn) do(ctx context.Context, r *request) error {
	if r.op != "open" {
		if err := r.f.guard(); err != nil {
			return r.wrap(err)
		}
	}
	start := time.Now()
	var err error
	for attempt := 1; ; attempt++ {
		err = c.attempt(ctx, r)
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return r.wrap(fmt.Errorf("%w (%w)", context.Cause(ctx), err))
		}
		if !transient(err) {
			return r.wrap(err)
		}
		if attempt >= c.cfg.maxAttempts {
			return r.wrap(fmt.Errorf("gave up after %d attempts in %v: %w", attempt, time.Since(start).Round(time.Millisecond), err))
		}
		delay := c.backoff(attempt)
		var ra *retryAfterError
		if errors.As(err, &ra) && ra.after > 0 {
			if ra.after > c.cfg.maxRetryAfter {
				return r.wrap(fmt.Errorf("server asks to retry after %v, more than the %v allowed: %w", ra.after, c.cfg.maxRetryAfter, err))
			}
			delay = max(delay, ra.after)
		}
		if time.Since(start)+delay > c.cfg.retryBudget {
			return r.wrap(fmt.Errorf("gave up after %d attempts: the next retry would exceed the %v retry budget: %w", attempt, c.cfg.retryBudget, err))
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return r.wrap(fmt.Errorf("%w (%w)", context.Cause(ctx), err))
		case <-t.C:
		}
		c.stats.retries.Add(1)
		r.f.stats.retries.Add(1)
	}
}

func (r *request) wrap(err error) error {
	var p permanent
	for errors.As(err, &p) {
		err = p.err
	}
	return &Error{Name: r.f.name, Op: r.op, Off: r.off, Len: r.n, Err: err}
}

// backoff returns the full-jitter delay before retry number attempt.
func (c *conn) backoff(attempt int) time.Duration {
	d := c.cfg.backoff
	for i := 1; i < attempt && d < c.cfg.maxBackoff; i++ {
		d *= 2
	}
	d = min(d, c.cfg.maxBackoff)
	return d/2 + rand.N(d/2+1)
}

// transient reports whether err is worth another attempt: network failures,
// truncated bodies, timeouts, stalls, 429 and most 5xx. An error that says
// it is permanent (a method Permanent() bool, such as a dial a client's
// address policy refused) is not retried.
func transient(err error) bool {
	var p permanent
	var says interface{ Permanent() bool }
	if errors.As(err, &p) || errors.Is(err, ErrProtocol) || errors.Is(err, ErrObjectChanged) || errors.As(err, &says) && says.Permanent() {
		return false
	}
	var se *StatusError
	if errors.As(err, &se) {
		return se.Temporary()
	}
	return true
}

// attempt sends r once, following redirects, and lets r.consume read the
// final response. The stall watchdog and request timeout cover headers and
// body.
func (c *conn) attempt(ctx context.Context, r *request) error {
	select {
	case c.sem <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-c.sem }()

	actx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	if c.cfg.reqTimeout > 0 {
		var cancelT context.CancelFunc
		actx, cancelT = context.WithTimeoutCause(actx, c.cfg.reqTimeout,
			fmt.Errorf("request timeout %v: %w", c.cfg.reqTimeout, context.DeadlineExceeded))
		defer cancelT()
	}
	stall := fmt.Errorf("%w for %v (%w)", ErrStalled, c.cfg.stallTimeout, context.DeadlineExceeded)
	watchdog := time.AfterFunc(c.cfg.stallTimeout, func() { cancel(stall) })
	defer watchdog.Stop()

	resp, err := c.send(actx, r)
	if err != nil {
		return attemptError(actx, err)
	}
	defer resp.Body.Close()
	body := &progressReader{r: resp.Body, dog: watchdog, stall: c.cfg.stallTimeout, c1: &c.stats, c2: &r.f.stats}
	if err := r.f.checkIdentity(resp); err != nil {
		return err
	}
	if err := r.consume(resp, body); err != nil {
		return attemptError(actx, err)
	}
	return nil
}

// attemptError replaces the context.Canceled of an attempt cut short by the
// watchdog or the request timeout with the reason.
func attemptError(actx context.Context, err error) error {
	if actx.Err() != nil {
		if cause := context.Cause(actx); cause != nil && !errors.Is(err, cause) {
			return fmt.Errorf("%w: %v", cause, err)
		}
	}
	return err
}

// send issues the GET, following up to maxRedirects redirects itself: Range
// is kept, Authorization only goes to the token's host, If-Match only to the
// host that gave the ETag, and https never downgrades to http.
func (c *conn) send(ctx context.Context, r *request) (*http.Response, error) {
	f := r.f
	u := f.url
	fromFinal := false
	if fu := f.final.Load(); fu != nil {
		u, fromFinal = fu, true
	}
	for range maxRedirects + 1 {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
		if err != nil {
			return nil, permanent{err}
		}
		if r.rng != "" {
			req.Header.Set("Range", r.rng)
		}
		req.Header.Set("Accept-Encoding", "identity")
		req.Header.Set("User-Agent", c.cfg.userAgent)
		if c.token != "" && u.Host == c.authHost && u.Scheme == c.authScheme {
			req.Header.Set("Authorization", "Bearer "+c.token)
		}
		if u.Host == f.pinHost {
			switch {
			case strongETag(f.etag):
				req.Header.Set("If-Match", f.etag)
			case f.pinned == pinLastModified:
				req.Header.Set("If-Unmodified-Since", f.lastMod)
			}
		}
		c.stats.requests.Add(1)
		f.stats.requests.Add(1)
		resp, err := c.client.Do(req)
		if err != nil {
			// net/http's *url.Error quotes the request's URL whole: a
			// redirect's target is a signed URL whose query is a secret.
			// No error of this package carries it (internal/redact).
			var ue *url.Error
			if errors.As(err, &ue) {
				ue.URL = redact(u)
			}
			return nil, err
		}
		if err := f.checkLinked(resp.Header); err != nil {
			drain(resp)
			return nil, err
		}
		switch resp.StatusCode {
		case http.StatusMovedPermanently, http.StatusFound, http.StatusSeeOther, http.StatusTemporaryRedirect, http.StatusPermanentRedirect:
		default:
			if fromFinal && resp.StatusCode >= 400 && resp.StatusCode < 500 && resp.StatusCode != http.StatusTooManyRequests && resp.StatusCode != http.StatusPreconditionFailed && resp.StatusCode != http.StatusRequestedRangeNotSatisfiable {
				// A remembered redirect target (a signed URL) expired:
				// start again from the original URL.
				drain(resp)
				f.final.Store(nil)
				u, fromFinal = f.url, false
				continue
			}
			if u != f.url {
				f.final.Store(u)
			}
			return resp, nil
		}
		if f.onHop != nil {
			f.onHop(u, resp.Header)
		}
		loc := resp.Header.Get("Location")
		drain(resp)
		next, err := u.Parse(loc)
		if loc == "" || err != nil {
			return nil, protocolf("redirect %d from %s with invalid Location %q", resp.StatusCode, redact(u), loc)
		}
		if next.Scheme != "http" && next.Scheme != "https" {
			return nil, protocolf("redirect from %s to unsupported scheme %q", redact(u), next.Scheme)
		}
		if u.Scheme == "https" && next.Scheme == "http" {
			return nil, protocolf("redirect from %s downgrades https to http (%s)", redact(u), redact(next))
		}
		u = next
	}
	return nil, protocolf("more than %d redirects from %s", maxRedirects, redact(f.url))
}

// drain discards a little of a response body so the connection can be
// reused, then closes it.
func drain(resp *http.Response) {
	_, _ = io.CopyN(io.Discard, resp.Body, 4<<10)
	resp.Body.Close()
}

// statusError builds the error for an unexpected status.
func statusError(resp *http.Response) error {
	se := &StatusError{
		URL:        redact(resp.Request.URL),
		StatusCode: resp.StatusCode,
		Code:       resp.Header.Get("X-Error-Code"),
		Message:    resp.Header.Get("X-Error-Message"),
	}
	if resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusServiceUnavailable {
		if d, ok := parseRetryAfter(resp.Header.Get("Retry-After"), time.Now()); ok {
			return &retryAfterError{StatusError: se, after: d}
		}
	}
	return se
}

// parseRetryAfter reads delay-seconds or an HTTP date.
func parseRetryAfter(v string, now time.Time) (time.Duration, bool) {
	if v == "" {
		return 0, false
	}
	if n, err := strconv.ParseUint(v, 10, 32); err == nil {
		return time.Duration(n) * time.Second, true
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(t.Sub(now), 0), true
	}
	return 0, false
}

// minProgress is how many body bytes must arrive within each stall
// timeout: a server that trickles a byte at a time (slowloris) stalls
// as surely as one that sends nothing.
const minProgress = 16 << 10

// progressReader counts body bytes and feeds the stall watchdog, which it
// resets only once minProgress bytes have arrived since the last reset.
type progressReader struct {
	r      io.Reader
	dog    *time.Timer
	stall  time.Duration
	c1, c2 *counters
	since  int // bytes since the watchdog was last reset
}

func (p *progressReader) Read(b []byte) (int, error) {
	n, err := p.r.Read(b)
	if n > 0 {
		p.since += n
		if p.since >= minProgress {
			p.dog.Reset(p.stall)
			p.since = 0
		}
		p.c1.bytes.Add(int64(n))
		p.c2.bytes.Add(int64(n))
	}
	return n, err
}

// redact returns u as messages show it (internal/redact: no
// credentials, no secret query values).
func redact(u *url.URL) string { return redactpkg.URL(u) }
