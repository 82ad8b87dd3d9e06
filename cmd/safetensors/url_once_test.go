package main

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gosafetensors/safetensors/internal/hubtest"
	"github.com/gosafetensors/safetensors/internal/s3test"
)

// failingRemotes starts servers on loopback on which reading fails in
// the ways remote reads fail without retries to wait for (a refused
// connection is retried for seconds), and returns each case's location
// with the name it goes by in messages where that differs.
func failingRemotes(t *testing.T) []struct{ name, loc, shown string } {
	big, err := os.ReadFile(torchDir + "large_dims.pt") // larger than the first read
	if err != nil {
		t.Fatal(err)
	}
	st, err := os.ReadFile(torchDir + "large_dims.safetensors")
	if err != nil {
		t.Fatal(err)
	}
	status := func(code int) string {
		s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { http.Error(w, "no", code) }))
		t.Cleanup(s.Close)
		return s.URL
	}
	noValidator := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(big))
	}))
	t.Cleanup(noValidator.Close)
	ignoresRange := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("ETag", `"v1"`)
		w.Write(big) // a 200 with the whole object to a range request
	}))
	t.Cleanup(ignoresRange.Close)
	wrongRange := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("ETag", `"v1"`)
		w.Header().Set("Content-Range", "bytes 5-9/100")
		w.WriteHeader(http.StatusPartialContent)
		w.Write(big[5:10])
	}))
	t.Cleanup(wrongRange.Close)
	hub := hubtest.Serve(t, t.TempDir())
	t.Setenv("HF_ENDPOINT", hub.URL)
	t.Setenv("HF_TOKEN", "")
	t.Setenv("HF_HUB_OFFLINE", "")
	s3 := s3test.Start(t, "models")
	s3.Put(t, "models", "ok.safetensors", st)
	return []struct{ name, loc, shown string }{
		{"404", status(404) + "/m.safetensors", ""},
		{"403", status(403) + "/m.bin", ""},
		{"501", status(501) + "/m.safetensors", ""},
		{"no validator", noValidator.URL + "/m.bin", ""},
		{"200 to a range", ignoresRange.URL + "/m.bin", ""},
		{"wrong Content-Range", wrongRange.URL + "/m.bin", ""},
		{"changed", "changing", ""}, // a new server for each command
		{"hub entry", "hf://org/model/missing.safetensors", ""},
		{"hub repo", "hf://org/other/model.safetensors", ""},
		{"bucket key", "s3://models/missing.safetensors?" + s3.Query(), "s3://models/missing.safetensors"},
		{"bucket", "s3://nobucket/m.safetensors?" + s3.Query(), "s3://nobucket/m.safetensors"},
	}
}

// TestURLNamedOnce: an error about a remote location names it once (the
// outermost error does), in every command that reads it, on stdout and
// stderr together, whatever failed.
func TestURLNamedOnce(t *testing.T) {
	for _, tc := range failingRemotes(t) {
		shown := tc.shown
		if shown == "" {
			shown = tc.loc
		}
		host := strings.TrimPrefix(strings.TrimPrefix(shown, "http://"), "hf://")
		for _, cmd := range [][]string{{"inspect", "L"}, {"scan", "L"}, {"validate", "L"}, {"get", "L", "a"}, {"stats", "L"}, {"scan", "--json", "L"}, {"validate", "--json", "L"}} {
			loc := tc.loc
			if loc == "changing" {
				loc = changingServer(t, torchDir+"large_dims.pt").URL + "/m.bin"
				host = strings.TrimPrefix(loc, "http://")
			}
			args := slices.Clone(cmd)
			args[slices.Index(args, "L")] = loc
			code, out, errOut := runCLI(t, args...)
			all := out + errOut
			if code == 0 || !strings.Contains(all, host) {
				t.Errorf("%s: %v: exit %d, the location not named:\n%s", tc.name, cmd, code, all)
			}
			for _, line := range strings.Split(all, "\n") {
				if n := strings.Count(line, host); n > 1 {
					t.Errorf("%s: %v: %q named %d times: %s", tc.name, cmd, host, n, line)
				}
			}
		}
	}
}
