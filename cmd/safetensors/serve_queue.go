package main

import (
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/gosafetensors/safetensors/queue"
)

// queueFlags are serve's flags for running as a queue worker.
type queueFlags struct {
	url, stream, consumer, creds, store, listen string
	location, results                           string
	replicas, maxDeliver                        int
	ackWait                                     time.Duration
	buckets                                     []string
}

func (q *queueFlags) register(f *pflag.FlagSet) {
	f.StringVar(&q.url, "queue", "", "run as a queue worker: `nats://HOST:PORT/SUBJECT`, or embedded[/SUBJECT] for a NATS server in this process")
	f.StringVar(&q.results, "results", "", "with --queue: write result documents under `URL` (s3://bucket/prefix/, file:///dir/)")
	f.StringVar(&q.location, "event-location", queue.DefaultEventLocation, "with --queue: the object an event names, from `TEMPLATE` ({bucket}, {key}; may carry URL parameters)")
	f.StringVar(&q.stream, "queue-stream", queue.DefaultStream, "with --queue: the JetStream stream (created if absent)")
	f.StringVar(&q.consumer, "queue-consumer", queue.DefaultConsumer, "with --queue: the durable consumer the pool shares (created if absent)")
	f.IntVar(&q.replicas, "queue-replicas", 1, "with --queue: replicas of a stream this worker creates (3 on a cluster)")
	f.StringVar(&q.creds, "queue-creds", "", "with --queue: NATS credentials `FILE` (JWT and NKey seed)")
	f.StringVar(&q.store, "queue-store", defaultQueueStore(), "with --queue embedded: where JetStream keeps its files (`DIR`)")
	f.StringVar(&q.listen, "queue-listen", "127.0.0.1:4222", "with --queue embedded: where publishers connect (`HOST:PORT`); a non-loopback address needs --token-file or --insecure")
	f.DurationVar(&q.ackWait, "ack-wait", queue.DefaultAckWait, "with --queue: ack wait of a consumer this worker creates")
	f.IntVar(&q.maxDeliver, "max-deliver", queue.DefaultMaxDeliver, "with --queue: deliveries of one message before its result is an error")
	f.StringArrayVar(&q.buckets, "allow-bucket", nil, "with --queue: audit events of bucket `NAME` only (repeatable; default any)")
}

// defaultQueueStore is $XDG_STATE_HOME/safetensors/queue, or
// ~/.local/state/safetensors/queue: state that must survive a reboot.
func defaultQueueStore() string {
	if d := os.Getenv("XDG_STATE_HOME"); d != "" {
		return filepath.Join(d, "safetensors", "queue")
	}
	if h, err := os.UserHomeDir(); err == nil {
		return filepath.Join(h, ".local", "state", "safetensors", "queue")
	}
	return filepath.Join(os.TempDir(), "safetensors-queue")
}

// queueOnly are the flags that mean nothing without --queue.
var queueOnly = []string{"results", "event-location", "queue-stream", "queue-consumer", "queue-replicas", "queue-creds",
	"queue-store", "queue-listen", "ack-wait", "max-deliver", "allow-bucket"}

// httpOnly are the flags that mean nothing with --queue.
var httpOnly = []string{"addr", "root", "allow-location", "allow-address", "spool-dir", "max-upload", "max-queued", "drain-delay"}

// unused refuses queue flags given without --queue.
func (q *queueFlags) unused(cmd *cobra.Command) error {
	for _, name := range queueOnly {
		if cmd.Flags().Changed(name) {
			return usageError("--%s is a flag of --queue", name)
		}
	}
	return nil
}

