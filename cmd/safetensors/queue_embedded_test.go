//go:build natsserver

package main

import (
	"bufio"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// --queue embedded runs a NATS server with JetStream in the process: a
// publisher on loopback reaches it, the worker audits what it publishes,
// and SIGTERM exits 0.
func TestServeQueueEmbedded(t *testing.T) {
	results, store := t.TempDir(), t.TempDir()
	src := t.TempDir()
	b, _ := os.ReadFile("../../testdata/malicious/reduce_posix_system_p2.pkl")
	os.WriteFile(filepath.Join(src, "evil.pkl"), b, 0o644)
	pr, pw := io.Pipe()
	codes := make(chan int, 1)
	go func() {
		codes <- run([]string{"serve", "--queue", "embedded/uploads", "--queue-store", store, "--queue-listen", "127.0.0.1:0",
			"--results", "file://" + filepath.ToSlash(results), "--event-location", "file://" + filepath.ToSlash(src) + "/{key}"}, io.Discard, pw)
		pw.Close()
	}()
	sc := bufio.NewScanner(pr)
	addr := ""
	for sc.Scan() {
		if _, rest, ok := strings.Cut(sc.Text(), " listening on "); ok {
			addr, _, _ = strings.Cut(rest, ",")
			break
		}
	}
	go io.Copy(io.Discard, pr)
	if addr == "" {
		t.Fatal("the embedded server did not say where it listens")
	}
	nc, err := nats.Connect("nats://" + addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	ev := `{"Records":[{"eventName":"ObjectCreated:Put","s3":{"bucket":{"name":"uploads"},"object":{"key":"evil.pkl"}}}]}`
	waitUntil(t, "the stream", func() bool {
		// a plain publish is stored once the worker made the stream; ask for the ack
		_, err := nc.Request("uploads", []byte(ev), time.Second)
		return err == nil
	})
	waitUntil(t, "a result", func() bool {
		m, _ := filepath.Glob(filepath.Join(results, "uploads", "*.json"))
		return len(m) >= 1
	})
	m, _ := filepath.Glob(filepath.Join(results, "uploads", "*.json"))
	doc, _ := os.ReadFile(m[0])
	if !strings.Contains(string(doc), `"verdict": "dangerous"`) {
		t.Errorf("result: %s", doc)
	}
	sigtermExitsZero(t, codes)
}
