package serve_test

import (
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gosafetensors/safetensors/serve"
)

// Every endpoint but /healthz (and the login form) needs the token: 401
// without it or with a wrong one, in any spelling; the token never shows
// in a log line.
func TestAuth(t *testing.T) {
	ts := start(t, serve.WithToken(testToken), serve.WithRoot(rootDir(t)))
	if code, body, _ := do(t, "GET", ts.URL+"/healthz", "", nil); code != 200 || body != "ok\n" {
		t.Fatalf("healthz: %d %q", code, body)
	}
	wrong := "wrong-token-0123456789abcdef"
	for _, ep := range []struct{ method, path string }{
		{"POST", "/v1/scan?location=torch/tiny_transformer.bin"},
		{"GET", "/v1/inspect?location=torch/tiny_transformer.safetensors"},
		{"GET", "/metrics"},
		{"GET", "/?location=torch/tiny_transformer.safetensors"},
		{"GET", "/static/style.css"},
		{"POST", "/"},
	} {
		for _, hdr := range [][]string{nil, {"Authorization", "Bearer " + wrong}, {"Authorization", "Bearer " + testToken[:len(testToken)-1]},
			{"Authorization", "bearer " + testToken + "x"}, {"Authorization", "Basic " + testToken}, {"Authorization", testToken}} {
			code, body, _ := do(t, ep.method, ts.URL+ep.path, "", strings.NewReader(""), hdr...)
			if code != http.StatusUnauthorized || strings.Contains(body, "tiny_transformer") {
				t.Errorf("%s %s with %v: %d\n%s", ep.method, ep.path, hdr, code, body)
			}
		}
		code, _, _ := do(t, ep.method, ts.URL+ep.path, testToken, strings.NewReader(""))
		if code == http.StatusUnauthorized {
			t.Errorf("%s %s with the token: 401", ep.method, ep.path)
		}
	}
	// the viewer's login: a wrong token is refused, the right one gets a
	// session cookie that is not the token
	jar, _ := cookiejar.New(nil)
	client := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.PostForm(ts.URL+"/login", map[string][]string{"token": {wrong}})
	if err != nil || resp.StatusCode != http.StatusUnauthorized || len(resp.Cookies()) != 0 {
		t.Fatalf("login with a wrong token: %v %v", err, resp.Status)
	}
	resp, err = client.PostForm(ts.URL+"/login", map[string][]string{"token": {testToken}})
	if err != nil || resp.StatusCode != http.StatusSeeOther || len(resp.Cookies()) != 1 {
		t.Fatalf("login: %v %v", err, resp.Status)
	}
	c := resp.Cookies()[0]
	if strings.Contains(c.Value, testToken) || !c.HttpOnly || c.SameSite != http.SameSiteStrictMode {
		t.Fatalf("session cookie %+v", c)
	}
	resp, err = client.Get(ts.URL + "/?location=torch/tiny_transformer.safetensors")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("viewer with the session: %v %v", err, resp.Status)
	}
	resp.Body.Close()
	// a cross-site POST with the cookie is refused
	req, _ := http.NewRequest("POST", ts.URL+"/", nil)
	req.Header.Set("Origin", "http://evil.example")
	resp, err = client.Do(req)
	if err != nil || resp.StatusCode != http.StatusForbidden {
		t.Fatalf("cross-site POST with the session cookie: %v %v", err, resp.Status)
	}
	if logs := ts.logs.String(); strings.Contains(logs, testToken) || strings.Contains(logs, wrong) || strings.Contains(logs, c.Value) {
		t.Fatal("a token or session appears in the logs")
	}
}

// counting is a loopback server that counts the requests it gets.
type counting struct {
	*httptest.Server
	hits atomic.Int64
}

func serveCounting(t testing.TB, h http.Handler) *counting {
	c := &counting{}
	c.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c.hits.Add(1)
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(c.Close)
	return c
}

func scanVerdicts(t testing.TB, ts *testServer, loc string) (int, string) {
	t.Helper()
	code, body, _ := do(t, "POST", ts.URL+"/v1/scan?location="+urlQuery(loc), "", nil)
	return code, body
}

func urlQuery(s string) string {
	return strings.NewReplacer("%", "%25", "&", "%26", "#", "%23", "+", "%2B", "?", "%3F", " ", "%20").Replace(s)
}

