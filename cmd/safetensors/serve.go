package main

import (
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/netip"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/gosafetensors/safetensors/serve"
)

func init() { register(newServeCmd) }

type serveFlags struct {
	addr, root, tokenFile, spoolDir string
	insecure, secureCookie          bool
	allowLocations, allowAddrs      []string
	hubRedirects                    []string
	maxUpload, maxHeader            string
	maxExpanded                     string
	maxExpansion                    int64
	maxConcurrent, maxQueued        int
	auditTimeout, drainTimeout      time.Duration
	drainDelay                      time.Duration
	logLevel                        string
	queue                           queueFlags
}

func newServeCmd() *cobra.Command {
	var fl serveFlags
	def := serve.DefaultLimits()
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the audit service: an HTTP API for scan and inspect, and a model viewer",
		Long: `Serve answers, over HTTP, what scan --json and inspect --json print:

  POST /v1/scan               the file as the body (?name=NAME names it), or
  POST /v1/scan?location=LOC  a location (or a JSON body {"location": LOC}):
                              an array, one scan report per file
  GET  /v1/inspect?location=LOC   the inspect --json object (POST: an upload)
  GET  /                      a viewer: tensors grouped by layer, totals,
                              dtypes, metadata, the scan verdict; uploads
  GET  /healthz               "ok" (503 "draining" while shutting down)
  GET  /metrics               Prometheus metrics

It binds 127.0.0.1:8080 by default. With --token-file every endpoint but
/healthz needs "Authorization: Bearer TOKEN" (the viewer asks for the token
once and keeps a session cookie, which opens the viewer's pages only, for 12
hours or until the service restarts). A non-loopback --addr is refused without a
token unless --insecure.

A location is read only if it matches an --allow-location pattern
(SCHEME://HOST/PATH, "*" within a segment, "**" across segments, e.g.
https://huggingface.co/**, hf://my-org/**, s3://uploads/incoming/**), or is
a path relative to --root (opened inside it: no escape by .. or symbolic
links). Every URL the service then requests on a location's behalf (each
redirect, an index's shards) must match a pattern too, or lie in the
location's own directory; a Hub location also reads its repository on the
Hub's endpoint and follows the Hub's redirects to --allow-hub-redirect
patterns (default: the Hub's CDN, https://*.hf.co/** and
https://*.huggingface.co/**). Connections to loopback, link-local
(169.254.169.254), private and unspecified addresses are refused after DNS
resolution and on every redirect, unless an --allow-address prefix allows
them.

Uploads are spooled to disk (--spool-dir) up to --max-upload; a compressed
file may decompress to --max-expanded and --max-expansion times its size
(an audit decompresses it whole), else its verdict is error; audits run
--max-concurrent at a time with --max-queued waiting, each within
--audit-timeout; past that the service answers 503 with Retry-After. Logs
are JSON lines on stderr and never hold a token. SIGTERM (or Ctrl-C)
drains: /healthz answers 503 at once while connections are still
accepted for --drain-delay (so that balancers stop sending), then no new
connections, audits in flight finish within --drain-timeout, exit 0. A
second signal exits at once.

With --queue the service is a queue worker instead (no HTTP): it takes S3
or GCS event notifications from a NATS JetStream durable consumer that
every worker of a pool shares, audits each object version they name and
writes one JSON result per version to --results; see docs/queue.md.

  --queue nats://HOST:PORT/SUBJECT   a NATS server or cluster
  --queue embedded                   a NATS server with JetStream inside
                                     this process (listening on
                                     --queue-listen for publishers)`,
		Example: `  safetensors serve --root /srv/models
  safetensors serve --addr :8080 --token-file /etc/safetensors/token \
      --allow-location 'hf://**' --allow-location 'https://huggingface.co/**'
  curl --data-binary @pytorch_model.bin 'http://127.0.0.1:8080/v1/scan?name=pytorch_model.bin'
  safetensors serve --queue nats://nats.internal:4222/uploads.events \
      --event-location 's3://{bucket}/{key}?region=eu-west-1' --results s3://audit-results/uploads/`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error { return runServe(cmd, fl) },
	}
	f := cmd.Flags()
	f.StringVar(&fl.addr, "addr", "127.0.0.1:8080", "`HOST:PORT` to listen on")
	f.StringVar(&fl.root, "root", "", "serve local paths relative to `DIR`, and nothing outside it")
	f.StringVar(&fl.tokenFile, "token-file", "", "require the bearer token in `FILE` (at least 16 characters)")
	f.BoolVar(&fl.insecure, "insecure", false, "allow a non-loopback --addr without a token")
	f.BoolVar(&fl.secureCookie, "secure-cookie", false, "mark the viewer's session cookie Secure: a TLS proxy is in front (X-Forwarded-Proto is not trusted)")
	f.StringArrayVar(&fl.allowLocations, "allow-location", nil, "read remote locations matching `PATTERN` (repeatable)")
	f.StringArrayVar(&fl.hubRedirects, "allow-hub-redirect", serve.DefaultHubRedirects, "let an allowed Hub location's redirects reach URLs matching `PATTERN` (the Hub's CDN; repeatable; replaces the default; '' for none)")
	f.StringArrayVar(&fl.allowAddrs, "allow-address", nil, "allow connections to `CIDR` although loopback, private or link-local (repeatable)")
	f.StringVar(&fl.spoolDir, "spool-dir", os.TempDir(), "spool uploads in `DIR`")
	f.StringVar(&fl.maxUpload, "max-upload", "8GiB", "largest upload accepted (`SIZE`)")
	f.StringVar(&fl.maxHeader, "max-header", "16MiB", "largest safetensors header an audit reads (`SIZE`, decompressed; parsing costs about 10x in memory)")
	f.StringVar(&fl.maxExpanded, "max-expanded", "", "largest original a compressed file may decompress to (`SIZE`; an audit decompresses it whole; default twice --max-upload)")
	f.Int64Var(&fl.maxExpansion, "max-expansion", def.MaxExpansionRatio, "largest ratio of a compressed file's original to its size, beyond 64 MiB (0: none)")
	f.IntVar(&fl.maxConcurrent, "max-concurrent", def.MaxConcurrent, "audits running at once")
	f.IntVar(&fl.maxQueued, "max-queued", def.MaxQueued, "audits waiting for a slot before the service answers 503")
	f.DurationVar(&fl.auditTimeout, "audit-timeout", def.AuditTimeout, "time one audit may take")
	f.DurationVar(&fl.drainDelay, "drain-delay", defaultDrainDelay, "time SIGTERM goes on accepting connections, /healthz answering 503, before it stops")
	f.DurationVar(&fl.drainTimeout, "drain-timeout", def.DrainTimeout, "time SIGTERM waits for audits in flight")
	f.StringVar(&fl.logLevel, "log-level", "info", "debug, info, warn or error")
	fl.queue.register(f)
	return cmd
}

