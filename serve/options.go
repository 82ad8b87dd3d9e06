package serve

import (
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"strings"
	"time"

	"github.com/gosafetensors/safetensors"
	"github.com/gosafetensors/safetensors/audit"
	"github.com/gosafetensors/safetensors/source"
	"github.com/gosafetensors/safetensors/torch"
)

// ErrOption is wrapped by the error New returns for an invalid option. It
// is safetensors.ErrOption, the sentinel every package of the module
// wraps.
var ErrOption = safetensors.ErrOption

// Limits bound what one request and the whole service may cost. Start from
// [DefaultLimits] and change what you need; every field must be positive
// but DrainDelay and MaxExpansionRatio, which may be 0.
type Limits struct {
	MaxUploadBytes   int64         // an uploaded file (413 past it)
	MaxJSONBodyBytes int64         // a JSON request body
	MaxConcurrent    int           // audits running at once
	MaxQueued        int           // audits waiting for a slot; past that, 503 with Retry-After
	AuditTimeout     time.Duration // one audit, from admission to the last report
	// MaxModelHeader bounds a safetensors header (decompressed, for a
	// compressed file; each shard's, for a sharded model), checked from
	// its 8-byte length before it is read: parsing costs about 10 times
	// the header in memory, and a few MB of compressed upload can carry a
	// 100 MB header. Past it: 413 from /v1/inspect, verdict error from
	// /v1/scan.
	MaxModelHeader int64
	// MaxExpandedBytes and MaxExpansionRatio bound what one compressed
	// file may decompress to: at most MaxExpandedBytes, and at most
	// MaxExpansionRatio times its compressed size plus
	// source.ExpansionSlack (64 MiB; ratio 0: no ratio bound). An audit
	// decompresses a compressed file whole to check it (every frame against
	// its checksum), so without a bound a 100 KB upload of zeros is 1.1 GB
	// of work. The size is in the container's table, so a file past the
	// bound is refused before any of it is decompressed: 413 from
	// /v1/inspect, verdict error from /v1/scan.
	MaxExpandedBytes  int64
	MaxExpansionRatio int64
	// Scan bounds the work and memory of the checkpoint scanner on one
	// file (the pickle machine's caps).
	Scan torch.Limits
	// ReadHeaderTimeout bounds how long a client may take to send its
	// request headers (slowloris).
	ReadHeaderTimeout time.Duration
	// BodyIdleTimeout bounds a pause in an upload, and MinUploadRate
	// (bytes per second, averaged after the first BodyIdleTimeout) its
	// pace: a client that trickles a body is cut off.
	BodyIdleTimeout time.Duration
	MinUploadRate   int64
	// WriteIdleTimeout bounds how long a client may leave a response
	// unread.
	WriteIdleTimeout time.Duration
	IdleTimeout      time.Duration // a keep-alive connection without a request
	MaxHeaderBytes   int
	// DrainDelay is how long the service goes on accepting connections
	// once a drain starts, answering /healthz with 503 "draining" and
	// every other request as before, so that load balancers see it fail
	// and stop sending before the listener closes (Kubernetes removes a
	// terminating pod from its Service's endpoints while SIGTERM is
	// delivered, and proxies learn it a few seconds later). 0 (the
	// default) closes the listener at once.
	DrainDelay time.Duration
	// DrainTimeout bounds how long a SIGTERM waits for audits in flight,
	// once the listener is closed.
	DrainTimeout time.Duration
}

// DefaultMaxModelHeader is [Limits.MaxModelHeader]'s default, 16 MiB:
// about 100,000 tensors in one file (real models' headers are a few
// hundred KiB per shard), about 160 MB of memory to parse.
const DefaultMaxModelHeader = 16 << 20

// DefaultMaxExpansionRatio is [Limits.MaxExpansionRatio]'s default: 32
// times, where weights compress 1.3 to 2 times.
const DefaultMaxExpansionRatio = 32