// runQueue runs serve as a queue worker until SIGTERM, then drains.
func runQueue(cmd *cobra.Command, fl serveFlags) error {
	q := fl.queue
	for _, name := range httpOnly {
		if cmd.Flags().Changed(name) {
			return usageError("--%s: the queue worker serves no HTTP (drop --queue to serve the API)", name)
		}
	}
	if q.results == "" {
		return usageError("--queue needs --results URL: where the result documents go")
	}
	// the bounds of the HTTP service's audits, from the same flags
	lim, err := fl.limits()
	if err != nil {
		return err
	}
	logger, err := serveLogger(cmd, fl.logLevel)
	if err != nil {
		return err
	}
	subject := queue.DefaultSubject
	rest, embed := strings.CutPrefix(q.url, "embedded")
	embed = embed && (rest == "" || strings.HasPrefix(rest, "/"))
	server := ""
	switch {
	case embed && rest != "":
		subject = rest[1:]
	case !embed:
		var subj string
		if server, subj, err = splitQueueURL(q.url); err != nil {
			return usageError("--queue: %v", err)
		}
		if subj != "" {
			subject = subj
		}
	}
	opts := []queue.Option{queue.WithSubject(subject), queue.WithStream(q.stream), queue.WithConsumer(q.consumer),
		queue.WithReplicas(q.replicas), queue.WithResults(q.results), queue.WithEventLocation(q.location),
		queue.WithConcurrency(fl.maxConcurrent), queue.WithAckWait(q.ackWait), queue.WithMaxDeliver(q.maxDeliver),
		queue.WithAuditTimeout(lim.AuditTimeout), queue.WithDrainTimeout(lim.DrainTimeout), queue.WithLogger(logger),
		queue.WithAudit(lim.AuditOptions()...)}
	if len(q.buckets) > 0 {
		opts = append(opts, queue.WithBuckets(q.buckets...))
	}
	if err := queue.Check(opts...); err != nil {
		return usageError("%v", err)
	}
	var nc *nats.Conn
	if embed {
		if cmd.Flags().Changed("queue-creds") {
			return usageError("--queue-creds: the embedded server takes --token-file")
		}
		token := ""
		if fl.tokenFile != "" {
			b, err := os.ReadFile(fl.tokenFile)
			if err != nil {
				return usageError("--token-file: %v", err)
			}
			token = strings.TrimSpace(string(b))
		}
		if token == "" && !fl.insecure && !loopbackAddr(q.listen) {
			return usageError("--queue-listen %s is not a loopback address: give --token-file (or --insecure)", q.listen)
		}
		conn, addr, shutdown, err := startEmbedded(q.store, q.listen, token, fl.insecure)
		if err != nil {
			return &exitError{Code: exitNoCheck, Err: err}
		}
		defer shutdown()
		nc = conn
		fmt.Fprintf(cmd.ErrOrStderr(), "safetensors serve: embedded NATS server (JetStream in %s) listening on %s, subject %s\n", q.store, addr, subject)
	} else {
		if cmd.Flags().Changed("token-file") {
			return usageError("--token-file: a NATS server takes credentials from --queue-creds or the URL")
		}
		opts := []nats.Option{nats.Name("safetensors serve --queue"), nats.MaxReconnects(-1),
			nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
				if err != nil {
					logger.Warn("disconnected from NATS", "error", err.Error())
				}
			}),
			nats.ReconnectHandler(func(c *nats.Conn) { logger.Info("reconnected to NATS", "server", redactNATS(c.ConnectedUrl())) })}
		if q.creds != "" {
			opts = append(opts, nats.UserCredentials(q.creds))
		}
		if nc, err = nats.Connect(server, opts...); err != nil {
			return &exitError{Code: exitNoCheck, Err: fmt.Errorf("--queue %s: %w", redactNATS(server), err)}
		}
		defer nc.Close()
		fmt.Fprintf(cmd.ErrOrStderr(), "safetensors serve: queue worker on %s, subject %s\n", redactNATS(server), subject)
	}
	w, err := queue.New(nc, opts...)
	if err != nil {
		return usageError("%v", err)
	}
	defer w.Close()
	if err := w.Run(cmdContext(cmd)); err != nil {
		return &exitError{Code: exitNoCheck, Err: err}
	}
	st := w.Stats()
	logger.Info("worker stopped", slog.Int64("messages", st.Messages), slog.Int64("audited", st.Audited), slog.Int64("reused", st.Reused),
		slog.Int64("results", st.Results), slog.Int64("retried", st.Retried), slog.Int64("failed", st.Failed))
	return nil
}

// splitQueueURL splits nats://[CREDENTIALS@]HOST:PORT/SUBJECT into the
// server URL nats.Connect takes and the subject. One server is enough for
// a cluster: the client learns the others from it.
func splitQueueURL(s string) (server, subject string, err error) {
	u, err := url.Parse(s)
	if err != nil {
		return "", "", fmt.Errorf("%q is not a URL", redactNATS(s))
	}
	switch u.Scheme {
	case "nats", "tls":
	default:
		return "", "", fmt.Errorf("%q: want nats://HOST:PORT/SUBJECT (or tls://), or embedded", redactNATS(s))
	}
	if u.Host == "" {
		return "", "", fmt.Errorf("%q: no server", redactNATS(s))
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return "", "", fmt.Errorf("%q: a NATS URL takes no query or fragment", redactNATS(s))
	}
	subject = strings.TrimPrefix(u.Path, "/")
	u.Path, u.RawPath = "", ""
	return u.String(), subject, nil
}

// redactNATS drops the credentials of a NATS URL for messages.
func redactNATS(s string) string {
	u, err := url.Parse(s)
	if err != nil || u.User == nil {
		if err != nil {
			return "(invalid URL)"
		}
		return s
	}
	u.User = nil
	return u.String()
}
