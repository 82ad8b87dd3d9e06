package serve_test

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/gosafetensors/safetensors/serve"
)

const testToken = "test-token-0123456789abcdef"

// logBuffer collects the service's log lines.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// testServer is a running service on a loopback port.
type testServer struct {
	*serve.Server
	URL    string
	logs   *logBuffer
	cancel context.CancelFunc
	done   chan error
}

// start runs a service on 127.0.0.1 with a root holding the testdata
// fixtures (copied) and opts.
func start(t testing.TB, opts ...serve.Option) *testServer {
	t.Helper()
	logs := &logBuffer{}
	all := append([]serve.Option{serve.WithLogger(slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))),
		serve.WithSpoolDir(t.TempDir())}, opts...)
	s, err := serve.New(all...)
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ts := &testServer{Server: s, URL: "http://" + l.Addr().String(), logs: logs, cancel: cancel, done: make(chan error, 1)}
	go func() { ts.done <- s.Serve(ctx, l) }()
	t.Cleanup(func() {
		cancel()
		<-ts.done
		s.Close()
	})
	return ts
}

// rootDir makes a root with a clean model, a sharded model and malicious
// checkpoints.
func rootDir(t testing.TB) string {
	dir := t.TempDir()
	for _, f := range []string{"torch/tiny_transformer.safetensors", "torch/tiny_transformer.bin", "malicious/torch_zip_os_system.bin", "malicious/reduce_posix_system_p2.pkl"} {
		b, err := os.ReadFile("../testdata/" + f)
		if err != nil {
			t.Fatal(err)
		}
		os.MkdirAll(filepath.Join(dir, filepath.Dir(f)), 0o755)
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func loopback() serve.Option {
	return serve.WithAllowAddresses(netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128"))
}

// do sends a request and returns the status and body.
func do(t testing.TB, method, url, token string, body io.Reader, hdr ...string) (int, string, http.Header) {
	t.Helper()
	req, err := http.NewRequest(method, url, body)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header
}

func contains(s string, subs ...string) bool {
	for _, x := range subs {
		if !strings.Contains(s, x) {
			return false
		}
	}
	return true
}

func discardLogger() *slog.Logger { return slog.New(slog.NewJSONHandler(io.Discard, nil)) }
