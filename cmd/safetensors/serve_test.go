package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gosafetensors/safetensors/serve"
)

// POST /v1/scan answers byte for byte what scan --json prints for the
// same location, and for the same file uploaded; GET /v1/inspect what
// inspect --json prints.
func TestServeAnswersAsTheCLI(t *testing.T) {
	abs, err := filepath.Abs("../../testdata")
	if err != nil {
		t.Fatal(err)
	}
	t.Chdir(abs)
	s, err := serve.New(serve.WithRoot("."))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	srv := httptest.NewServer(s.Handler())
	defer srv.Close()
	post := func(path string, body io.Reader) string {
		resp, err := http.Post(srv.URL+path, "application/octet-stream", body)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	for _, loc := range []string{"malicious", "torch/tiny_transformer.bin", "malicious/reduce_posix_system_p2.pkl", "broken/truncated_zip_half.bin",
		"safetensors/files", "unsupported/quantized.pt", "torch/missing.bin"} {
		_, want, _ := runCLI(t, "scan", "--json", loc)
		if got := post("/v1/scan?location="+url.QueryEscape(loc), nil); got != want {
			t.Errorf("scan %s: the service and the CLI differ\nservice:\n%.600s\nCLI:\n%.600s", loc, got, want)
		}
	}
	for _, file := range []string{"torch/tiny_transformer.bin", "malicious/torch_zip_os_system.bin", "torch/tiny_transformer.safetensors"} {
		dir := t.TempDir()
		b, _ := os.ReadFile(file)
		os.WriteFile(filepath.Join(dir, "up.bin"), b, 0o644)
		t.Chdir(dir)
		_, want, _ := runCLI(t, "scan", "--json", "up.bin")
		t.Chdir(abs)
		if got := post("/v1/scan?name=up.bin", bytes.NewReader(b)); got != want {
			t.Errorf("upload of %s: the service and the CLI differ\nservice:\n%.600s\nCLI:\n%.600s", file, got, want)
		}
	}
	for _, loc := range []string{"torch/tiny_transformer.safetensors", "torch/tied_weights.pt", "torch/many_tensors.pt"} {
		_, want, _ := runCLI(t, "inspect", "--json", loc)
		resp, err := http.Get(srv.URL + "/v1/inspect?location=" + url.QueryEscape(loc))
		if err != nil {
			t.Fatal(err)
		}
		got, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if string(got) != want {
			t.Errorf("inspect %s: the service and the CLI differ\nservice:\n%.600s\nCLI:\n%.600s", loc, got, want)
		}
	}
}

// serveChildEnv makes the test binary, re-executed, run the service
// (TestServeChild) with the flags it holds instead of the tests: a signal
// then reaches that process, never the one running the tests.
const serveChildEnv = "GOSAFETENSORS_TEST_SERVE_CHILD"

// TestServeChild is the service in a child process of
// TestServeSIGTERMExitsZero; run directly it does nothing.
func TestServeChild(t *testing.T) {
	flags, ok := os.LookupEnv(serveChildEnv)
	if !ok {
		t.Skip("the child process of TestServeSIGTERMExitsZero")
	}
	args := append([]string{"serve", "--addr", "127.0.0.1:0", "--root", "../../testdata"}, strings.Fields(flags)...)
	os.Exit(run(args, io.Discard, os.Stderr))
}

// servedChild is safetensors serve in a child process.
type servedChild struct {
	cmd  *exec.Cmd
	addr string
	done chan struct{} // closed when it has exited, with err
	err  error
}

// serveChild runs safetensors serve with flags in a child process; a test
// that ends first kills it.
func serveChild(t *testing.T, flags string) *servedChild {
	t.Helper()
	c := &servedChild{cmd: exec.Command(os.Args[0], "-test.run=^TestServeChild$", "-test.count=1"), done: make(chan struct{})}
	c.cmd.Env = append(os.Environ(), serveChildEnv+"="+flags)
	stderr, err := c.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c.cmd.Process.Kill()
		<-c.done
	})
	sc := bufio.NewScanner(stderr)
	for sc.Scan() {
		if a, ok := strings.CutPrefix(sc.Text(), "safetensors serve: listening on http://"); ok {
			c.addr = strings.TrimSuffix(a, "/")
			break
		}
	}
	go func() {
		io.Copy(io.Discard, stderr)
		c.err = c.cmd.Wait()
		close(c.done)
	}()
	if c.addr == "" {
		t.Fatal("serve did not say where it listens")
	}
	return c
}

// signal sends sig to the child.
func (c *servedChild) signal(t *testing.T, sig os.Signal) {
	t.Helper()
	if err := c.cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
}

// wait returns how the child exited.
func (c *servedChild) wait(t *testing.T) error {
	t.Helper()
	select {
	case <-c.done:
		return c.err
	case <-time.After(60 * time.Second):
		t.Fatal("serve did not exit")
		return nil
	}
}

// safetensors serve refuses a non-loopback address without a token;
// SIGTERM drains it and it exits 0; during --drain-delay it still accepts
// connections, /healthz answering 503 "draining" and other requests as
// before, and a second signal ends it at once. The service runs in a child
// process: the signals are not sent to the tests.
func TestServeSIGTERMExitsZero(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("no SIGTERM on Windows")
	}
	if code, _, errOut := runCLI(t, "serve", "--addr", "0.0.0.0:0"); code != 2 || !strings.Contains(errOut, "--token-file") {
		t.Fatalf("non-loopback without a token: exit %d %s", code, errOut)
	}
	// a new connection for every request: what a balancer's check opens
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	scan := func(addr string) error {
		resp, err := client.Post("http://"+addr+"/v1/scan?location=torch/tiny_transformer.bin", "", nil)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			return fmt.Errorf("scan: %s", resp.Status)
		}
		return nil
	}

	c := serveChild(t, "--drain-delay 0s")
	if err := scan(c.addr); err != nil {
		t.Fatal(err)
	}
	c.signal(t, syscall.SIGTERM)
	if err := c.wait(t); err != nil {
		t.Fatalf("after SIGTERM: %v (want exit 0)", err)
	}
	if conn, err := net.Dial("tcp", c.addr); err == nil {
		conn.Close()
		t.Fatal("still listening after SIGTERM")
	}

	c = serveChild(t, "--drain-delay 1h")
	c.signal(t, syscall.SIGTERM)
	for {
		resp, err := client.Get("http://" + c.addr + "/healthz")
		if err != nil {
			t.Fatalf("refused during --drain-delay: %v", err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusServiceUnavailable && string(b) == "draining\n" {
			break
		}
		if resp.StatusCode != 200 {
			t.Fatalf("healthz as the drain starts: %s %q", resp.Status, b)
		}
	}
	if err := scan(c.addr); err != nil {
		t.Fatalf("during --drain-delay: %v", err)
	}
	c.signal(t, syscall.SIGTERM)
	var ee *exec.ExitError
	if err := c.wait(t); !errors.As(err, &ee) || ee.ExitCode() != 143 {
		t.Fatalf("after a second SIGTERM: %v (want exit 143 at once)", err)
	}
}
