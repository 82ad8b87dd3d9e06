package serve_test

import (
	"bytes"
	"mime/multipart"
	"net/http"
	"os"
	"testing"

	"github.com/gosafetensors/safetensors/serve"
)

// A request authenticated by the session cookie that changes anything
// (every method but GET: the viewer's upload) must show it comes from the service's own page:
// Sec-Fetch-Site: same-origin or an Origin equal to the service's. A
// foreign origin, "null" (a sandboxed frame, a data: URL, a cross-origin
// redirect), another site, and a request that says nothing are refused;
// the bearer token needs no such headers.
func TestSessionCSRF(t *testing.T) {
	ts := start(t, serve.WithToken(testToken), serve.WithRoot(rootDir(t)))
	session := login(t, ts)
	model, err := os.ReadFile("../testdata/torch/tiny_transformer.safetensors")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		hdr  []string
		want int
	}{
		{[]string{"Origin", "http://evil.example"}, http.StatusForbidden},
		{[]string{"Origin", "null"}, http.StatusForbidden},
		{nil, http.StatusForbidden},
		{[]string{"Sec-Fetch-Site", "cross-site"}, http.StatusForbidden},
		{[]string{"Sec-Fetch-Site", "same-site"}, http.StatusForbidden},
		{[]string{"Sec-Fetch-Site", "none"}, http.StatusForbidden},
		{[]string{"Origin", "null", "Sec-Fetch-Site", "same-origin"}, http.StatusForbidden},
		{[]string{"Origin", ts.URL, "Sec-Fetch-Site", "cross-site"}, http.StatusForbidden},
		{[]string{"Origin", ts.URL}, http.StatusOK},
		{[]string{"Sec-Fetch-Site", "same-origin"}, http.StatusOK},
		{[]string{"Origin", ts.URL, "Sec-Fetch-Site", "same-origin"}, http.StatusOK},
	} {
		var form bytes.Buffer
		mw := multipart.NewWriter(&form)
		fw, _ := mw.CreateFormFile("file", "m.safetensors")
		fw.Write(model)
		mw.Close()
		req, _ := http.NewRequest("POST", ts.URL+"/", &form)
		req.Header.Set("Content-Type", mw.FormDataContentType())
		req.AddCookie(session)
		for i := 0; i+1 < len(tc.hdr); i += 2 {
			req.Header.Set(tc.hdr[i], tc.hdr[i+1])
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.want {
			t.Errorf("POST with the session cookie and %q: %d, want %d", tc.hdr, resp.StatusCode, tc.want)
		}
	}
	// a GET with the cookie needs no header (a link to the viewer)
	req, _ := http.NewRequest("GET", ts.URL+"/?location=torch/tiny_transformer.safetensors", nil)
	req.AddCookie(session)
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET with the session cookie: %v %v", err, resp.Status)
	}
	resp.Body.Close()
	// the token needs none either
	if code, body, _ := do(t, "POST", ts.URL+"/v1/scan?location=torch/tiny_transformer.safetensors", testToken, nil); code != http.StatusOK {
		t.Fatalf("POST with the token: %d %s", code, body)
	}
}
