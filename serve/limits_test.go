package serve_test

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gosafetensors/safetensors/serve"
)

// A client that sends its headers, or its body, too slowly is cut off
// (slowloris): the connection is closed, the slot freed.
func TestSlowClients(t *testing.T) {
	lim := serve.DefaultLimits()
	lim.ReadHeaderTimeout = 200 * time.Millisecond
	lim.BodyIdleTimeout = 200 * time.Millisecond
	ts := start(t, serve.WithLimits(lim))
	addr := strings.TrimPrefix(ts.URL, "http://")

	// headers never finished
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	io.WriteString(c, "POST /v1/scan HTTP/1.1\r\nHost: x\r\nX-Slow: ")
	c.SetReadDeadline(time.Now().Add(20 * time.Second))
	if _, err := io.ReadAll(c); err != nil {
		t.Fatalf("a connection with unfinished headers was not closed: %v", err)
	}

	// a body that stalls
	c2, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	io.WriteString(c2, "POST /v1/scan HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n0123456789")
	c2.SetReadDeadline(time.Now().Add(20 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c2), nil)
	if err != nil {
		t.Fatalf("a stalled upload got no answer: %v", err)
	}
	if resp.StatusCode != http.StatusRequestTimeout {
		t.Fatalf("a stalled upload: %s", resp.Status)
	}
}

// blocker is an allowed loopback location whose server holds every
// request until released: audits that take as long as a test wants.
type blocker struct {
	url     string
	arrived chan struct{}
	release chan struct{}
	once    sync.Once
}

func newBlocker(t *testing.T) *blocker {
	b := &blocker{arrived: make(chan struct{}, 100), release: make(chan struct{})}
	srv := serveCounting(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b.arrived <- struct{}{}
		<-b.release
		http.Error(w, "gone", http.StatusNotFound)
	}))
	b.url = srv.URL + "/slow.bin"
	t.Cleanup(b.free)
	return b
}

func (b *blocker) free() { b.once.Do(func() { close(b.release) }) }

// Past the running and queued audits the service answers 503 with
// Retry-After at once, never crashes, and serves again once they end.
func TestOverload(t *testing.T) {
	lim := serve.DefaultLimits()
	lim.MaxConcurrent, lim.MaxQueued = 1, 1
	ts := start(t, serve.WithLimits(lim), serve.WithAllowLocations("http://127.0.0.1:*/**"), loopback(), serve.WithRoot(rootDir(t)))
	b := newBlocker(t)
	var wg sync.WaitGroup
	codes := make(chan int, 2)
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			code, _, _ := do(t, "POST", ts.URL+"/v1/scan?location="+b.url, "", nil)
			codes <- code
		}()
	}
	<-b.arrived // one running; wait until the other is queued
	for i := 0; ; i++ {
		_, m, _ := do(t, "GET", ts.URL+"/metrics", "", nil)
		if strings.Contains(m, "safetensors_serve_audits_queued 1") {
			break
		}
		if i > 2000 {
			t.Fatal("the second audit never queued")
		}
		time.Sleep(5 * time.Millisecond)
	}
	for _, req := range []struct{ method, path string }{
		{"POST", "/v1/scan?location=torch/tiny_transformer.bin"},
		{"GET", "/v1/inspect?location=torch/tiny_transformer.safetensors"},
		{"GET", "/?location=torch/tiny_transformer.safetensors"},
	} {
		code, _, hdr := do(t, req.method, ts.URL+req.path, "", nil)
		if code != http.StatusServiceUnavailable || hdr.Get("Retry-After") == "" {
			t.Errorf("%s %s at capacity: %d, Retry-After %q", req.method, req.path, code, hdr.Get("Retry-After"))
		}
	}
	if code, _, _ := do(t, "GET", ts.URL+"/healthz", "", nil); code != 200 {
		t.Errorf("healthz at capacity: %d", code)
	}
	b.free()
	wg.Wait()
	close(codes)
	for c := range codes {
		if c != 200 {
			t.Errorf("a held audit ended %d", c)
		}
	}
	if code, body, _ := do(t, "POST", ts.URL+"/v1/scan?location=torch/tiny_transformer.bin", "", nil); code != 200 || !contains(body, `"clean"`) {
		t.Errorf("after the load: %d %s", code, body)
	}
	_, m, _ := do(t, "GET", ts.URL+"/metrics", "", nil)
	if !contains(m, `safetensors_serve_rejected_total{reason="overload"} 3`, `safetensors_serve_verdicts_total{verdict="clean"} 1`, `safetensors_serve_verdicts_total{verdict="error"} 2`) {
		t.Errorf("metrics:\n%s", grep(m, "safetensors_serve"))
	}
}

func grep(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// Shutting down drains: new connections are refused, an audit in flight
// finishes with its full answer, Serve returns nil.
func TestDrain(t *testing.T) {
	ts := start(t, serve.WithAllowLocations("http://127.0.0.1:*/**"), loopback())
	b := newBlocker(t)
	got := make(chan string, 1)
	go func() {
		_, body, _ := do(t, "POST", ts.URL+"/v1/scan?location="+b.url, "", nil)
		got <- body
	}()
	<-b.arrived
	ts.cancel()
	for i := 0; ; i++ {
		resp, err := http.Get(ts.URL + "/healthz")
		if err != nil {
			break // no longer accepting
		}
		resp.Body.Close()
		if i > 2000 {
			t.Fatal("still accepting connections while draining")
		}
		time.Sleep(5 * time.Millisecond)
	}
	b.free()
	body := <-got
	if !contains(body, `"path": "`+b.url+`"`, `"verdict": "error"`) || !strings.HasSuffix(body, "]\n") {
		t.Fatalf("the audit in flight: %q", body)
	}
	select {
	case err := <-ts.done:
		if err != nil {
			t.Fatalf("Serve: %v", err)
		}
		ts.done <- nil
	case <-time.After(30 * time.Second):
		t.Fatal("Serve did not return after the drain")
	}
}