// limits are the service's limits the flags set.
func (fl serveFlags) limits() (serve.Limits, error) {
	lim := serve.DefaultLimits()
	n, err := parseSize(fl.maxUpload)
	if err != nil || n < 1 {
		return lim, usageError("--max-upload %q: want a size such as 512MiB", fl.maxUpload)
	}
	lim.MaxUploadBytes, lim.MaxConcurrent, lim.MaxQueued = n, fl.maxConcurrent, fl.maxQueued
	if lim.MaxModelHeader, err = parseSize(fl.maxHeader); err != nil || lim.MaxModelHeader < 1 {
		return lim, usageError("--max-header %q: want a size such as 16MiB", fl.maxHeader)
	}
	if fl.maxExpanded == "" {
		lim.MaxExpandedBytes = math.MaxInt64
		if n <= math.MaxInt64/2 {
			lim.MaxExpandedBytes = 2 * n
		}
	} else if lim.MaxExpandedBytes, err = parseSize(fl.maxExpanded); err != nil || lim.MaxExpandedBytes < 1 {
		return lim, usageError("--max-expanded %q: want a size such as 16GiB", fl.maxExpanded)
	}
	if lim.MaxExpansionRatio = fl.maxExpansion; lim.MaxExpansionRatio < 0 {
		return lim, usageError("--max-expansion %d: want 0 or more", fl.maxExpansion)
	}
	lim.AuditTimeout, lim.DrainTimeout = fl.auditTimeout, fl.drainTimeout
	if fl.drainDelay < 0 {
		return lim, usageError("--drain-delay %v: want 0 or more", fl.drainDelay)
	}
	lim.DrainDelay = fl.drainDelay
	return lim, nil
}

