package queue

import (
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/gosafetensors/safetensors"
	"github.com/gosafetensors/safetensors/audit"
	"github.com/gosafetensors/safetensors/remote/blobstore"
)

// ErrOption is wrapped by the error New returns for an invalid option. It
// is safetensors.ErrOption, the sentinel every package of the module
// wraps.
var ErrOption = safetensors.ErrOption

// Defaults of the options.
const (
	DefaultSubject       = "safetensors.events"
	DefaultStream        = "SAFETENSORS_EVENTS"
	DefaultConsumer      = "safetensors-audit"
	DefaultEventLocation = "s3://{bucket}/{key}"
	DefaultConcurrency   = 4
	DefaultAckWait       = 30 * time.Second
	DefaultMaxDeliver    = 5
	DefaultAuditTimeout  = 5 * time.Minute
	DefaultDrainTimeout  = 30 * time.Second
	DefaultRetryDelay    = time.Second
)

// An Option configures [New].
type Option func(*config) error

type config struct {
	subject, stream, consumer string
	replicas                  int
	results                   string
	location                  string
	concurrency               int
	ackWait                   time.Duration
	maxDeliver                int
	auditTimeout              time.Duration
	drainTimeout              time.Duration
	retryDelay                time.Duration
	pollWait                  time.Duration
	buckets                   map[string]bool
	pool                      *blobstore.Pool
	audit                     []audit.Option
	logger                    *slog.Logger
}

func defaults() config {
	return config{
		subject: DefaultSubject, stream: DefaultStream, consumer: DefaultConsumer, replicas: 1,
		location: DefaultEventLocation, concurrency: DefaultConcurrency, ackWait: DefaultAckWait,
		maxDeliver: DefaultMaxDeliver, auditTimeout: DefaultAuditTimeout, drainTimeout: DefaultDrainTimeout,
		retryDelay: DefaultRetryDelay, pollWait: time.Second,
	}
}

// WithSubject sets the subject events are published to (default
// [DefaultSubject]); a stream the worker creates takes it.
func WithSubject(s string) Option {
	return func(c *config) error {
		if !validSubject(s) {
			return fmt.Errorf("subject %q: want tokens of letters, digits, '-' and '_' separated by '.' (no wildcards)", s)
		}
		c.subject = s
		return nil
	}
}

var subjectToken = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9_-]+$`) })

func validSubject(s string) bool {
	for t := range strings.SplitSeq(s, ".") {
		if !subjectToken().MatchString(t) {
			return false
		}
	}
	return s != ""
}

// names of streams and consumers: NATS allows more, these are safe in
// every API subject and file name.
var streamName = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`) })

// WithStream names the JetStream stream (default [DefaultStream]); it is
// created, with file storage and work-queue retention, if absent.
func WithStream(name string) Option {
	return func(c *config) error {
		if !streamName().MatchString(name) {
			return fmt.Errorf("stream %q: want 1 to 64 letters, digits, '-' or '_'", name)
		}
		c.stream = name
		return nil
	}
}

// WithConsumer names the durable pull consumer every worker of the pool
// shares (default [DefaultConsumer]); it is created if absent.
func WithConsumer(name string) Option {
	return func(c *config) error {
		if !streamName().MatchString(name) {
			return fmt.Errorf("consumer %q: want 1 to 64 letters, digits, '-' or '_'", name)
		}
		c.consumer = name
		return nil
	}
}

// WithReplicas sets the replicas of a stream the worker creates (1 to 5;
// default 1; 3 on a cluster survives the loss of a server).
func WithReplicas(n int) Option {
	return func(c *config) error {
		if n < 1 || n > 5 {
			return fmt.Errorf("replicas %d: want 1 to 5", n)
		}
		c.replicas = n
		return nil
	}
}

// WithResults sets where result documents are written: a bucket URL or
// prefix (s3://audit/results/?region=eu-west-1, file:///var/lib/audit/).
// Required.
func WithResults(prefixURL string) Option {
	return func(c *config) error {
		if !blobstore.IsURL(prefixURL) {
			return fmt.Errorf("results %q: want a bucket URL such as s3://bucket/prefix/ or file:///dir/", prefixURL)
		}
		u, err := url.Parse(prefixURL)
		if err != nil {
			return fmt.Errorf("results: %v", err)
		}
		if u.User != nil || u.Fragment != "" {
			return errors.New("results: credentials and fragments are not allowed in the URL")
		}
		if !strings.HasSuffix(u.Path, "/") {
			u.Path += "/"
			if u.RawPath != "" {
				u.RawPath += "/"
			}
		}
		c.results = u.String()
		return nil
	}
}

// WithEventLocation sets how an event names the object to read: a bucket
// URL template in which {bucket} is the event's bucket and {key}, which
// must end the path after a '/', its key (default [DefaultEventLocation]). It may
// carry the store's URL parameters:
// s3://{bucket}/{key}?endpoint=http://minio:9000&use_path_style=true.
func WithEventLocation(tmpl string) Option {
	return func(c *config) error {
		p, _, _ := strings.Cut(tmpl, "?")
		if !strings.HasSuffix(p, "/{key}") || strings.Count(tmpl, "{key}") != 1 {
			return fmt.Errorf("event location %q: /{key} must end the path, once", tmpl)
		}
		sample := expand(tmpl, "bucket", "k")
		if !blobstore.IsURL(sample) {
			return fmt.Errorf("event location %q: not a bucket URL", tmpl)
		}
		if _, _, err := blobstore.SplitURL(sample); err != nil {
			return fmt.Errorf("event location %q: %v", tmpl, err)
		}
		c.location = tmpl
		return nil
	}
}