// DefaultLimits returns the limits New uses without [WithLimits].
func DefaultLimits() Limits {
	return Limits{
		MaxUploadBytes:    8 << 30,
		MaxJSONBodyBytes:  64 << 10,
		MaxConcurrent:     4,
		MaxQueued:         32,
		AuditTimeout:      5 * time.Minute,
		MaxModelHeader:    DefaultMaxModelHeader,
		MaxExpandedBytes:  16 << 30, // twice MaxUploadBytes: an upload compressed 2 times
		MaxExpansionRatio: DefaultMaxExpansionRatio,
		Scan:              torch.DefaultLimits(),
		ReadHeaderTimeout: 10 * time.Second,
		BodyIdleTimeout:   30 * time.Second,
		MinUploadRate:     64 << 10,
		WriteIdleTimeout:  30 * time.Second,
		IdleTimeout:       60 * time.Second,
		MaxHeaderBytes:    64 << 10,
		DrainTimeout:      30 * time.Second,
	}
}

// AuditOptions are the options an audit within l takes: the header and
// decompression bounds (their errors name the service's flags: --max-header,
// --max-expanded, --max-expansion) and the scanner's caps. The service's
// own audits use them, and so do the audits of a queue worker
// (queue.WithAudit), so that an object is held to the same bounds however
// it arrives. Counters, clients and roots are the caller's to add.
func (l Limits) AuditOptions() []audit.Option {
	return []audit.Option{audit.WithSource(l.sourceOptions()...), audit.WithTorch(torch.WithLimits(l.Scan))}
}

// sourceOptions are the bounds of l on opening a model.
func (l Limits) sourceOptions() []source.Option {
	return []source.Option{
		source.WithMaxHeaderSize(l.MaxModelHeader, "set by the service's --max-header"),
		source.WithMaxExpanded(l.MaxExpandedBytes, l.MaxExpansionRatio, "set by the service's --max-expanded and --max-expansion"),
	}
}

func (l *Limits) validate() error {
	var errs []error
	for name, v := range map[string]int64{
		"MaxUploadBytes": l.MaxUploadBytes, "MaxJSONBodyBytes": l.MaxJSONBodyBytes,
		"MaxConcurrent": int64(l.MaxConcurrent), "MaxQueued": int64(l.MaxQueued),
		"AuditTimeout": int64(l.AuditTimeout), "MaxModelHeader": l.MaxModelHeader, "MaxExpandedBytes": l.MaxExpandedBytes, "ReadHeaderTimeout": int64(l.ReadHeaderTimeout),
		"BodyIdleTimeout": int64(l.BodyIdleTimeout), "MinUploadRate": l.MinUploadRate,
		"WriteIdleTimeout": int64(l.WriteIdleTimeout), "IdleTimeout": int64(l.IdleTimeout),
		"MaxHeaderBytes": int64(l.MaxHeaderBytes), "DrainTimeout": int64(l.DrainTimeout),
	} {
		if v < 1 {
			errs = append(errs, fmt.Errorf("limit %s is %d, want at least 1", name, v))
		}
	}
	if l.MaxExpansionRatio < 0 {
		errs = append(errs, fmt.Errorf("limit MaxExpansionRatio is %d, want 0 or more", l.MaxExpansionRatio))
	}
	if l.DrainDelay < 0 {
		errs = append(errs, fmt.Errorf("limit DrainDelay is %v, want 0 or more", l.DrainDelay))
	}
	return errors.Join(errs...)
}

// Option configures New. An invalid value makes New fail with an error
// wrapping [ErrOption].
type Option func(*config) error

type config struct {
	root         string
	token        string
	hasToken     bool
	patterns     []*pattern
	allow        []netip.Prefix
	limits       Limits
	logger       *slog.Logger
	spoolDir     string
	hfToken      *string
	hfEnd        string
	trustHTTP    bool
	hubCDN       []*pattern
	hubCDNSet    bool
	secureCookie bool
}

// WithRoot allows local paths, relative to dir and confined to it
// (os.Root: neither ".." nor a symbolic link leads out).
func WithRoot(dir string) Option {
	return func(c *config) error {
		st, err := os.Stat(dir)
		if err != nil {
			return err
		}
		if !st.IsDir() {
			return fmt.Errorf("root %s is not a directory", dir)
		}
		c.root = dir
		return nil
	}
}

