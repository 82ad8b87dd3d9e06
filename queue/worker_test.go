package queue_test

import (
	"context"
	"fmt"
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
	w, err := queue.New(nc, opts...)
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
		queue.WithAckWait(time.Second), queue.WithMaxDeliver(3), queue.WithRetryDelay(10*time.Millisecond),
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
	t.Logf("stats %+v", w.Stats())
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