// defaultDrainDelay is --drain-delay's default: a few seconds for
// balancers and Kubernetes' proxies to stop sending to a terminating
// service (the library's default is 0).
const defaultDrainDelay = 5 * time.Second

func runServe(cmd *cobra.Command, fl serveFlags) error {
	if fl.queue.url != "" {
		return runQueue(cmd, fl)
	}
	if err := fl.queue.unused(cmd); err != nil {
		return err
	}
	lim, err := fl.limits()
	if err != nil {
		return err
	}
	logger, err := serveLogger(cmd, fl.logLevel)
	if err != nil {
		return err
	}
	opts := []serve.Option{serve.WithLimits(lim), serve.WithLogger(logger), serve.WithSpoolDir(fl.spoolDir),
		serve.WithAllowLocations(fl.allowLocations...)}
	if fl.secureCookie {
		opts = append(opts, serve.WithSecureCookie(true))
	}
	if cmd.Flags().Changed("allow-hub-redirect") {
		var pats []string
		for _, p := range fl.hubRedirects {
			if p != "" {
				pats = append(pats, p)
			}
		}
		opts = append(opts, serve.WithHubRedirects(pats...))
	}
	if trust, _ := cmd.Flags().GetBool("trust-server"); trust {
		opts = append(opts, serve.WithTrustUnvalidated(true))
	}
	for _, a := range fl.allowAddrs {
		p, err := netip.ParsePrefix(a)
		if err != nil {
			addr, aerr := netip.ParseAddr(a)
			if aerr != nil {
				return usageError("--allow-address %q: want a CIDR prefix such as 10.0.0.0/8", a)
			}
			p = netip.PrefixFrom(addr, addr.BitLen())
		}
		opts = append(opts, serve.WithAllowAddresses(p))
	}
	if fl.root != "" {
		opts = append(opts, serve.WithRoot(fl.root))
	}
	hasToken := fl.tokenFile != ""
	if hasToken {
		b, err := os.ReadFile(fl.tokenFile)
		if err != nil {
			return usageError("--token-file: %v", err)
		}
		opts = append(opts, serve.WithToken(strings.TrimSpace(string(b))))
	}
	if !hasToken && !fl.insecure && !loopbackAddr(fl.addr) {
		return usageError("--addr %s is not a loopback address: give --token-file (or --insecure to serve without authentication)", fl.addr)
	}
	srv, err := serve.New(opts...)
	if err != nil {
		return usageError("%v", err)
	}
	defer srv.Close()
	l, err := net.Listen("tcp", fl.addr)
	if err != nil {
		return &exitError{Code: exitNoCheck, Err: err}
	}
	fmt.Fprintf(cmd.ErrOrStderr(), "safetensors serve: listening on http://%s/\n", l.Addr())
	return srv.Serve(cmdContext(cmd), l)
}

// serveLogger logs JSON lines on stderr from level on.
func serveLogger(cmd *cobra.Command, level string) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, usageError("--log-level %q: want debug, info, warn or error", level)
	}
	return slog.New(slog.NewJSONHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: l})), nil
}

// loopbackAddr reports whether a listen address only accepts connections
// from this machine: a loopback IP or "localhost" (not an empty host,
// which is every interface).
func loopbackAddr(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.Unmap().IsLoopback()
}
