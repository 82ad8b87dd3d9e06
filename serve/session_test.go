package serve_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/gosafetensors/safetensors/serve"
)

// login signs in and returns the session cookie.
func login(t *testing.T, ts *testServer, hdr ...string) *http.Cookie {
	t.Helper()
	req, _ := http.NewRequest("POST", ts.URL+"/login", strings.NewReader(url.Values{"token": {testToken}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := (&http.Transport{}).RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther || len(resp.Cookies()) != 1 {
		t.Fatalf("login: %s %v", resp.Status, resp.Cookies())
	}
	return resp.Cookies()[0]
}

func withCookie(t *testing.T, method, u string, c *http.Cookie) int {
	t.Helper()
	req, _ := http.NewRequest(method, u, nil)
	req.AddCookie(c)
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// Sessions are random per sign-in, expire, end with the process, are
// HttpOnly, SameSite=Strict and Secure when the operator says TLS is in
// front (X-Forwarded-Proto alone proves nothing), and open the viewer's
// pages only: the API endpoints take the bearer token (F9 of redteam2).
func TestSessions(t *testing.T) {
	root := rootDir(t)
	ts := start(t, serve.WithToken(testToken), serve.WithRoot(root))
	a, b := login(t, ts), login(t, ts, "X-Forwarded-Proto", "https")
	if a.Value == b.Value {
		t.Error("two sign-ins got the same session")
	}
	for _, c := range []*http.Cookie{a, b} {
		if !c.HttpOnly || c.SameSite != http.SameSiteStrictMode || c.MaxAge <= 0 || c.MaxAge > 24*3600 || c.Expires.IsZero() {
			t.Errorf("session cookie %+v: want HttpOnly, SameSite=Strict, an expiry within a day", c)
		}
		if c.Secure {
			t.Errorf("session cookie Secure over plain HTTP without WithSecureCookie (X-Forwarded-Proto trusted?)")
		}
		if strings.Contains(c.Value, testToken) {
			t.Error("the session holds the token")
		}
		if code := withCookie(t, "GET", ts.URL+"/?location=torch/tiny_transformer.safetensors", c); code != 200 {
			t.Errorf("viewer with a session: %d", code)
		}
		for _, ep := range []struct{ method, path string }{
			{"GET", "/metrics"}, {"GET", "/v1/inspect?location=torch/tiny_transformer.safetensors"},
			{"POST", "/v1/scan?location=torch/tiny_transformer.safetensors"}, {"POST", "/v1/inspect"},
		} {
			if code := withCookie(t, ep.method, ts.URL+ep.path, c); code != http.StatusUnauthorized {
				t.Errorf("%s %s with only the session cookie: %d, want 401", ep.method, ep.path, code)
			}
		}
	}
	// another process with the same token does not take this one's sessions
	ts2 := start(t, serve.WithToken(testToken), serve.WithRoot(root))
	if code := withCookie(t, "GET", ts2.URL+"/?location=torch/tiny_transformer.safetensors", a); code != http.StatusUnauthorized {
		t.Errorf("a session of another process: %d, want 401", code)
	}
	if c := login(t, ts2); c.Value == a.Value || c.Value == b.Value {
		t.Error("a restart issues the same session")
	}
	forged := *a
	forged.Value = a.Value[:len(a.Value)-2] + "AA"
	if code := withCookie(t, "GET", ts.URL+"/", &forged); code != http.StatusUnauthorized {
		t.Errorf("a forged session: %d", code)
	}
	// TLS in front, declared by the operator: Secure
	ts3 := start(t, serve.WithToken(testToken), serve.WithSecureCookie(true))
	if c := login(t, ts3); !c.Secure {
		t.Error("WithSecureCookie(true): the session cookie is not Secure")
	}
}
