package queue_test

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/gosafetensors/safetensors/audit"
	"github.com/gosafetensors/safetensors/internal/s3test"
	"github.com/gosafetensors/safetensors/queue"
	"github.com/gosafetensors/safetensors/queue/embedded"
	_ "github.com/gosafetensors/safetensors/remote/blobstore/s3store"
)

// fixture is one kind of upload: its bytes and the report scan gives them.
type fixture struct {
	kind string
	data []byte
	want *audit.ScanReport
}

// fixtures are a clean checkpoint, a dangerous pickle, a broken
// checkpoint and a safetensors file, from testdata.
func fixtures(t testing.TB) []fixture {
	t.Helper()
	var fs []fixture
	for _, f := range []struct{ kind, file string }{
		{"clean", "torch/tiny_transformer.bin"},
		{"dangerous", "malicious/reduce_posix_system_p2.pkl"},
		{"broken", "broken/truncated_zip_half.bin"},
		{"safetensors", "torch/tiny_transformer.safetensors"},
	} {
		b, err := os.ReadFile(filepath.Join("..", "testdata", f.file))
		if err != nil {
			t.Fatal(err)
		}
		rep := audit.ScanReader(context.Background(), f.kind, bytes.NewReader(b), int64(len(b)))
		fs = append(fs, fixture{f.kind, b, rep})
	}
	want := map[string]audit.Verdict{"clean": audit.Clean, "dangerous": audit.Dangerous, "broken": audit.Invalid, "safetensors": audit.Clean}
	for _, f := range fs {
		if f.want.Verdict != want[f.kind] {
			t.Fatalf("%s: scan says %v, want %v", f.kind, f.want.Verdict, want[f.kind])
		}
	}
	return fs
}

// store is gofakes3 on loopback (internal/s3test) with the real AWS SDK's
// credentials chain pointed at fake keys; it counts the GETs of every key
// and can slow them.
type store struct {
	*s3test.Server
	delay atomic.Int64 // per GET, in nanoseconds
	slow  sync.Map     // key -> time.Duration: a GET of it takes that long
	mu    sync.Mutex
	gets  map[string]int
}

func newStore(t testing.TB, buckets ...string) *store {
	t.Helper()
	s := &store{Server: s3test.Start(t, buckets...), gets: map[string]int{}}
	h := s.S3
	s.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet && !r.URL.Query().Has("list-type") {
			key := r.URL.Path
			s.mu.Lock()
			s.gets[key]++
			s.mu.Unlock()
			d := time.Duration(s.delay.Load())
			if v, ok := s.slow.Load(key); ok {
				d = v.(time.Duration)
			}
			if d > 0 {
				select {
				case <-time.After(d):
				case <-r.Context().Done():
					return
				}
			}
		}
		h.ServeHTTP(w, r)
	})
	return s
}

// put stores an object and returns its ETag (the MD5, without quotes).
func (s *store) put(t testing.TB, bucket, key string, data []byte) string {
	t.Helper()
	s.Put(t, bucket, key, data)
	sum := md5.Sum(data)
	return hex.EncodeToString(sum[:])
}

// getsOf returns how many GETs asked for bucket/key.
func (s *store) getsOf(bucket, key string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.gets["/"+bucket+"/"+key]
}

// location is the event-location template for this store.
func (s *store) location() string { return "s3://{bucket}/{key}?" + s.Query() }

// startNATS runs a real NATS server with JetStream (file storage) on a
// loopback port.
func startNATS(t testing.TB) *embedded.Server {
	t.Helper()
	srv, err := embedded.Start(embedded.WithStoreDir(t.TempDir()), embedded.WithAddr("127.0.0.1:0"), embedded.WithSyncAlways(false))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	return srv
}

func connect(t testing.TB, srv *embedded.Server) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return nc, js
}

// s3Event is the notification S3 sends for one upload.
func s3Event(bucket, key, etag string, size int, seq int) []byte {
	b, _ := json.Marshal(map[string]any{"Records": []any{map[string]any{
		"eventVersion": "2.1", "eventSource": "aws:s3", "eventName": "ObjectCreated:Put",
		"s3": map[string]any{
			"bucket": map[string]any{"name": bucket},
			"object": map[string]any{"key": url.QueryEscape(key), "size": size, "eTag": etag, "sequencer": fmt.Sprintf("%016X", seq)},
		},
	}}})
	return b
}

// publish publishes a message and waits for JetStream to store it; the
// stream must exist (ensureStream).
func publish(t testing.TB, js jetstream.JetStream, subject string, msg []byte) {
	t.Helper()
	if _, err := js.Publish(context.Background(), subject, msg); err != nil {
		t.Fatal(err)
	}
}

// ensureStream creates the stream as a worker would, so that events can
// be published before any worker runs.
func ensureStream(t testing.TB, js jetstream.JetStream, subject string) {
	t.Helper()
	_, err := js.CreateStream(context.Background(), jetstream.StreamConfig{Name: queue.DefaultStream, Subjects: []string{subject},
		Storage: jetstream.FileStorage, Retention: jetstream.WorkQueuePolicy})
	if err != nil {
		t.Fatal(err)
	}
}

// readResults reads every result document under dir (file:// results).
func readResults(t testing.TB, dir string) map[string]*queue.Result {
	t.Helper()
	out := map[string]*queue.Result{}
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if strings.HasPrefix(d.Name(), ".") {
			out[rel] = nil // a temporary file
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		var r queue.Result
		if err := json.Unmarshal(b, &r); err != nil {
			return fmt.Errorf("%s: %v", rel, err)
		}
		out[rel] = &r
		return nil
	})
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return out
}

// countResults counts result documents under dir.
func countResults(dir string) int {
	n := 0
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(d.Name(), ".json") && !strings.HasPrefix(d.Name(), ".") {
			n++
		}
		return nil
	})
	return n
}

// waitFor polls cond (every 20ms) until it holds or the deadline passes.
func waitFor(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// sameReport reports whether a result says what scan said of the same
// bytes: the verdict, the format, every global and opcode, as many
// problems (whose text names the file).
func sameReport(got audit.ScanReport, want *audit.ScanReport) bool {
	g, w := got, *want
	g.Path, w.Path, g.Err, w.Err = "", "", nil, nil
	if len(g.Problems) != len(w.Problems) || g.Error != "" || w.Error != "" {
		return false
	}
	g.Problems, w.Problems = nil, nil
	gb, _ := json.Marshal(g)
	wb, _ := json.Marshal(w)
	return bytes.Equal(gb, wb)
}
