package main

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gosafetensors/safetensors/serve"
)

// changingServer serves the file as one object with a strong ETag and
// ranges; after its first answer the object is replaced, so every later
// range request fails its If-Match (412, remote.ErrObjectChanged).
func changingServer(t *testing.T, file string) *httptest.Server {
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, etag := b, `"v1"`
		if n.Add(1) > 1 {
			body, etag = bytes.Repeat([]byte{1}, len(b)), `"v2"`
		}
		w.Header().Set("ETag", etag)
		http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(body))
	}))
	t.Cleanup(srv.Close)
	return srv
}

// A remote file that changes while it is read could not be checked: scan
// reports "error" with the cause and nothing else, validate "unreadable",
// and both exit 2, in text and in JSON.
func TestReadFailureExits2(t *testing.T) {
	zip := torchDir + "large_dims.pt" // larger than the first read
	code, res, _ := scanJSON(t, changingServer(t, zip).URL+"/m.bin")
	if code != 2 || len(res) != 1 {
		t.Fatalf("scan --json: exit %d, %d reports", code, len(res))
	}
	if r := res[0]; r.Verdict != "error" || !strings.Contains(r.Error, "not every byte was checked") || !strings.Contains(r.Error, "412") ||
		len(r.Problems) != 0 || len(r.Globals) != 0 {
		t.Errorf("scan --json: %+v", r)
	}
	srv := changingServer(t, zip)
	code, out, errOut := runCLI(t, "scan", srv.URL+"/m.bin")
	if code != 2 || !strings.Contains(out, srv.URL+"/m.bin: error") || !strings.Contains(out, "1 errors") || !strings.Contains(errOut, "412") {
		t.Errorf("scan: exit %d\n%s%s", code, out, errOut)
	}

	st := torchDir + "large_dims.safetensors"
	code, out, _ = runCLI(t, "validate", "--json", "--full", changingServer(t, st).URL+"/m.safetensors")
	var vr []validateResult
	if err := json.Unmarshal([]byte(out), &vr); err != nil || code != 2 || len(vr) != 1 {
		t.Fatalf("validate --json --full: exit %d %v\n%s", code, err, out)
	}
	if r := vr[0]; r.Status != "unreadable" || r.Error == nil || !strings.Contains(*r.Error, "412") || r.Variant != nil {
		t.Errorf("validate --json --full: %+v", r)
	}
}

// The service answers a location that fails part-way as scan --json
// prints it: "error" with the cause.
func TestServeReadFailureAsTheCLI(t *testing.T) {
	s, err := serve.New(serve.WithAllowLocations("http://127.0.0.1:*/**"), serve.WithAllowAddresses(netip.MustParsePrefix("127.0.0.0/8")),
		serve.WithLogger(slog.New(slog.NewJSONHandler(io.Discard, nil))))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	api := httptest.NewServer(s.Handler())
	defer api.Close()
	zip := torchDir + "large_dims.pt"
	a, b := changingServer(t, zip), changingServer(t, zip)
	_, want, _ := runCLI(t, "scan", "--json", a.URL+"/m.bin")
	resp, err := http.Post(api.URL+"/v1/scan?location="+url.QueryEscape(b.URL+"/m.bin"), "", nil)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || strings.ReplaceAll(string(got), b.URL, a.URL) != want || !strings.Contains(want, `"verdict": "error"`) {
		t.Errorf("%d: the service and the CLI differ\nservice:\n%s\nCLI:\n%s", resp.StatusCode, got, want)
	}
}