// WithBuckets accepts events of these buckets only (default: any bucket
// whose name is a valid S3 or GCS bucket name).
func WithBuckets(names ...string) Option {
	return func(c *config) error {
		if c.buckets == nil {
			c.buckets = map[string]bool{}
		}
		for _, n := range names {
			if !validBucket(n) {
				return fmt.Errorf("bucket %q: not a valid bucket name", n)
			}
			c.buckets[n] = true
		}
		return nil
	}
}

// WithConcurrency sets how many objects one worker audits at a time
// (default [DefaultConcurrency]); it is also how many messages it takes
// from the consumer at once.
func WithConcurrency(n int) Option {
	return func(c *config) error {
		if n < 1 || n > 1024 {
			return fmt.Errorf("concurrency %d: want 1 to 1024", n)
		}
		c.concurrency = n
		return nil
	}
}

// WithAckWait sets the ack wait of a consumer the worker creates (default
// [DefaultAckWait]): a message not acknowledged within it is delivered
// again, to any worker. A worker auditing a message tells the server it
// is still at work four times per ack wait.
func WithAckWait(d time.Duration) Option {
	return func(c *config) error {
		if d < 100*time.Millisecond {
			return fmt.Errorf("ack wait %v: want at least 100ms", d)
		}
		c.ackWait = d
		return nil
	}
}

// WithMaxDeliver sets how many times a consumer the worker creates
// delivers one message (default [DefaultMaxDeliver]). The last delivery
// always ends in a result: the verdict, or "error" if the audit failed
// again or did not finish.
func WithMaxDeliver(n int) Option {
	return func(c *config) error {
		if n < 1 || n > 100 {
			return fmt.Errorf("max deliver %d: want 1 to 100", n)
		}
		c.maxDeliver = n
		return nil
	}
}

// WithAuditTimeout bounds one object's audit (default
// [DefaultAuditTimeout]); an audit cut short is tried again on a later
// delivery.
func WithAuditTimeout(d time.Duration) Option {
	return func(c *config) error {
		if d <= 0 {
			return fmt.Errorf("audit timeout %v: want a positive duration", d)
		}
		c.auditTimeout = d
		return nil
	}
}

// WithDrainTimeout bounds how long Run waits, once its context is done,
// for the audits in flight (default [DefaultDrainTimeout]); audits still
// running then are stopped and their messages handed back.
func WithDrainTimeout(d time.Duration) Option {
	return func(c *config) error {
		if d <= 0 {
			return fmt.Errorf("drain timeout %v: want a positive duration", d)
		}
		c.drainTimeout = d
		return nil
	}
}

// WithRetryDelay sets the delay before a failed message is delivered
// again, doubled on each delivery up to 64 times it (default
// [DefaultRetryDelay]).
func WithRetryDelay(d time.Duration) Option {
	return func(c *config) error {
		if d < 0 {
			return fmt.Errorf("retry delay %v: want zero or more", d)
		}
		c.retryDelay = d
		return nil
	}
}

// WithPollWait sets how long one pull request waits for messages (default
// 1s); a draining worker waits for it to end.
func WithPollWait(d time.Duration) Option {
	return func(c *config) error {
		if d < 10*time.Millisecond || d > time.Minute {
			return fmt.Errorf("poll wait %v: want 10ms to 1m", d)
		}
		c.pollWait = d
		return nil
	}
}

// WithPool reads objects and writes results with p's clients (one per
// bucket); without it the worker makes a pool of its own, closed by
// Close.
func WithPool(p *blobstore.Pool) Option {
	return func(c *config) error {
		if p == nil {
			return errors.New("WithPool(nil)")
		}
		c.pool = p
		return nil
	}
}

// WithAudit passes options to the audit of each object (torch limits, the
// source options of a safetensors file's validation). A service passes its
// bounds here (serve.Limits.AuditOptions: header size, decompressed size);
// an object past one of them gets its "error" result at once, on the
// first delivery.
func WithAudit(opts ...audit.Option) Option {
	return func(c *config) error { c.audit = append(c.audit, opts...); return nil }
}

// WithLogger sets where the worker logs (default: slog's default logger).
func WithLogger(l *slog.Logger) Option {
	return func(c *config) error {
		if l == nil {
			return errors.New("WithLogger(nil)")
		}
		c.logger = l
		return nil
	}
}

// bucketName is what the worker accepts as an event's bucket: S3's and
// GCS's names (lower case, digits, '.', '-', '_'; upper case for legacy
// S3 buckets), so that a forged event cannot put a host, a port or a path
// into the location.
// It is compiled on first use (its 221-fold repetition costs 0.2 MB and a
// millisecond, which package initialisation would charge to every CLI
// command).
var bucketName = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{1,221}[A-Za-z0-9]$`)
})

func validBucket(s string) bool { return bucketName().MatchString(s) && !strings.Contains(s, "..") }

// expand fills a location template.
func expand(tmpl, bucket, key string) string {
	return strings.Replace(strings.ReplaceAll(tmpl, "{bucket}", bucket), "{key}", key, 1)
}

// locate returns the URL of the object an event names: the template's
// prefix with the key joined byte for byte (percent-encoded as a listing's
// object URLs are, so the URL opens exactly that key).
func locate(tmpl, bucket, key string) string {
	return blobstore.JoinURL(expand(tmpl, bucket, ""), key)
}