// No SSRF: with every http(s) location allowed by pattern, the service
// still never connects to loopback, link-local (cloud metadata), private
// or unspecified addresses, however they are spelt, after DNS resolution
// and after a redirect; the same locations work once the addresses are
// allowed explicitly, so the refusals are the guard's.
func TestNoSSRF(t *testing.T) {
	model, err := os.ReadFile("../testdata/torch/tiny_transformer.bin")
	if err != nil {
		t.Fatal(err)
	}
	target := serveCounting(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("ETag", `"m"`)
		http.ServeContent(w, r, "", time.Time{}, strings.NewReader(string(model)))
	}))
	_, port, _ := net.SplitHostPort(target.Listener.Addr().String())
	// a redirector on 127.0.0.2 (allowed) pointing at 127.0.0.1 (not)
	var redirector *counting
	if l, err := net.Listen("tcp", "127.0.0.2:0"); err == nil {
		redirector = &counting{}
		redirector.Server = &httptest.Server{Listener: l, Config: &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			redirector.hits.Add(1)
			http.Redirect(w, r, target.URL+"/model.bin", http.StatusFound)
		})}}
		redirector.Start()
		t.Cleanup(redirector.Close)
	}
	allowAll := serve.WithAllowLocations("http://*/**", "https://*/**")
	guarded := start(t, allowAll, serve.WithAllowAddresses(mustPrefix("127.0.0.2/32")))
	for _, loc := range []string{
		target.URL + "/model.bin",
		"http://localhost:" + port + "/model.bin", // a name that resolves to loopback
		"http://[::1]:" + port + "/model.bin",
		"http://[::ffff:127.0.0.1]:" + port + "/model.bin",
		"http://[0:0:0:0:0:ffff:7f00:1]:" + port + "/model.bin",
		"http://2130706433:" + port + "/model.bin", // decimal
		"http://0177.0.0.1:" + port + "/model.bin", // octal
		"http://0x7f.0.0.1:" + port + "/model.bin", // hex
		"http://127.1:" + port + "/model.bin",
		"http://0.0.0.0:" + port + "/model.bin",
		"http://[::]:" + port + "/model.bin",
		"http://169.254.169.254/latest/meta-data/",
		"http://[fe80::1]/x",
		"http://10.0.0.1/x", "http://172.16.0.1/x", "http://192.168.1.1/x", "http://100.64.0.1/x",
		"http://[fd00:ec2::254]/latest/meta-data/",
		"http://[64:ff9b::7f00:1]:" + port + "/model.bin", // NAT64 of 127.0.0.1
	} {
		code, body := scanVerdicts(t, guarded, loc)
		if code == http.StatusForbidden && contains(body, "canonical form") {
			continue // refused before any lookup
		}
		if code != 200 || !contains(body, `"verdict": "error"`, "address not allowed") || contains(body, `"clean"`) {
			t.Errorf("%s: %d\n%s", loc, code, body)
		}
	}
	if redirector != nil {
		code, body := scanVerdicts(t, guarded, redirector.URL+"/go")
		if code != 200 || !contains(body, `"verdict": "error"`, "not allowed") || redirector.hits.Load() == 0 {
			t.Errorf("redirect to loopback: %d (redirector hit %d times)\n%s", code, redirector.hits.Load(), body)
		}
	} else {
		t.Log("no 127.0.0.2: redirect case skipped")
	}
	if n := target.hits.Load(); n != 0 {
		t.Fatalf("the loopback target was reached %d times", n)
	}
	// allowed explicitly, the same location is read
	open := start(t, allowAll, loopback())
	code, body := scanVerdicts(t, open, target.URL+"/model.bin")
	if code != 200 || !contains(body, `"verdict": "clean"`) || target.hits.Load() == 0 {
		t.Fatalf("allowed loopback: %d\n%s", code, body)
	}
}

// A location no pattern allows is refused with 403 before anything is
// fetched, and so are spellings that could be read two ways.
func TestLocationPolicy(t *testing.T) {
	target := serveCounting(t, http.NotFoundHandler())
	ts := start(t, serve.WithAllowLocations("http://127.0.0.1:*/models/**", "s3://uploads/in/*?endpoint=http://minio:9000"), loopback())
	for _, loc := range []string{
		target.URL + "/other/x.bin",
		target.URL + "/models/../other/x.bin",
		target.URL + "/models/%2e%2e/other/x.bin",
		target.URL + "/models/a%2fb.bin",
		strings.Replace(target.URL, "http://", "http://user:pw@", 1) + "/models/x.bin",
		target.URL + "/models/x.bin#frag",
		"https://127.0.0.1/models/x.bin",
		"http://127.0.0.1.evil.example/models/x.bin",
		"s3://uploads/in/x.bin",
		"s3://uploads/in/x.bin?endpoint=http://169.254.169.254",
		"s3://uploads/in/sub/x.bin?endpoint=http://minio:9000",
		"file:///etc/passwd",
		"/etc/passwd",
		"torch/x.bin", // a local path, and no root
		"gopher://x/y",
	} {
		code, body := scanVerdicts(t, ts, loc)
		if code != http.StatusForbidden || !contains(body, "not allowed") {
			t.Errorf("%s: %d %s", loc, code, body)
		}
		if strings.Contains(body, "user:pw") || strings.Contains(body, "pw@") {
			t.Errorf("%s: credentials in the answer %s", loc, body)
		}
	}
	if target.hits.Load() != 0 {
		t.Fatalf("%d requests reached the server", target.hits.Load())
	}
	code, _ := scanVerdicts(t, ts, target.URL+"/models/sub/x.bin")
	if code != 200 || target.hits.Load() == 0 {
		t.Fatalf("an allowed location: %d, %d requests", code, target.hits.Load())
	}
	if strings.Contains(ts.logs.String(), "pw@") {
		t.Fatal("credentials in the logs")
	}
}

