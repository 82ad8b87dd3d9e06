package queue

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/gosafetensors/safetensors/audit"
	"github.com/gosafetensors/safetensors/remote"
	"github.com/gosafetensors/safetensors/remote/blobstore"
	"github.com/gosafetensors/safetensors/source"
)

// Worker audits the objects that bucket events name, taking the events
// from a JetStream durable pull consumer that every worker of a pool
// shares. Make one with [New]; run it with [Worker.Run].
type Worker struct {
	cfg      config
	js       jetstream.JetStream
	pool     *blobstore.Pool
	ownPool  bool
	log      *slog.Logger
	stats    counters
	dirsMu   sync.Mutex
	dirsMade map[string]bool

	// what the consumer was found or created with
	ackWait    time.Duration
	maxDeliver int
}

// Stats counts what a worker did.
type Stats struct {
	Messages int64 // messages taken from the consumer
	Audited  int64 // objects read and audited
	Reused   int64 // objects whose result was already written for this version: not read
	Results  int64 // result documents written
	Retried  int64 // messages handed back to be delivered again
	Failed   int64 // results written with verdict "error" after the last delivery
}

type counters struct{ messages, audited, reused, results, retried, failed atomic.Int64 }

// Stats returns the counts so far.
func (w *Worker) Stats() Stats {
	return Stats{w.stats.messages.Load(), w.stats.audited.Load(), w.stats.reused.Load(), w.stats.results.Load(), w.stats.retried.Load(), w.stats.failed.Load()}
}

// Check returns the error [New] would return for opts, without a
// connection: a program checks its flags before it connects.
func Check(opts ...Option) error {
	_, err := buildConfig(opts)
	return err
}

func buildConfig(opts []Option) (config, error) {
	c := defaults()
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
	if c.results == "" {
		errs = append(errs, errors.New("no results location (WithResults)"))
	}
	if err := errors.Join(errs...); err != nil {
		return c, fmt.Errorf("queue: %w: %w", ErrOption, err)
	}
	return c, nil
}

// New makes a worker that takes events through nc. [WithResults] is
// required.
func New(nc *nats.Conn, opts ...Option) (*Worker, error) {
	c, err := buildConfig(opts)
	if err != nil {
		return nil, err
	}
	if nc == nil {
		return nil, fmt.Errorf("queue: %w: no NATS connection", ErrOption)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("queue: %w", err)
	}
	w := &Worker{cfg: c, js: js, pool: c.pool, log: c.logger, dirsMade: map[string]bool{}}
	if w.log == nil {
		w.log = slog.Default()
	}
	if w.pool == nil {
		if w.pool, err = blobstore.NewPool(); err != nil {
			return nil, fmt.Errorf("queue: %w", err)
		}
		w.ownPool = true
	}
	return w, nil
}

// Close closes the worker's bucket clients (unless they are a pool of the
// caller's).
func (w *Worker) Close() error {
	if w.ownPool {
		return w.pool.Close()
	}
	return nil
}

// consumer finds or creates the stream and the durable consumer. An
// existing stream is used as it is (it must take the subject); an existing
// consumer must acknowledge explicitly and bound its deliveries, and its
// ack wait and max deliveries are the ones that count.
func (w *Worker) consumer(ctx context.Context) (jetstream.Consumer, error) {
	c := w.cfg
	st, err := w.js.Stream(ctx, c.stream)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		st, err = w.js.CreateStream(ctx, jetstream.StreamConfig{
			Name: c.stream, Subjects: []string{c.subject}, Storage: jetstream.FileStorage,
			Retention: jetstream.WorkQueuePolicy, Replicas: c.replicas,
			Description: "bucket event notifications for safetensors audits",
		})
		if errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) { // another worker made it first
			st, err = w.js.Stream(ctx, c.stream)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("queue: stream %s: %w", c.stream, err)
	}
	cons, err := st.Consumer(ctx, c.consumer)
	if errors.Is(err, jetstream.ErrConsumerNotFound) {
		cons, err = st.CreateConsumer(ctx, jetstream.ConsumerConfig{
			Durable: c.consumer, AckPolicy: jetstream.AckExplicitPolicy, AckWait: c.ackWait,
			MaxDeliver: c.maxDeliver, FilterSubject: c.subject, MaxAckPending: -1,
			Description: "safetensors audit workers",
		})
		if errors.Is(err, jetstream.ErrConsumerExists) {
			cons, err = st.Consumer(ctx, c.consumer)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("queue: consumer %s of stream %s: %w", c.consumer, c.stream, err)
	}
	cc := cons.CachedInfo().Config
	if cc.AckPolicy != jetstream.AckExplicitPolicy {
		return nil, fmt.Errorf("queue: consumer %s acknowledges with policy %v: want explicit acks", c.consumer, cc.AckPolicy)
	}
	if cc.MaxDeliver < 1 {
		return nil, fmt.Errorf("queue: consumer %s delivers a message without bound (max deliver %d): a failing message would never end", c.consumer, cc.MaxDeliver)
	}
	w.ackWait, w.maxDeliver = cc.AckWait, cc.MaxDeliver
	if w.ackWait <= 0 {
		w.ackWait = 30 * time.Second // the server's default
	}
	if w.ackWait != c.ackWait || w.maxDeliver != c.maxDeliver {
		w.log.Info("consumer found with its own settings", "consumer", c.consumer, "ack_wait", w.ackWait.String(), "max_deliver", w.maxDeliver)
	}
	return cons, nil
}

