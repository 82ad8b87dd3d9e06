package main

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Remote locations work like local ones: inspect, get --slice and convert
// (storages streamed by range into the local output) over loopback HTTP.
func TestRemoteCommands(t *testing.T) {
	srv := httptest.NewServer(withETag("../../testdata/torch"))
	defer srv.Close()
	code, remoteOut, errOut := runCLI(t, "inspect", srv.URL+"/tiny_transformer.safetensors")
	if code != 0 {
		t.Fatalf("inspect: exit %d %s", code, errOut)
	}
	_, localOut, _ := runCLI(t, "inspect", torchDir+"tiny_transformer.safetensors")
	strip := func(s string) string { return s[strings.Index(s, "tensors "):] }
	if strip(remoteOut) != strip(localOut) {
		t.Fatalf("remote inspect differs from local:\n%s\n---\n%s", remoteOut, localOut)
	}
	code, a, errOut := runCLI(t, "get", srv.URL+"/tiny_transformer.safetensors", "lm_head.weight", "--slice", "0:2")
	_, b, _ := runCLI(t, "get", torchDir+"tiny_transformer.safetensors", "lm_head.weight", "--slice", "0:2")
	if code != 0 || a != b {
		t.Fatalf("get --slice: exit %d %s\n%s\n%s", code, errOut, a, b)
	}
	out := filepath.Join(t.TempDir(), "model.safetensors")
	code, _, errOut = runCLI(t, "convert", srv.URL+"/tiny_transformer.bin", out)
	if code != 0 {
		t.Fatalf("convert: exit %d %s", code, errOut)
	}
	local := filepath.Join(t.TempDir(), "local.safetensors")
	if code, _, errOut := runCLI(t, "convert", torchDir+"tiny_transformer.bin", local); code != 0 {
		t.Fatalf("local convert: exit %d %s", code, errOut)
	}
	got, _ := os.ReadFile(out)
	want, _ := os.ReadFile(local)
	if len(got) == 0 || !bytes.Equal(got, want) {
		t.Fatal("remote conversion differs from the local one")
	}
	if code, _, _ := runCLI(t, "diff", out, torchDir+"tiny_transformer.safetensors"); code != 0 {
		t.Fatal("remote conversion holds other tensors than Hugging Face's")
	}
	if code, _, _ := runCLI(t, "inspect", srv.URL+"/missing.safetensors"); code != 2 {
		t.Fatalf("missing remote file: exit %d, want 2", code)
	}
}

// withETag serves dir with a strong ETag made of each file's size and
// modification time, as nginx does: http.FileServer sends only a
// Last-Modified, which does not pin a file written (or checked out) less
// than a minute ago.
func withETag(dir string) http.Handler {
	fs := http.FileServer(http.Dir(dir))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if st, err := os.Stat(filepath.Join(dir, filepath.FromSlash(r.URL.Path))); err == nil {
			w.Header().Set("ETag", fmt.Sprintf(`"%x-%x"`, st.ModTime().UnixNano(), st.Size()))
		}
		fs.ServeHTTP(w, r)
	})
}

// TestTrustServer: a server that pins nothing (http.FileServer serving a
// file written just now: its Last-Modified is not a minute older than the
// response) is read when one request holds what a command needs, refused
// with a hint when it needs more, and read with --trust-server.
func TestTrustServer(t *testing.T) {
	dir := t.TempDir()
	data, err := os.ReadFile(torchDir + "large_dims.safetensors") // more than the first request reads
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "m.safetensors"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.FileServer(http.Dir(dir)))
	defer srv.Close()
	url := srv.URL + "/m.safetensors"
	if code, _, errOut := runCLI(t, "inspect", url); code != 0 {
		t.Fatalf("inspect (one request): exit %d %s", code, errOut)
	}
	code, _, errOut := runCLI(t, "get", url, "wide_u8", "--slice", "0, 65530:")
	if code != 2 || !strings.Contains(errOut, "strong ETag") || !strings.Contains(errOut, "--trust-server") {
		t.Fatalf("get without a validator: exit %d %s", code, errOut)
	}
	code, a, errOut := runCLI(t, "get", "--trust-server", url, "wide_u8", "--slice", "0, 65530:")
	_, b, _ := runCLI(t, "get", torchDir+"large_dims.safetensors", "wide_u8", "--slice", "0, 65530:")
	if code != 0 || a != b {
		t.Fatalf("get --trust-server: exit %d %s", code, errOut)
	}
	if code, _, errOut := runCLI(t, "load", url); code != 2 || !strings.Contains(errOut, "--trust-server") {
		t.Fatalf("load without a validator: exit %d %s", code, errOut)
	}
	if code, _, errOut := runCLI(t, "load", "--trust-server", url); code != 0 {
		t.Fatalf("load --trust-server: exit %d %s", code, errOut)
	}
}