// Under --root nothing outside it is read: not by "..", not through a
// symbolic link, not by an absolute path, whether scanned or inspected.
func TestRootEscape(t *testing.T) {
	outside := t.TempDir()
	secret := filepath.Join(outside, "evil.bin")
	b, _ := os.ReadFile("../testdata/malicious/torch_zip_os_system.bin")
	os.WriteFile(secret, b, 0o644)
	root := rootDir(t)
	os.Symlink(secret, filepath.Join(root, "link.bin"))
	os.Symlink(outside, filepath.Join(root, "dirlink"))
	ts := start(t, serve.WithRoot(root))
	rel, _ := filepath.Rel(root, secret)
	for _, loc := range []string{rel, "link.bin", "dirlink/evil.bin", "torch/../../" + filepath.Base(outside) + "/evil.bin", "dirlink"} {
		code, body := scanVerdicts(t, ts, loc)
		if code != 200 || contains(body, "posix") || !contains(body, `"verdict": "error"`) {
			t.Errorf("scan %s: %d\n%s", loc, code, body)
		}
		code, body, _ = do(t, "GET", ts.URL+"/v1/inspect?location="+urlQuery(loc), "", nil)
		if code == 200 || contains(body, "posix") {
			t.Errorf("inspect %s: %d\n%s", loc, code, body)
		}
	}
	if code, _ := scanVerdicts(t, ts, secret); code != http.StatusForbidden {
		t.Errorf("absolute path: %d", code)
	}
	code, body := scanVerdicts(t, ts, "malicious/torch_zip_os_system.bin")
	if code != 200 || !contains(body, `"verdict": "dangerous"`, "posix") {
		t.Fatalf("inside the root: %d %s", code, body)
	}
}

func mustPrefix(s string) netip.Prefix { return netip.MustParsePrefix(s) }

// Uploads are capped: a declared or actual size past the limit is 413,
// nothing is scanned and nothing stays in the spool; a JSON body has its
// own cap.
func TestUploadLimits(t *testing.T) {
	spool := t.TempDir()
	lim := serve.DefaultLimits()
	lim.MaxUploadBytes = 4096
	lim.MaxJSONBodyBytes = 128
	ts := start(t, serve.WithLimits(lim), serve.WithSpoolDir(spool), serve.WithRoot(rootDir(t)))
	big := strings.Repeat("x", 5000)
	code, body, _ := do(t, "POST", ts.URL+"/v1/scan", "", strings.NewReader(big))
	if code != http.StatusRequestEntityTooLarge {
		t.Errorf("declared oversize: %d %s", code, body)
	}
	// chunked: no Content-Length, the cap is found while spooling
	code, body, _ = do(t, "POST", ts.URL+"/v1/scan", "", struct{ io.Reader }{strings.NewReader(big)})
	if code != http.StatusRequestEntityTooLarge {
		t.Errorf("chunked oversize: %d %s", code, body)
	}
	code, body, _ = do(t, "POST", ts.URL+"/v1/scan", "", strings.NewReader(`{"location": "`+strings.Repeat("a", 200)+`"}`), "Content-Type", "application/json")
	if code != http.StatusRequestEntityTooLarge {
		t.Errorf("JSON oversize: %d %s", code, body)
	}
	code, body, _ = do(t, "POST", ts.URL+"/v1/scan", "", strings.NewReader(`{"location": "malicious/reduce_posix_system_p2.pkl"}`), "Content-Type", "application/json")
	if code != 200 || !contains(body, `"verdict": "dangerous"`) {
		t.Errorf("JSON body: %d %s", code, body)
	}
	code, _, _ = do(t, "POST", ts.URL+"/v1/scan", "", strings.NewReader(`{"location": 1}`), "Content-Type", "application/json")
	if code != http.StatusBadRequest {
		t.Errorf("bad JSON: %d", code)
	}
	small, _ := os.ReadFile("../testdata/malicious/reduce_posix_system_p2.pkl")
	code, body, _ = do(t, "POST", ts.URL+"/v1/scan?name=../../up.pkl", "", strings.NewReader(string(small)))
	if code != 200 || !contains(body, `"path": "up.pkl"`, `"verdict": "dangerous"`) {
		t.Errorf("small upload: %d %s", code, body)
	}
	if left, _ := os.ReadDir(spool); len(left) != 0 {
		t.Errorf("spool holds %d files", len(left))
	}
}