// Run takes messages and audits the objects they name, Concurrency at a
// time, until ctx is done; then it drains: no new message is taken, audits
// in flight get DrainTimeout to finish (then they are stopped and their
// messages handed back for another worker), and Run returns nil. It
// returns an error only if the stream or consumer cannot be had.
func (w *Worker) Run(ctx context.Context) error {
	cons, err := w.consumer(ctx)
	if err != nil {
		return err
	}
	w.log.Info("worker started", "stream", w.cfg.stream, "consumer", w.cfg.consumer, "subject", w.cfg.subject,
		"concurrency", w.cfg.concurrency, "ack_wait", w.ackWait.String(), "max_deliver", w.maxDeliver)
	// Audits run under work, which outlives ctx by the drain.
	work, stopWork := context.WithCancel(context.WithoutCancel(ctx))
	defer stopWork()
	slots := make(chan struct{}, w.cfg.concurrency)
	var inflight sync.WaitGroup
	for ctx.Err() == nil {
		select { // wait for one free slot
		case slots <- struct{}{}:
		case <-ctx.Done():
			continue
		}
		n := 1
		for n < w.cfg.concurrency {
			select {
			case slots <- struct{}{}:
				n++
				continue
			default:
			}
			break
		}
		batch, err := cons.Fetch(n, jetstream.FetchMaxWait(w.cfg.pollWait))
		if err != nil {
			for range n {
				<-slots
			}
			if ctx.Err() == nil {
				w.log.Warn("pull request failed", "error", err.Error())
				sleep(ctx, w.cfg.pollWait)
			}
			continue
		}
		got := 0
		for msg := range batch.Messages() {
			got++
			if ctx.Err() != nil {
				// draining: hand it back at once for another worker
				_ = msg.Nak()
				<-slots
				continue
			}
			inflight.Add(1)
			go func() {
				defer inflight.Done()
				defer func() { <-slots }()
				w.handle(work, msg)
			}()
		}
		for range n - got {
			<-slots
		}
		if err := batch.Error(); err != nil && !errors.Is(err, nats.ErrTimeout) && ctx.Err() == nil {
			w.log.Warn("pull request ended with an error", "error", err.Error())
		}
	}
	w.log.Info("draining", "timeout", w.cfg.drainTimeout.String())
	done := make(chan struct{})
	go func() { inflight.Wait(); close(done) }()
	select {
	case <-done:
		w.log.Info("drained")
	case <-time.After(w.cfg.drainTimeout):
		w.log.Warn("drain timed out: stopping the audits left, their messages are handed back")
		stopWork()
		<-done
	}
	return nil
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// outcome is what became of one event of a message.
type outcome int

const (
	done    outcome = iota // a result is durable (or was already)
	retry                  // deliver the message again
	stopped                // the worker is stopping: hand the message back now
)

// handle processes one message: every event it names ends in a durable
// result before the message is acknowledged; an event that failed for a
// reason that may pass (a read error, a timeout) makes the message be
// delivered again, until its last delivery, which writes a result
// whatever happens.
func (w *Worker) handle(ctx context.Context, msg jetstream.Msg) {
	w.stats.messages.Add(1)
	stopBeat := w.heartbeat(msg)
	defer stopBeat()
	attempt := 1
	if meta, err := msg.Metadata(); err == nil {
		attempt = int(meta.NumDelivered)
	}
	last := attempt >= w.maxDeliver
	evs, err := ParseEvents(msg.Data(), msg.Headers())
	res := outcome(done)
	if err != nil {
		r := &Result{ScanReport: errorReport(fmt.Sprintf("nats:%s", msg.Subject()), err), Size: -1, Attempts: attempt}
		res = w.store(ctx, invalidKey(msg.Data()), r, true)
		if res == done {
			w.log.Warn("not an event notification: result written", "subject", msg.Subject(), "error", err.Error())
		}
	}
	for i := range evs {
		if o := w.process(ctx, &evs[i], attempt, last); o > res {
			res = o
		}
	}
	switch res {
	case done:
		if err := msg.DoubleAck(ctx); err != nil {
			// the result is durable: a redelivery finds it
			w.log.Warn("ack failed", "error", err.Error())
		}
	case retry:
		w.stats.retried.Add(1)
		_ = msg.NakWithDelay(w.backoff(attempt))
	case stopped:
		w.stats.retried.Add(1)
		_ = msg.Nak()
	}
}

// heartbeat tells the server the message is being worked on, four times
// per ack wait, until stopped: a long audit is not delivered to another
// worker, and a worker that dies stops beating, so its message is
// delivered again after the ack wait.
func (w *Worker) heartbeat(msg jetstream.Msg) (stop func()) {
	quit := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(max(w.ackWait/4, 10*time.Millisecond))
		defer t.Stop()
		for {
			select {
			case <-t.C:
				_ = msg.InProgress()
			case <-quit:
				return
			}
		}
	}()
	return func() { close(quit); wg.Wait() }
}

