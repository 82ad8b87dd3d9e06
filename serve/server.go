// Package serve is the HTTP audit service of `safetensors serve`: POST a
// file (or name a location) to /v1/scan and get what `safetensors scan
// --json` prints for it, GET /v1/inspect for what `inspect --json`
// prints, a viewer page at / that shows a model like the Hugging Face
// Hub's, /healthz and Prometheus /metrics.
//
// Every input is hostile. The service authenticates (a bearer token),
// reads only the locations its operator allowed (--allow-location
// patterns; local paths only inside a root, through os.Root), never
// connects to loopback, link-local (the cloud metadata address), private
// or unspecified addresses unless allowed explicitly (checked on the
// address actually dialled, after DNS resolution, on every redirect),
// bounds uploads, concurrent audits, time, memory and slow clients, answers
// 503 with Retry-After when full, never logs or returns a token, and drains
// on shutdown. The verdicts are the audit package's, the same as the CLI's.
package serve

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"sync/atomic"
	"time"

	"github.com/gosafetensors/safetensors/audit"
	"github.com/gosafetensors/safetensors/remote"
	"github.com/gosafetensors/safetensors/remote/blobstore"
	"github.com/gosafetensors/safetensors/source"
)

// Server is the audit service. Make one with [New]; serve it with
// [Server.Serve] or mount [Server.Handler].
type Server struct {
	cfg       config
	root      *os.Root
	locs      locationPolicy
	addrs     *addrPolicy
	reach     *reachPolicy
	hub       *remote.Hub
	pool      *blobstore.Pool // one client per bucket, for the server's life
	srcOpts   []source.Option
	auditOpts []audit.Option
	m         *metrics
	log       *slog.Logger
	handler   http.Handler

	admit    chan struct{} // admitted audits: running or waiting
	run      chan struct{} // running audits
	draining atomic.Bool
	endDelay chan struct{} // closed by tests to end Limits.DrainDelay early

	tokenSum [32]byte // SHA-256 of the token, compared in constant time
	sessions *sessions
}

// New makes a server. Without [WithToken] every endpoint is open; the
// caller (the CLI) refuses to bind a non-loopback address then.
func New(opts ...Option) (*Server, error) {
	c := config{limits: DefaultLimits(), spoolDir: os.TempDir()}
	var errs []error
	for _, o := range opts {
		if o == nil {
			errs = append(errs, errors.New("nil Option"))
			continue
		}
		if err := o(&c); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("serve: %w: %w", ErrOption, err)
	}
	if c.logger == nil {
		c.logger = slog.New(slog.NewJSONHandler(os.Stderr, nil))
	}
	s := &Server{cfg: c, log: c.logger, m: newMetrics(), addrs: &addrPolicy{allow: c.allow}}
	s.locs = locationPolicy{patterns: c.patterns, root: c.root != ""}
	s.admit = make(chan struct{}, c.limits.MaxConcurrent+c.limits.MaxQueued)
	s.run = make(chan struct{}, c.limits.MaxConcurrent)
	if c.hasToken {
		s.tokenSum = sha256.Sum256([]byte(c.token))
		s.sessions = newSessions()
	}

	remoteBytes := s.m.bytesRead.WithLabelValues("remote")
	s.reach = &reachPolicy{patterns: c.patterns, hubCDN: c.hubCDN}
	if !c.hubCDNSet {
		for _, h := range DefaultHubRedirects {
			p, err := parseHubRedirect(h)
			if err != nil {
				return nil, fmt.Errorf("serve: %w", err)
			}
			s.reach.hubCDN = append(s.reach.hubCDN, p)
		}
	}
	client := s.addrs.client(func(n int) { remoteBytes.Add(float64(n)) }, s.reach)
	ropts := []remote.Option{remote.WithClient(client), remote.WithTrustUnvalidated(c.trustHTTP)}
	hopts := append([]remote.Option{}, ropts...)
	if c.hfEnd != "" {
		hopts = append(hopts, remote.WithEndpoint(c.hfEnd))
	}
	if c.hfToken != nil {
		hopts = append(hopts, remote.WithToken(*c.hfToken))
	}
	hub, err := remote.NewHub(hopts...)
	if err != nil {
		return nil, fmt.Errorf("serve: %w", err)
	}
	s.hub = hub
	if s.reach.endpoint, err = url.Parse(hub.Endpoint()); err != nil {
		return nil, fmt.Errorf("serve: Hub endpoint: %w", err)
	}
	if s.pool, err = blobstore.NewPool(); err != nil {
		return nil, fmt.Errorf("serve: %w", err)
	}
	// the limits' bounds (Limits.AuditOptions, which queue workers share)
	// and the service's own readers and counters
	own := []source.Option{source.WithRemote(ropts...), source.WithHub(hub), source.WithBlob(blobstore.WithPool(s.pool)),
		source.WithDecodeCounter(func(n int64) { s.m.decoded.Add(float64(n)) })}
	s.srcOpts = append(c.limits.sourceOptions(), own...)
	localBytes := s.m.bytesRead.WithLabelValues("local")
	s.auditOpts = append(c.limits.AuditOptions(),
		audit.WithSource(own...),
		audit.WithReadCounter(func(n int) { localBytes.Add(float64(n)) }),
		audit.WithPool(s.pool),
	)
	if c.root != "" {
		r, err := os.OpenRoot(c.root)
		if err != nil {
			return nil, fmt.Errorf("serve: %w", err)
		}
		s.root = r
		s.auditOpts = append(s.auditOpts, audit.WithRoot(r))
	}
	s.handler = s.routes()
	return s, nil
}

