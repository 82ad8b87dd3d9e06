package remote

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/gosafetensors/safetensors/internal/rangeread"
)

// Defaults of the options.
const (
	DefaultPrefetch      = 100_000 + 8 // first request: prefix plus a 100 kB header
	DefaultMaxAttempts   = 5
	DefaultRetryBudget   = 2 * time.Minute
	DefaultBackoff       = 250 * time.Millisecond
	DefaultMaxBackoff    = 10 * time.Second
	DefaultMaxRetryAfter = 30 * time.Second
	DefaultStallTimeout  = 30 * time.Second
	DefaultConcurrency   = 8
	DefaultMaxRanges     = 64   // ranges per multi-range request
	DefaultMaxRangeBytes = 4000 // length of a Range header value
	DefaultReadAhead     = 16 << 20
	maxPrefetch          = 64 << 20
)

// An Option configures [Open] and [NewHub]. Options reject invalid values
// with an error instead of silently clamping them, and none is silently
// ignored: the Hub's own ([WithEndpoint], [WithOffline]) given to Open are
// an error.
type Option func(*config) error

type config struct {
	client        *http.Client
	prefetch      int64
	maxAttempts   int
	retryBudget   time.Duration
	backoff       time.Duration
	maxBackoff    time.Duration
	maxRetryAfter time.Duration
	reqTimeout    time.Duration
	stallTimeout  time.Duration
	concurrency   int
	maxRanges     int
	maxRangeBytes int
	coalesceGap   int64
	readAhead     int64
	multiRange    bool
	multiFixed    bool // limits set by WithMultiRange: they do not grow
	userAgent     string
	trust         bool // read objects no validator pins

	// Hub
	endpoint string
	token    *string
	offline  *bool
}

func defaultConfig() config {
	return config{
		client:        http.DefaultClient,
		prefetch:      DefaultPrefetch,
		maxAttempts:   DefaultMaxAttempts,
		retryBudget:   DefaultRetryBudget,
		backoff:       DefaultBackoff,
		maxBackoff:    DefaultMaxBackoff,
		maxRetryAfter: DefaultMaxRetryAfter,
		stallTimeout:  DefaultStallTimeout,
		concurrency:   DefaultConcurrency,
		maxRanges:     DefaultMaxRanges,
		maxRangeBytes: DefaultMaxRangeBytes,
		readAhead:     DefaultReadAhead,
		multiRange:    true,
		userAgent:     "gosafetensors-remote/1",
	}
}

func buildConfig(opts []Option) (config, error) {
	c := defaultConfig()
	var errs []error
	for _, o := range opts {
		if o == nil {
			errs = append(errs, fmt.Errorf("remote: %w: nil Option", ErrOption))
			continue
		}
		if err := o(&c); err != nil {
			errs = append(errs, fmt.Errorf("%w (%w)", err, ErrOption))
		}
	}
	if c.backoff > c.maxBackoff {
		errs = append(errs, fmt.Errorf("remote: %w: backoff %v exceeds the maximum backoff %v", ErrOption, c.backoff, c.maxBackoff))
	}
	return c, errors.Join(errs...)
}

// WithClient sets the HTTP client (default http.DefaultClient). Its
// CheckRedirect is not used: redirects are followed by this package, which
// keeps Range and drops Authorization when the host changes.
func WithClient(c *http.Client) Option {
	return func(o *config) error {
		if c == nil {
			return errors.New("remote: WithClient(nil)")
		}
		o.client = c
		return nil
	}
}

// WithPrefetch sets the length of the first request, which learns the size
// of the object and is kept in memory (default [DefaultPrefetch]; 1 byte to
// 64 MiB).
func WithPrefetch(n int64) Option {
	return func(o *config) error {
		if n < 1 || n > maxPrefetch {
			return fmt.Errorf("remote: prefetch %d out of range [1, %d]", n, maxPrefetch)
		}
		o.prefetch = n
		return nil
	}
}

// WithRetries sets how many attempts a request gets in all (1 = no retry)
// and the total time they may take, backoff included.
func WithRetries(attempts int, budget time.Duration) Option {
	return func(o *config) error {
		if attempts < 1 || attempts > 100 {
			return fmt.Errorf("remote: attempts %d out of range [1, 100]", attempts)
		}
		if budget <= 0 {
			return fmt.Errorf("remote: retry budget %v must be positive", budget)
		}
		o.maxAttempts, o.retryBudget = attempts, budget
		return nil
	}
}

// WithBackoff sets the first retry delay and its cap; delays double from
// base up to max, with full jitter.
func WithBackoff(base, max time.Duration) Option {
	return func(o *config) error {
		if base <= 0 || max < base {
			return fmt.Errorf("remote: backoff base %v and max %v: need 0 < base <= max", base, max)
		}
		o.backoff, o.maxBackoff = base, max
		return nil
	}
}

// WithMaxRetryAfter caps how long a Retry-After header may make a request
// wait (default [DefaultMaxRetryAfter]); a longer wait fails the request.
func WithMaxRetryAfter(d time.Duration) Option {
	return func(o *config) error {
		if d < 0 {
			return fmt.Errorf("remote: max Retry-After %v is negative", d)
		}
		o.maxRetryAfter = d
		return nil
	}
}

// WithRequestTimeout bounds each attempt, from sending the request to the
// last body byte (default 0: no bound; the stall timeout still applies).
func WithRequestTimeout(d time.Duration) Option {
	return func(o *config) error {
		if d < 0 {
			return fmt.Errorf("remote: request timeout %v is negative", d)
		}
		o.reqTimeout = d
		return nil
	}
}

