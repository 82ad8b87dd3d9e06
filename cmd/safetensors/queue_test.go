package main

import (
	"context"
	"crypto/md5"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/gosafetensors/safetensors/internal/s3test"
	"github.com/gosafetensors/safetensors/queue"
	"github.com/gosafetensors/safetensors/queue/embedded"
)

func TestServeQueueUsage(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"serve", "--results", "file:///tmp/r/"}, "--results is a flag of --queue"},
		{[]string{"serve", "--queue", "nats://127.0.0.1:1/s"}, "needs --results"},
		{[]string{"serve", "--queue", "http://127.0.0.1:1/s", "--results", "file:///tmp/r/"}, "want nats://"},
		{[]string{"serve", "--queue", "nats://127.0.0.1:1/s", "--results", "file:///tmp/r/", "--addr", "127.0.0.1:9"}, "serves no HTTP"},
		{[]string{"serve", "--queue", "embedded", "--queue-listen", "0.0.0.0:4222", "--results", "file:///tmp/r/"}, "not a loopback address"},
		{[]string{"serve", "--queue", "nats://127.0.0.1:1/s", "--results", "file:///tmp/r/", "--event-location", "s3://{bucket}/x"}, "{key}"},
	} {
		code, _, errOut := runCLI(t, c.args...)
		if code != 2 || !strings.Contains(errOut, c.want) {
			t.Errorf("%v: exit %d, %q; want exit 2 saying %q", c.args, code, errOut, c.want)
		}
	}
}

// safetensors serve --queue against a real NATS server on loopback and
// gofakes3: each object an event names gets a result document whose scan
// fields are byte for byte what scan --json prints for the same bytes;
// SIGTERM drains and exits 0.
func TestServeQueue(t *testing.T) {
	q := startQueueWorker(t, "--ack-wait", "5s", "--max-concurrent", "2")
	files := []string{"torch/tiny_transformer.bin", "malicious/reduce_posix_system_p2.pkl", "broken/truncated_zip_half.bin", "torch/tiny_transformer.safetensors"}
	for i, f := range files {
		b, err := os.ReadFile("../../testdata/" + f)
		if err != nil {
			t.Fatal(err)
		}
		q.upload(t, "in/"+f, b, i)
	}
	results := q.results
	waitUntil(t, "4 results", func() bool {
		m, _ := filepath.Glob(filepath.Join(results, "uploads", "*.json"))
		return len(m) == len(files)
	})
	sigtermExitsZero(t, q.codes)
	for _, f := range files {
		b, _ := os.ReadFile("../../testdata/" + f)
		sum := md5.Sum(b)
		ev := queue.Event{Bucket: "uploads", Key: "in/" + f, ETag: hex.EncodeToString(sum[:])}
		doc, err := os.ReadFile(filepath.Join(results, filepath.FromSlash(queue.ResultKey(&ev))))
		if err != nil {
			t.Fatal(err)
		}
		var got map[string]any
		json.Unmarshal(doc, &got)
		_, out, _ := runCLI(t, "scan", "--json", "../../testdata/"+f)
		var want []map[string]any
		json.Unmarshal([]byte(out), &want)
		if len(want) != 1 {
			t.Fatalf("scan --json %s: %s", f, out)
		}
		for k, v := range want[0] {
			if k == "path" {
				continue
			}
			if gb, wb := jsonOf(got[k]), jsonOf(v); gb != wb {
				t.Errorf("%s: %s is %s in the result, %s in scan --json", f, k, gb, wb)
			}
		}
		if got["bucket"] != "uploads" || got["key"] != "in/"+f || got["attempts"] != 1.0 {
			t.Errorf("%s: %s", f, doc)
		}
	}
}

// queueWorker is safetensors serve --queue running in the test's process
// against a real NATS server with JetStream and gofakes3 (bucket
// "uploads"), both on loopback, until the test sends SIGTERM
// (sigtermExitsZero).
type queueWorker struct {
	s3      *s3test.Server
	js      jetstream.JetStream
	results string   // the --results directory
	codes   chan int // the command's exit code
}

// startQueueWorker starts serve --queue with args besides the queue,
// results and event location, and waits until its consumer exists.
func startQueueWorker(t *testing.T, args ...string) *queueWorker {
	t.Helper()
	q := &queueWorker{s3: s3test.Start(t, "uploads"), results: t.TempDir(), codes: make(chan int, 1)}
	ns, err := embedded.Start(embedded.WithStoreDir(t.TempDir()), embedded.WithAddr("127.0.0.1:0"), embedded.WithSyncAlways(false))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ns.Shutdown)
	nc, err := nats.Connect(ns.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	q.js, _ = jetstream.New(nc)
	pr, pw := io.Pipe()
	go func() {
		q.codes <- run(append([]string{"serve", "--queue", ns.ClientURL() + "/uploads.events", "--results", "file://" + filepath.ToSlash(q.results),
			"--event-location", "s3://{bucket}/{key}?" + q.s3.Query()}, args...), io.Discard, pw)
		pw.Close()
	}()
	go io.Copy(io.Discard, pr)
	waitUntil(t, "the worker's consumer", func() bool {
		_, err := q.js.Consumer(context.Background(), queue.DefaultStream, queue.DefaultConsumer)
		return err == nil
	})
	return q
}

// upload stores data as uploads/key and publishes S3's event for it (seq
// its sequencer); it returns the ETag.
func (q *queueWorker) upload(t *testing.T, key string, data []byte, seq int) string {
	t.Helper()
	q.s3.Put(t, "uploads", key, data)
	sum := md5.Sum(data)
	etag := hex.EncodeToString(sum[:])
	ev := fmt.Sprintf(`{"Records":[{"eventSource":"aws:s3","eventName":"ObjectCreated:Put","s3":{"bucket":{"name":"uploads"},"object":{"key":%q,"size":%d,"eTag":%q,"sequencer":"%02d"}}}]}`,
		url.QueryEscape(key), len(data), etag, seq)
	if _, err := q.js.Publish(context.Background(), "uploads.events", []byte(ev)); err != nil {
		t.Fatal(err)
	}
	return etag
}

// sigtermExitsZero sends this process SIGTERM and waits for the command
// running in it to exit 0.
func sigtermExitsZero(t *testing.T, codes <-chan int) {
	t.Helper()
	syscall.Kill(os.Getpid(), syscall.SIGTERM)
	select {
	case code := <-codes:
		if code != 0 {
			t.Fatalf("exit %d after SIGTERM", code)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("the worker did not exit after SIGTERM")
	}
}

func jsonOf(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