// Handler returns the service's HTTP handler.
func (s *Server) Handler() http.Handler { return s.handler }

// Close releases the root and the bucket clients.
func (s *Server) Close() error {
	err := s.pool.Close()
	if s.root != nil {
		err = errors.Join(err, s.root.Close())
	}
	return err
}

// Serve answers requests on l until ctx is done, then drains: /healthz
// answers 503 "draining" and responses ask clients to close their
// connections; for Limits.DrainDelay it still accepts connections and
// answers every request (a balancer that has not yet seen the health check
// fail still sends some), then it stops accepting, lets the requests in
// flight finish for up to Limits.DrainTimeout, and closes what is left. It
// returns nil after a drain, whether or not everything finished in time
// (what did not is logged).
func (s *Server) Serve(ctx context.Context, l net.Listener) error {
	lim := s.cfg.limits
	base, cancelBase := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelBase()
	hs := &http.Server{
		Handler:           s.handler,
		ReadHeaderTimeout: lim.ReadHeaderTimeout,
		IdleTimeout:       lim.IdleTimeout,
		MaxHeaderBytes:    lim.MaxHeaderBytes,
		BaseContext:       func(net.Listener) context.Context { return base },
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(l) }()
	s.log.Info("serving", "addr", l.Addr().String(), "auth", s.cfg.hasToken, "root", s.cfg.root != "", "allow_locations", len(s.cfg.patterns))
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	s.draining.Store(true)
	hs.SetKeepAlivesEnabled(false) // idle connections close; answers say Connection: close
	if lim.DrainDelay > 0 {
		s.log.Info("draining: still accepting, /healthz answers 503", "for", lim.DrainDelay.String())
		delay := time.NewTimer(lim.DrainDelay)
		select {
		case <-delay.C:
		case <-s.endDelay:
		case err := <-errc:
			delay.Stop()
			return err
		}
		delay.Stop()
	}
	s.log.Info("draining", "timeout", lim.DrainTimeout.String(), "audits_in_flight", len(s.run))
	dctx, cancel := context.WithTimeout(context.Background(), lim.DrainTimeout)
	defer cancel()
	start := time.Now()
	if err := hs.Shutdown(dctx); err != nil {
		s.log.Warn("drain timed out: closing the connections left", "after", time.Since(start).String(), "audits_in_flight", len(s.run))
		cancelBase() // audits still running see their context end
		hs.Close()
	} else {
		s.log.Info("drained", "after", time.Since(start).String())
	}
	<-errc
	return nil
}

// authorized reports whether r carries the token (Authorization:
// Bearer, compared as a digest in constant time) or, where cookieOK (the
// viewer's pages), a valid session cookie set by POST /login. The API
// endpoints take the token only.
func (s *Server) authorized(r *http.Request, cookieOK bool) (ok, byCookie bool) {
	if !s.cfg.hasToken {
		return true, false
	}
	if h := r.Header.Get("Authorization"); h != "" {
		const prefix = "Bearer "
		if len(h) > len(prefix) && subtle.ConstantTimeCompare([]byte(h[:len(prefix)]), []byte(prefix)) == 1 {
			sum := sha256.Sum256([]byte(h[len(prefix):]))
			return subtle.ConstantTimeCompare(sum[:], s.tokenSum[:]) == 1, false
		}
		return false, false
	}
	if c, err := r.Cookie(sessionCookie); err == nil && cookieOK {
		return s.sessions.valid(c.Value), true
	}
	return false, false
}

// acquire admits one audit: it answers 503 at once when the queue is
// full, else waits for a running slot (or the request's end). release
// must be called when the audit is done.
func (s *Server) acquire(ctx context.Context) (release func(), err error) {
	select {
	case s.admit <- struct{}{}:
	default:
		return nil, errOverload
	}
	s.m.queued.Inc()
	select {
	case s.run <- struct{}{}:
		s.m.queued.Dec()
	case <-ctx.Done():
		s.m.queued.Dec()
		<-s.admit
		return nil, ctx.Err()
	}
	s.m.inFlight.Inc()
	return func() {
		s.m.inFlight.Dec()
		<-s.run
		<-s.admit
	}, nil
}

var errOverload = errors.New("the service is at capacity: retry later")
