package main

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
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

// safetensors serve refuses a non-loopback address without a token, and
// SIGTERM drains it and exits 0.
func TestServeSIGTERMExitsZero(t *testing.T) {
	if code, _, errOut := runCLI(t, "serve", "--addr", "0.0.0.0:0"); code != 2 || !strings.Contains(errOut, "--token-file") {
		t.Fatalf("non-loopback without a token: exit %d %s", code, errOut)
	}
	pr, pw := io.Pipe()
	codes := make(chan int, 1)
	go func() {
		codes <- run([]string{"serve", "--addr", "127.0.0.1:0", "--root", "../../testdata"}, io.Discard, pw)
		pw.Close()
	}()
	sc := bufio.NewScanner(pr)
	var addr string
	for sc.Scan() {
		if a, ok := strings.CutPrefix(sc.Text(), "safetensors serve: listening on http://"); ok {
			addr = strings.TrimSuffix(a, "/")
			break
		}
	}
	go io.Copy(io.Discard, pr)
	if addr == "" {
		t.Fatal("serve did not say where it listens")
	}
	resp, err := http.Post("http://"+addr+"/v1/scan?location=torch/tiny_transformer.bin", "", nil)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("scan: %v", err)
	}
	resp.Body.Close()
	syscall.Kill(os.Getpid(), syscall.SIGTERM)
	select {
	case code := <-codes:
		if code != 0 {
			t.Fatalf("exit %d after SIGTERM", code)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("serve did not exit after SIGTERM")
	}
	if c, err := net.Dial("tcp", addr); err == nil {
		c.Close()
		t.Fatal("still listening after SIGTERM")
	}

}