func (w *Worker) backoff(attempt int) time.Duration {
	d := w.cfg.retryDelay
	for i := 1; i < attempt && i < 7; i++ {
		d *= 2
	}
	return d
}

func errorReport(path string, err error) audit.ScanReport {
	return audit.ScanReport{Path: path, Format: audit.FormatUnknown, Verdict: audit.Error, Globals: []audit.Global{},
		DangerousOpcodes: []audit.Opcode{}, Problems: []string{}, Error: err.Error(), Err: err}
}

// process audits the object version one event names and writes its
// result, unless a result for that version is already written.
func (w *Worker) process(ctx context.Context, ev *Event, attempt int, last bool) outcome {
	base := Result{Bucket: ev.Bucket, Key: ev.Key, ETag: ev.ETag, Version: ev.Version(), Size: ev.Size,
		Attempts: attempt, Event: ev.Name, Sequencer: ev.Sequencer}
	key := ResultKey(ev)
	if !validBucket(ev.Bucket) || (w.cfg.buckets != nil && !w.cfg.buckets[ev.Bucket]) {
		r := base
		r.ScanReport = errorReport(ev.Bucket+"/"+ev.Key, fmt.Errorf("bucket %q is not one this worker audits", ev.Bucket))
		if !validBucket(ev.Bucket) {
			key = invalidKey([]byte(ev.Bucket + "\x00" + ev.Key + "\x00" + ev.Version()))
		}
		return w.store(ctx, key, &r, true)
	}
	loc := locate(w.cfg.location, ev.Bucket, ev.Key)
	prev, err := w.lookup(ctx, key)
	switch {
	case err != nil && ctx.Err() != nil:
		return stopped
	case err != nil && !last:
		w.log.Warn("reading a result failed", "key", key, "error", err.Error())
		return retry
	case prev != nil && prev.final(ev):
		w.stats.reused.Add(1)
		return done
	}
	if last {
		// Should this delivery not finish either (the worker killed, the
		// audit stuck), no message will come again: the object ends as
		// "error" rather than without a result.
		r := base
		r.ScanReport = errorReport(loc, fmt.Errorf("%s: the audit did not finish in %d deliveries", redact(loc), attempt))
		if o := w.store(ctx, key, &r, false); o != done {
			return o
		}
	}
	w.log.Debug("auditing", "key", key, "attempt", attempt)
	r := base
	r.ScanReport, r.Changed = w.audit(ctx, loc, ev)
	switch {
	case ctx.Err() != nil:
		return stopped
	case r.Verdict == audit.Error && !r.Changed && !last && !overLimit(r.Err):
		w.log.Info("audit failed: will be tried again", "key", key, "location", redact(loc), "attempt", attempt, "error", r.Error)
		return retry
	}
	return w.store(ctx, key, &r, last)
}

// overLimit reports whether an audit stopped at one of the bounds on what
// one input may cost (a header larger than the limit, a compressed file
// decompressing past it: source.ErrHeaderLimit, source.ErrExpandedLimit).
// The object's own bytes decide that, so another delivery would end the
// same: the result is written at once.
func overLimit(err error) bool {
	return errors.Is(err, source.ErrHeaderLimit) || errors.Is(err, source.ErrExpandedLimit)
}

