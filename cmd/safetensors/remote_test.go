package main

import (
	"bytes"
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
	srv := httptest.NewServer(http.FileServer(http.Dir("../../testdata/torch")))
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
