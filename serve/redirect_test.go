package serve_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/gosafetensors/safetensors/serve"
)

var fixedTime = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

const internalPage = "<html><head><title>INTERNAL admin: password hunter2</title></head><body>x</body></html>"

// internalServer is a server on an address the service may dial (an
// internal mirror's range, allowed with --allow-address) whose URLs no
// --allow-location pattern allows.
func internalServer(t *testing.T, model []byte) *counting {
	return serveCounting(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/model.safetensors":
			w.Header().Set("ETag", `"internal-1"`)
			http.ServeContent(w, r, "model.safetensors", fixedTime, strings.NewReader(string(model)))
		default:
			w.Header().Set("Content-Type", "text/html")
			w.Write([]byte(internalPage))
		}
	}))
}

// Every hop of a redirect must pass the location policy, not only the
// address check: an allowed server cannot send the service to a URL no
// pattern allows, although its address is allowed (F8 of redteam2). A
// redirect within the pattern is followed; the refusal names no content.
func TestRedirectsFollowTheLocationPolicy(t *testing.T) {
	model, err := os.ReadFile("../testdata/torch/tiny_transformer.safetensors")
	if err != nil {
		t.Fatal(err)
	}
	internal := internalServer(t, model)
	allowed := serveCounting(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/to-internal-model":
			http.Redirect(w, r, internal.URL+"/model.safetensors", http.StatusFound)
		case "/to-internal-page":
			http.Redirect(w, r, internal.URL+"/admin.html", http.StatusTemporaryRedirect)
		case "/to-own-model":
			http.Redirect(w, r, "/ok/model.safetensors", http.StatusMovedPermanently)
		case "/to-dots":
			w.Header().Set("Location", "/ok/%2e%2e/admin.html")
			w.WriteHeader(http.StatusFound)
		case "/ok/model.safetensors":
			w.Header().Set("ETag", `"allowed-1"`)
			http.ServeContent(w, r, "model.safetensors", fixedTime, strings.NewReader(string(model)))
		default:
			http.NotFound(w, r)
		}
	}))
	ts := start(t, loopback(), serve.WithAllowLocations(allowed.URL+"/**"))

	code, body := scanVerdicts(t, ts, allowed.URL+"/to-own-model")
	if code != 200 || !strings.Contains(body, `"verdict": "clean"`) {
		t.Fatalf("a redirect within the pattern: %d %s", code, body)
	}
	for _, p := range []string{"/to-internal-model", "/to-dots"} {
		code, body := scanVerdicts(t, ts, allowed.URL+p)
		if code != 200 || !strings.Contains(body, `"verdict": "error"`) || !strings.Contains(body, "location not allowed") {
			t.Errorf("scan of %s: %d %s", p, code, body)
		}
	}
	code, body, _ = do(t, "GET", ts.URL+"/v1/inspect?location="+url.QueryEscape(allowed.URL+"/to-internal-page"), "", nil)
	if code != http.StatusForbidden || strings.Contains(body, "hunter2") || strings.Contains(body, "INTERNAL") {
		t.Errorf("inspect of a redirect to an internal page: %d %s", code, body)
	}
	code, body, _ = do(t, "GET", ts.URL+"/?location="+url.QueryEscape(allowed.URL+"/to-internal-page"), "", nil)
	if strings.Contains(body, "hunter2") {
		t.Errorf("the viewer of a redirect to an internal page: %d shows its content", code)
	}
	if n := internal.hits.Load(); n != 0 {
		t.Fatalf("the internal server got %d requests", n)
	}
}

// A Hub location reads its repository on the Hub's endpoint (the
// model-info API, resolve URLs) and follows the Hub's redirects only to
// the Hub redirect patterns (the CDN): a redirect anywhere else is refused
// before anything is sent.
func TestHubRedirects(t *testing.T) {
	model, err := os.ReadFile("../testdata/torch/tiny_transformer.safetensors")
	if err != nil {
		t.Fatal(err)
	}
	const commit = "0123456789abcdef0123456789abcdef01234567"
	internal := internalServer(t, model)
	cdn := serveCounting(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("ETag", `"cdn-1"`)
		http.ServeContent(w, r, "model.safetensors", fixedTime, strings.NewReader(string(model)))
	}))
	hub := serveCounting(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case strings.HasPrefix(r.URL.Path, "/api/models/org/model/revision/"):
			json.NewEncoder(w).Encode(map[string]any{"id": "org/model", "sha": commit,
				"siblings": []map[string]string{{"rfilename": "model.safetensors"}, {"rfilename": "evil.safetensors"}}})
		case strings.HasPrefix(r.URL.Path, "/org/model/resolve/") && strings.HasSuffix(r.URL.Path, "/model.safetensors"):
			w.Header().Set("X-Repo-Commit", commit)
			http.Redirect(w, r, cdn.URL+"/blobs/model?X-Amz-Signature=abc", http.StatusFound)
		case strings.HasPrefix(r.URL.Path, "/org/model/resolve/"):
			w.Header().Set("X-Repo-Commit", commit)
			http.Redirect(w, r, internal.URL+"/model.safetensors", http.StatusFound)
		default:
			http.NotFound(w, r)
		}
	}))
	inspect := func(ts *testServer, loc string) (int, string) {
		code, body, _ := do(t, "GET", ts.URL+"/v1/inspect?location="+url.QueryEscape(loc), "", nil)
		return code, body
	}
	ts := start(t, loopback(), serve.WithHub(hub.URL, ""), serve.WithAllowLocations("hf://org/**"),
		serve.WithHubRedirects(cdn.URL+"/blobs/**"))
	if code, body := inspect(ts, "hf://org/model/model.safetensors"); code != 200 || !strings.Contains(body, `"tensors"`) {
		t.Fatalf("a Hub file through its CDN: %d %s", code, body)
	}
	if code, body := inspect(ts, "hf://org/model/evil.safetensors"); code != http.StatusForbidden {
		t.Errorf("a Hub redirect off the CDN: %d %s", code, body)
	}
	if n := internal.hits.Load(); n != 0 {
		t.Fatalf("the internal server got %d requests", n)
	}
	// By default the Hub's redirects reach only the Hub's own CDN hosts.
	ts = start(t, loopback(), serve.WithHub(hub.URL, ""), serve.WithAllowLocations("hf://org/**"))
	before := cdn.hits.Load()
	if code, body := inspect(ts, "hf://org/model/model.safetensors"); code != http.StatusForbidden {
		t.Errorf("a Hub redirect to a host not in the default patterns: %d %s", code, body)
	}
	if cdn.hits.Load() != before {
		t.Error("the CDN was reached although no pattern allows it")
	}
}