// audit reads the version of the object the event names, and only it.
func (w *Worker) audit(ctx context.Context, loc string, ev *Event) (rep audit.ScanReport, changed bool) {
	ctx, cancel := context.WithTimeout(ctx, w.cfg.auditTimeout)
	defer cancel()
	w.stats.audited.Add(1)
	version := pinnedVersion(loc, ev)
	b, err := w.pool.OpenVersion(ctx, loc, version)
	if err != nil {
		if errors.Is(err, remote.ErrObjectChanged) || errors.Is(err, fs.ErrNotExist) {
			return errorReport(loc, fmt.Errorf("the object is no longer the version the event named (%s): %w", describe(ev), err)), true
		}
		return errorReport(loc, &source.IOError{Location: redact(loc), Op: "open", Err: err}), false
	}
	if ev.Size >= 0 && b.Size() != ev.Size {
		b.Close()
		return errorReport(loc, fmt.Errorf("%s: %w: the event announced %d bytes, the object has %d", redact(loc), remote.ErrObjectChanged, ev.Size, b.Size())), true
	}
	o, err := source.NewObject(b.Name(), b, b.Size(), b, nil)
	if err != nil {
		b.Close()
		return errorReport(loc, err), errors.Is(err, remote.ErrObjectChanged)
	}
	defer o.Close()
	r := audit.ScanObject(ctx, loc, o, w.cfg.audit...)
	if r.Verdict == audit.Error && errors.Is(r.Err, remote.ErrObjectChanged) {
		return *r, true
	}
	return *r, false
}

// pinnedVersion spells the event's version as the store's reads return
// it: an S3 ETag in quotes, a GCS generation; "" where the location's
// store cannot pin one (file://: its size is compared instead).
func pinnedVersion(loc string, ev *Event) string {
	scheme, _, _ := strings.Cut(loc, "://")
	switch {
	case scheme == "s3" && ev.ETag != "":
		return `"` + ev.ETag + `"`
	case scheme == "gs" && ev.Generation != "":
		return "generation " + ev.Generation
	}
	return ""
}

func describe(ev *Event) string {
	var parts []string
	if ev.ETag != "" {
		parts = append(parts, "ETag "+ev.ETag)
	}
	if ev.VersionID != "" {
		parts = append(parts, "version "+ev.VersionID)
	}
	if ev.Generation != "" {
		parts = append(parts, "generation "+ev.Generation)
	}
	if len(parts) == 0 {
		return "no version"
	}
	return strings.Join(parts, ", ")
}

// redact drops a location's query (endpoints, options) for messages.
func redact(loc string) string {
	if p, _, ok := strings.Cut(loc, "?"); ok {
		return p + "?…"
	}
	return loc
}

// maxResultBytes bounds a result document read back.
const maxResultBytes = 64 << 20

// lookup reads the result at key; nil, nil if there is none.
func (w *Worker) lookup(ctx context.Context, key string) (*Result, error) {
	o, err := w.pool.Open(ctx, blobstore.JoinURL(w.cfg.results, key))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer o.Close()
	if o.Size() > maxResultBytes {
		return nil, nil // not one of ours: rewritten
	}
	b, err := io.ReadAll(io.NewSectionReader(o, 0, o.Size()))
	if err != nil {
		return nil, err
	}
	var r Result
	if json.Unmarshal(b, &r) != nil {
		return nil, nil // damaged: rewritten
	}
	return &r, nil
}

// store writes a result durably. A failed write is retried by a later
// delivery, except on the last, where nothing more can be done than say
// so in the log.
func (w *Worker) store(ctx context.Context, key string, r *Result, last bool) outcome {
	b, err := r.marshal()
	if err == nil {
		err = w.mkdir(key)
	}
	if err == nil {
		err = w.pool.Write(ctx, blobstore.JoinURL(w.cfg.results, key), b)
	}
	if err != nil {
		if ctx.Err() != nil {
			return stopped
		}
		w.log.Error("writing a result failed", "key", key, "error", err.Error(), "last_delivery", last)
		return retry
	}
	w.stats.results.Add(1)
	if r.Verdict == audit.Error && last {
		w.stats.failed.Add(1)
	}
	w.log.Debug("result written", "key", key, "verdict", r.Verdict.String(), "attempts", r.Attempts)
	return done
}

// mkdir makes the directory of a file:// result (the bucket of a file://
// URL is its directory, which must exist).
func (w *Worker) mkdir(key string) error {
	u, err := url.Parse(blobstore.JoinURL(w.cfg.results, key))
	if err != nil || u.Scheme != "file" {
		return nil
	}
	dir := filepath.Dir(filepath.FromSlash(u.Path))
	w.dirsMu.Lock()
	defer w.dirsMu.Unlock()
	if w.dirsMade[dir] {
		return nil
	}
	if err := os.MkdirAll(dir, 0o777); err != nil {
		return err
	}
	w.dirsMade[dir] = true
	return nil
}
