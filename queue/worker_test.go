package queue_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/gosafetensors/safetensors/audit"
	"github.com/gosafetensors/safetensors/queue"
)

// runWorker runs a worker until the test ends (then it must drain and
// return nil).
func runWorker(t *testing.T, nc *nats.Conn, opts ...queue.Option) *queue.Worker {
	t.Helper()
	w, err := queue.New(nc, append([]queue.Option{queue.WithLogger(quiet)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- w.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-errc; err != nil {
			t.Errorf("Run: %v", err)
		}
		w.Close()
	})
	return w
}

// quiet drops the workers' logs (run -v with GOSAFETENSORS_QUEUE_LOG=1 to see them).
var quiet = func() *slog.Logger {
	if os.Getenv("GOSAFETENSORS_QUEUE_LOG") == "1" {
		return slog.Default()
	}
	return slog.New(slog.DiscardHandler)
}()

// waitConsumer waits until a worker made the stream and the consumer.
func waitConsumer(t *testing.T, js jetstream.JetStream) {
	waitFor(t, 10*time.Second, "the worker's consumer", func() bool {
		_, err := js.Consumer(context.Background(), queue.DefaultStream, queue.DefaultConsumer)
		return err == nil
	})
}

// One worker against a real NATS server and gofakes3: every object gets
// the verdict scan gives its bytes, in one document per version; a
// message delivered again costs no read; an object replaced or deleted
// since its event is reported changed (its new bytes are not audited in
// its place); a message that is not an event, and an object whose reads
// keep timing out, end as "error" results after a bounded number of
// deliveries.
func TestWorker(t *testing.T) {
	fx := fixtures(t)
	s := newStore(t, "uploads")
	srv := startNATS(t)
	nc, js := connect(t, srv)
	results := t.TempDir()
	w := runWorker(t, nc, queue.WithResults("file://"+filepath.ToSlash(results)), queue.WithEventLocation(s.location()),
		queue.WithAckWait(2*time.Second), queue.WithMaxDeliver(3), queue.WithRetryDelay(10*time.Millisecond),
		queue.WithAuditTimeout(2*time.Second), queue.WithPollWait(100*time.Millisecond))
	waitConsumer(t, js)

	type upload struct {
		key, etag string
		f         fixture
		event     []byte
	}
	var ups []upload
	for i := range 20 {
		f := fx[i%len(fx)]
		key := fmt.Sprintf("in/%s %d+x [%%].bin", f.kind, i) // a key S3 sends encoded
		etag := s.put(t, "uploads", key, f.data)
		ups = append(ups, upload{key, etag, f, s3Event("uploads", key, etag, len(f.data), i)})
	}
	for _, u := range ups {
		publish(t, js, queue.DefaultSubject, u.event)
	}
	// replaced since the event, deleted since the event
	oldTag := s.put(t, "uploads", "in/replaced.bin", fx[0].data)
	s.put(t, "uploads", "in/replaced.bin", fx[1].data)
	publish(t, js, queue.DefaultSubject, s3Event("uploads", "in/replaced.bin", oldTag, len(fx[0].data), 100))
	publish(t, js, queue.DefaultSubject, s3Event("uploads", "in/deleted.bin", oldTag, len(fx[0].data), 101))
	// not an event; a removal (no result); an object whose reads hang
	publish(t, js, queue.DefaultSubject, []byte(`{"Records": [{"eventName": "ObjectCreated:Put", "s3": `))
	publish(t, js, queue.DefaultSubject, []byte(`{"Records":[{"eventName":"ObjectRemoved:Delete","s3":{"bucket":{"name":"uploads"},"object":{"key":"x"}}}]}`))
	slowTag := s.put(t, "uploads", "in/slow.bin", fx[0].data)
	s.slow.Store("/uploads/in/slow.bin", time.Minute)
	publish(t, js, queue.DefaultSubject, s3Event("uploads", "in/slow.bin", slowTag, len(fx[0].data), 102))

	want := len(ups) + 2 + 1 + 1
	waitFor(t, 60*time.Second, fmt.Sprintf("%d results", want), func() bool { return countResults(results) >= want })
	waitFor(t, 10*time.Second, "every message acknowledged", func() bool { return w.Stats().Messages >= int64(len(ups)+5+2) && pending(t, js) == 0 })
	docs := readResults(t, results)
	if len(docs) != want {
		t.Fatalf("%d documents, want %d: %v", len(docs), want, keys(docs))
	}
	for _, u := range ups {
		ev := queue.Event{Bucket: "uploads", Key: u.key, ETag: u.etag}
		r := docs[filepath.FromSlash(queue.ResultKey(&ev))]
		if r == nil {
			t.Fatalf("no result for %q (%s)", u.key, queue.ResultKey(&ev))
		}
		if !sameReport(r.ScanReport, u.f.want) || r.Bucket != "uploads" || r.Key != u.key || r.ETag != u.etag || r.Attempts != 1 || r.Changed {
			t.Errorf("%s: %+v, want the verdict %v", u.key, r, u.f.want.Verdict)
		}
		if !strings.HasPrefix(r.Path, "s3://uploads/in/") {
			t.Errorf("path %q", r.Path)
		}
	}
	for _, k := range []string{"in/replaced.bin", "in/deleted.bin"} {
		ev := queue.Event{Bucket: "uploads", Key: k, ETag: oldTag}
		r := docs[filepath.FromSlash(queue.ResultKey(&ev))]
		if r == nil || !r.Changed || r.Verdict != audit.Error || r.Attempts != 1 {
			t.Errorf("%s: %+v, want changed", k, r)
		}
	}
	if g := s.getsOf("uploads", "in/replaced.bin"); g != 1 {
		t.Errorf("the replaced object was read %d times, want once (the pinned first read)", g)
	}
	ev := queue.Event{Bucket: "uploads", Key: "in/slow.bin", ETag: slowTag}
	if r := docs[filepath.FromSlash(queue.ResultKey(&ev))]; r == nil || r.Verdict != audit.Error || r.Attempts != 3 || r.Changed {
		t.Errorf("slow object: %+v, want an error after 3 deliveries", r)
	}
	if g := s.getsOf("uploads", "in/slow.bin"); g != 3 {
		t.Errorf("the slow object was read %d times, want 3 (one per delivery)", g)
	}
	var invalid *queue.Result
	for k, r := range docs {
		if strings.HasPrefix(k, "invalid-events") {
			invalid = r
		}
	}
	if invalid == nil || invalid.Verdict != audit.Error || !strings.Contains(invalid.Error, "not a bucket event") {
		t.Errorf("invalid event: %+v", invalid)
	}

	// Every event delivered again: the results stand, no object is read.
	before := map[string]int{}
	for _, u := range ups {
		before[u.key] = s.getsOf("uploads", u.key)
	}
	st := w.Stats()
	for _, u := range ups {
		publish(t, js, queue.DefaultSubject, u.event)
	}
	waitFor(t, 30*time.Second, "the events again", func() bool { return w.Stats().Reused >= st.Reused+int64(len(ups)) })
	for _, u := range ups {
		if g := s.getsOf("uploads", u.key); g != before[u.key] {
			t.Errorf("%s read again (%d GETs, then %d)", u.key, before[u.key], g)
		}
	}
	if n := countResults(results); n != want {
		t.Errorf("%d documents after redelivery, want %d", n, want)
	}

	// The same ETag in a new event (a new sequencer: another upload of
	// the key, which an MD5 collision could make other bytes) is read
	// again and its document rewritten; a version ID names one write, so
	// its result stands for any event naming it.
	u := ups[1]
	st = w.Stats()
	publish(t, js, queue.DefaultSubject, s3Event("uploads", u.key, u.etag, len(u.f.data), 500))
	waitFor(t, 30*time.Second, "the new upload", func() bool { return w.Stats().Results > st.Results })
	if g := s.getsOf("uploads", u.key); g != before[u.key]+1 {
		t.Errorf("a new upload with the same ETag: %d GETs, want %d", g, before[u.key]+1)
	}
	versioned := func(seq int) []byte {
		return []byte(fmt.Sprintf(`{"Records":[{"eventName":"ObjectCreated:Put","s3":{"bucket":{"name":"uploads"},"object":{"key":%q,"eTag":%q,"versionId":"3/L4kqtJl+cpXroDTDmJ=","sequencer":"%d"}}}]}`,
			url.QueryEscape(u.key), u.etag, seq))
	}
	publish(t, js, queue.DefaultSubject, versioned(600))
	ev = queue.Event{Bucket: "uploads", Key: u.key, ETag: u.etag, VersionID: "3/L4kqtJl+cpXroDTDmJ="}
	waitFor(t, 30*time.Second, "the versioned result", func() bool { return readResults(t, results)[filepath.FromSlash(queue.ResultKey(&ev))] != nil })
	gets := s.getsOf("uploads", u.key)
	st = w.Stats()
	publish(t, js, queue.DefaultSubject, versioned(601))
	waitFor(t, 30*time.Second, "the versioned event again", func() bool { return w.Stats().Reused > st.Reused })
	if g := s.getsOf("uploads", u.key); g != gets {
		t.Errorf("a version ID audited twice (%d GETs, then %d)", gets, g)
	}
	if r := readResults(t, results)[filepath.FromSlash(queue.ResultKey(&ev))]; r == nil || r.Version != ev.VersionID || r.Verdict != u.f.want.Verdict {
		t.Errorf("versioned result: %+v", r)
	}
	t.Logf("stats %+v", w.Stats())
}

// GCS notifications (the object resource, its attributes in headers),
// here against objects in a local directory: the generation names the
// version; an object whose size is not the announced one is reported
// changed.
func TestWorkerGCSEvents(t *testing.T) {
	fx := fixtures(t)
	srv := startNATS(t)
	nc, js := connect(t, srv)
	objects, results := t.TempDir(), t.TempDir()
	w := runWorker(t, nc, queue.WithResults("file://"+filepath.ToSlash(results)), queue.WithEventLocation("file://"+filepath.ToSlash(objects)+"/{key}"),
		queue.WithPollWait(100*time.Millisecond), queue.WithBuckets("models"))
	waitConsumer(t, js)
	for i, f := range fx {
		name := f.kind + ".bin"
		if err := os.WriteFile(filepath.Join(objects, name), f.data, 0o644); err != nil {
			t.Fatal(err)
		}
		size := len(f.data)
		if i == 0 {
			size++ // the object on disk is not the one announced
		}
		msg := nats.NewMsg(queue.DefaultSubject)
		msg.Data = []byte(fmt.Sprintf(`{"kind":"storage#object","bucket":"models","name":%q,"generation":"17000000000%02d","size":"%d"}`, name, i, size))
		msg.Header.Set("eventType", "OBJECT_FINALIZE")
		if _, err := js.PublishMsg(context.Background(), msg); err != nil {
			t.Fatal(err)
		}
	}
	// a bucket this worker does not audit
	publish(t, js, queue.DefaultSubject, []byte(`{"kind":"storage#object","bucket":"other","name":"x.bin","generation":"1"}`))
	waitFor(t, 30*time.Second, "the results", func() bool { return countResults(results) >= len(fx)+1 })
	docs := readResults(t, results)
	for i, f := range fx {
		ev := queue.Event{Bucket: "models", Key: f.kind + ".bin", Generation: fmt.Sprintf("17000000000%02d", i)}
		r := docs[filepath.FromSlash(queue.ResultKey(&ev))]
		switch {
		case r == nil:
			t.Errorf("%s: no result", f.kind)
		case i == 0 && (!r.Changed || r.Verdict != audit.Error):
			t.Errorf("%s: %+v, want changed", f.kind, r)
		case i > 0 && !sameReport(r.ScanReport, f.want):
			t.Errorf("%s: %+v, want %v", f.kind, r, f.want.Verdict)
		}
	}
	ev := queue.Event{Bucket: "other", Key: "x.bin", Generation: "1"}
	if r := docs[filepath.FromSlash(queue.ResultKey(&ev))]; r == nil || r.Verdict != audit.Error || !strings.Contains(r.Error, "not one this worker audits") {
		t.Errorf("another bucket: %+v", r)
	}
	if st := w.Stats(); st.Audited != int64(len(fx)) {
		t.Errorf("stats %+v: the other bucket was read", st)
	}
}

// An audit longer than the ack wait is not delivered to another worker:
// the worker's heartbeats keep the message its own.
func TestHeartbeat(t *testing.T) {
	fx := fixtures(t)
	s := newStore(t, "uploads")
	srv := startNATS(t)
	results := t.TempDir()
	var ws []*queue.Worker
	for range 2 {
		nc, _ := connect(t, srv)
		ws = append(ws, runWorker(t, nc, queue.WithResults("file://"+filepath.ToSlash(results)), queue.WithEventLocation(s.location()),
			queue.WithAckWait(time.Second), queue.WithPollWait(100*time.Millisecond)))
	}
	_, js := connect(t, srv)
	waitConsumer(t, js)
	etag := s.put(t, "uploads", "in/long.bin", fx[0].data)
	s.slow.Store("/uploads/in/long.bin", 3*time.Second) // three ack waits
	publish(t, js, queue.DefaultSubject, s3Event("uploads", "in/long.bin", etag, len(fx[0].data), 1))
	waitFor(t, 30*time.Second, "the result", func() bool { return countResults(results) == 1 })
	time.Sleep(time.Second) // a redelivery would have come by now
	ev := queue.Event{Bucket: "uploads", Key: "in/long.bin", ETag: etag}
	r := readResults(t, results)[filepath.FromSlash(queue.ResultKey(&ev))]
	if r == nil || r.Attempts != 1 || r.Verdict != fx[0].want.Verdict {
		t.Fatalf("result %+v", r)
	}
	if g := s.getsOf("uploads", "in/long.bin"); g != 1 {
		t.Errorf("the object was read %d times, want once", g)
	}
	if m := ws[0].Stats().Messages + ws[1].Stats().Messages; m != 1 {
		t.Errorf("%d deliveries, want 1", m)
	}
}

func keys[V any](m map[string]V) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	return ks
}

// pending returns the messages of the stream not yet acknowledged.
func pending(t *testing.T, js jetstream.JetStream) uint64 {
	st, err := js.Stream(context.Background(), queue.DefaultStream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return info.State.Msgs
}