// WithStallTimeout fails an attempt when the server sends no response
// headers or no body bytes for d (default [DefaultStallTimeout]).
func WithStallTimeout(d time.Duration) Option {
	return func(o *config) error {
		if d <= 0 {
			return fmt.Errorf("remote: stall timeout %v must be positive", d)
		}
		o.stallTimeout = d
		return nil
	}
}

// WithConcurrency bounds the requests in flight for one File, or for all the
// files of one Hub (default [DefaultConcurrency]).
func WithConcurrency(n int) Option {
	return func(o *config) error {
		if n < 1 || n > 1024 {
			return fmt.Errorf("remote: concurrency %d out of range [1, 1024]", n)
		}
		o.concurrency = n
		return nil
	}
}

// WithMultiRange sets the limits of one multi-range request made by
// [File.ReadRuns]: at most ranges ranges and a Range header of at most
// headerBytes bytes. WithMultiRange(1, ...) disables multi-range requests.
// By default the limits are [DefaultMaxRanges] and [DefaultMaxRangeBytes]
// until a server has answered a multi-range request well, then up to 16,384
// ranges and 256 KiB (smaller again for a server that refuses them as too
// large); limits set with this option stay as they are.
func WithMultiRange(ranges, headerBytes int) Option {
	return func(o *config) error {
		if ranges < 1 || ranges > 10000 {
			return fmt.Errorf("remote: ranges per request %d out of range [1, 10000]", ranges)
		}
		if headerBytes < 64 || headerBytes > 64<<10 {
			return fmt.Errorf("remote: Range header limit %d out of range [64, 65536]", headerBytes)
		}
		o.maxRanges, o.maxRangeBytes = ranges, headerBytes
		o.multiRange, o.multiFixed = ranges > 1, true
		return nil
	}
}

// WithCoalesceGap makes [File.ReadRuns] read two runs with one range when at
// most gap bytes separate them (default 0: only touching runs are merged).
// Bytes in gaps are transferred and thrown away.
func WithCoalesceGap(gap int64) Option {
	return func(o *config) error {
		if gap < 0 || gap > 64<<20 {
			return fmt.Errorf("remote: coalesce gap %d out of range [0, 64 MiB]", gap)
		}
		o.coalesceGap = gap
		return nil
	}
}

// WithTrustUnvalidated(true) reads objects whose server sends no strong
// validator (no ETag but a weak one, no Last-Modified old enough to be
// strong) with more than one request, which is otherwise refused with
// [ErrNoValidator]: use it only for servers whose objects cannot change
// while they are read. A validator the server did send is still checked on
// every response: an object seen to change is [ErrObjectChanged] whatever
// this option says.
func WithTrustUnvalidated(trust bool) Option {
	return func(o *config) error {
		o.trust = trust
		return nil
	}
}

// WithReadAhead sets the largest window read ahead of a sequential reader
// (default [DefaultReadAhead]). A read that continues the previous one and
// misses fetches more than it asks for, twice as much as the stream's last
// miss, up to this window, and the first read near the end of the object
// fetches its last 256 KiB (an archive's end records and directory); what
// is read ahead is kept in memory (at most twice the window, plus 1 MiB)
// until it is read. 0 disables both: every read fetches exactly what it
// misses.
func WithReadAhead(window int64) Option {
	return func(o *config) error {
		if window < 0 || window > 1<<30 {
			return fmt.Errorf("remote: read-ahead %d out of range [0, 1 GiB]", window)
		}
		o.readAhead = window
		return nil
	}
}

// tailPrefetch is how much of an object's end the first read there
// fetches: the end records of an archive and a central directory of a few
// thousand entries.
const tailPrefetch = 256 << 10

// coreConfig is the range-reader configuration of an object.
func (c config) coreConfig(size int64, prefix []byte) rangeread.Config {
	multiGap := max(c.coalesceGap, multipartGap)
	tail := int64(tailPrefetch)
	if c.readAhead == 0 {
		tail = 0
	}
	return rangeread.Config{
		Size: size, Prefix: prefix, Concurrency: c.concurrency,
		Gap: max(c.coalesceGap, singleRangeGap), MultiGap: multiGap,
		ReadAhead: c.readAhead, Cache: 2*c.readAhead + 1<<20, Tail: tail,
	}
}

// WithUserAgent sets the User-Agent header.
func WithUserAgent(ua string) Option {
	return func(o *config) error {
		if ua == "" || strings.ContainsAny(ua, "\r\n") {
			return fmt.Errorf("remote: invalid User-Agent %q", ua)
		}
		o.userAgent = ua
		return nil
	}
}

// WithToken sets the bearer token sent as Authorization, only to the host of
// the URL given to [Open] (or the Hub endpoint), never after a redirect to
// another host. For a Hub it overrides HF_TOKEN and the token file; "" sends
// no token.
func WithToken(token string) Option {
	return func(o *config) error {
		if strings.ContainsAny(token, "\r\n") {
			return errors.New("remote: token contains a line break")
		}
		o.token = &token
		return nil
	}
}

// WithEndpoint sets the Hub endpoint (default HF_ENDPOINT, else
// https://huggingface.co). It configures [NewHub]; [Open], which reads the
// URL it is given, refuses it (ErrOption).
func WithEndpoint(endpoint string) Option {
	return func(o *config) error {
		u, err := url.Parse(endpoint)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
			return fmt.Errorf("remote: invalid Hub endpoint %q: want http(s)://host[/path]", endpoint)
		}
		o.endpoint = strings.TrimSuffix(u.String(), "/")
		return nil
	}
}

// WithOffline forbids (or allows) network access to the Hub, overriding
// HF_HUB_OFFLINE. It configures [NewHub]; [Open] refuses it (ErrOption).
func WithOffline(offline bool) Option {
	return func(o *config) error {
		o.offline = &offline
		return nil
	}
}
