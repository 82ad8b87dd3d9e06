package serve

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"testing"
	"time"
)

// During Limits.DrainDelay a drain has begun but the listener still
// accepts: a health check on a new connection answers 503 "draining" (a
// balancer stops sending), every other request is answered as before and
// asks for its connection to be closed; once the delay ends, new
// connections are refused and Serve returns nil. The delay is an hour,
// ended by the test: nothing here depends on the clock.
func TestDrainDelayHealthz(t *testing.T) {
	lim := DefaultLimits()
	lim.DrainDelay = time.Hour
	s, err := New(WithLimits(lim), WithLogger(slog.New(slog.NewJSONHandler(io.Discard, nil))), WithSpoolDir(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	s.endDelay = make(chan struct{})
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + l.Addr().String()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, l) }()
	// a new connection for every request: what a balancer's check opens
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	get := func(path string) (int, string, error) {
		resp, err := client.Get(url + path)
		if err != nil {
			return 0, "", err
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), nil
	}
	if code, body, err := get("/healthz"); err != nil || code != 200 || body != "ok\n" {
		t.Fatalf("before the drain: %d %q %v", code, body, err)
	}
	cancel()
	for {
		code, body, err := get("/healthz")
		if err != nil {
			t.Fatalf("refused during the drain delay: %v", err)
		}
		if code == http.StatusServiceUnavailable && body == "draining\n" {
			break
		}
		if code != 200 {
			t.Fatalf("healthz while the drain starts: %d %q", code, body)
		}
	}
	resp, err := http.Post(url+"/v1/scan", "application/octet-stream", nil)
	if err != nil {
		t.Fatalf("a request during the drain delay: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode == http.StatusServiceUnavailable || !resp.Close {
		t.Errorf("a request during the drain delay: %d, Connection: close %v", resp.StatusCode, resp.Close)
	}
	close(s.endDelay)
	if err := <-done; err != nil {
		t.Fatalf("Serve: %v", err)
	}
	if _, _, err := get("/healthz"); err == nil {
		t.Fatal("still accepting after the drain")
	}
}