// WithToken requires Authorization: Bearer TOKEN on every endpoint but
// /healthz. The token must be at least 16 characters.
func WithToken(token string) Option {
	return func(c *config) error {
		if len(token) < 16 || strings.ContainsAny(token, " \t\r\n") {
			return errors.New("the token must be at least 16 characters without white space")
		}
		c.token, c.hasToken = token, true
		return nil
	}
}

// WithAllowLocations allows remote locations matching any of the patterns
// (SCHEME://HOST/PATH with globs: see the documentation); without any,
// only uploads and paths under the root are audited.
func WithAllowLocations(patterns ...string) Option {
	return func(c *config) error {
		for _, s := range patterns {
			p, err := parsePattern(s)
			if err != nil {
				return err
			}
			c.patterns = append(c.patterns, p)
		}
		return nil
	}
}

// WithAllowAddresses lets the service connect to addresses in the given
// prefixes although they are loopback, private or link-local (a model
// mirror on the internal network, a test server on 127.0.0.1).
func WithAllowAddresses(prefixes ...netip.Prefix) Option {
	return func(c *config) error {
		for _, p := range prefixes {
			if !p.IsValid() {
				return fmt.Errorf("invalid address prefix %v", p)
			}
		}
		c.allow = append(c.allow, prefixes...)
		return nil
	}
}

// WithLimits replaces [DefaultLimits].
func WithLimits(l Limits) Option {
	return func(c *config) error {
		if err := l.validate(); err != nil {
			return err
		}
		c.limits = l
		return nil
	}
}

// WithLogger sets the structured logger (default: JSON lines on stderr).
func WithLogger(l *slog.Logger) Option {
	return func(c *config) error {
		if l == nil {
			return errors.New("WithLogger(nil)")
		}
		c.logger = l
		return nil
	}
}

// WithSpoolDir sets where uploads are spooled (default os.TempDir()).
func WithSpoolDir(dir string) Option {
	return func(c *config) error {
		if st, err := os.Stat(dir); err != nil || !st.IsDir() {
			return fmt.Errorf("spool directory %s: not a directory (%v)", dir, err)
		}
		c.spoolDir = dir
		return nil
	}
}

// WithHub sets the Hugging Face Hub endpoint and token for hf://
// locations (default HF_ENDPOINT and the usual token sources). The token
// is sent to the endpoint only, never shown.
func WithHub(endpoint, token string) Option {
	return func(c *config) error { c.hfEnd, c.hfToken = endpoint, &token; return nil }
}

// WithTrustUnvalidated lets remote reads that need more than one request
// go on against servers that pin nothing (no strong ETag), as the CLI's
// --trust-server does.
func WithTrustUnvalidated(trust bool) Option {
	return func(c *config) error { c.trustHTTP = trust; return nil }
}

// WithHubRedirects replaces [DefaultHubRedirects]: the http(s) patterns
// (the syntax of [WithAllowLocations]; a URL's query is not matched) that
// the Hub's redirects may reach for an allowed Hub location, besides the
// Hub's endpoint itself. Every other URL the service requests on a
// location's behalf must match an --allow-location pattern. No patterns:
// the Hub's redirects may go nowhere but the endpoint.
func WithHubRedirects(patterns ...string) Option {
	return func(c *config) error {
		c.hubCDN, c.hubCDNSet = nil, true
		for _, s := range patterns {
			p, err := parseHubRedirect(s)
			if err != nil {
				return err
			}
			c.hubCDN = append(c.hubCDN, p)
		}
		return nil
	}
}

func parseHubRedirect(s string) (*pattern, error) {
	p, err := parsePattern(s)
	if err != nil {
		return nil, fmt.Errorf("hub redirect %w", err)
	}
	if p.scheme != "http" && p.scheme != "https" {
		return nil, fmt.Errorf("hub redirect pattern %q: want an http(s) pattern", s)
	}
	return p, nil
}

// WithSecureCookie marks the viewer's session cookie Secure although the
// service itself is not served over TLS: a reverse proxy terminates TLS in
// front of it. (X-Forwarded-Proto is not trusted: any client can send it.)
func WithSecureCookie(secure bool) Option {
	return func(c *config) error { c.secureCookie = secure; return nil }
}
