package serve_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"testing"

	"github.com/gosafetensors/safetensors/internal/s3test"
	"github.com/gosafetensors/safetensors/serve"
)

// No response and no log line of the service shows a secret: the token,
// the Hub token, a signed URL's query, an endpoint's userinfo, in scans
// (by query, by JSON body, of a bucket prefix), inspections, the viewer,
// refusals and errors.
func TestNoSecretInResponsesOrLogs(t *testing.T) {
	files := httptest.NewServer(http.FileServer(http.Dir("../testdata/torch")))
	defer files.Close()
	s3 := s3test.Start(t, "uploads")
	for _, f := range []string{"tiny_transformer.bin", "tiny_transformer.safetensors"} {
		b, _ := os.ReadFile("../testdata/torch/" + f)
		s3.Put(t, "uploads", "in/"+f, b)
	}
	const hubToken = "hf_HubT0kenValue"
	secrets := []string{testToken, hubToken, "SIGn4tur3", "Cr3dentialAKIA", "t0ken-value", "s3cretKey", "sAsSig"}
	signed := func(u string) string {
		return u + "?X-Amz-Credential=Cr3dentialAKIA%2F20261201&X-Amz-Signature=SIGn4tur3&X-Amz-Security-Token=t0ken-value&sig=sAsSig"
	}
	bucket := "endpoint=" + url.QueryEscape("http://AKIA:s3cretKey@"+strings.TrimPrefix(s3.URL, "http://")) + "&use_path_style=true&region=us-east-1"
	ts := start(t, serve.WithToken(testToken), serve.WithHub("http://127.0.0.1:1", hubToken), loopback(),
		serve.WithAllowLocations("http://127.0.0.1:*/**?*", "s3://uploads/in/**?"+bucket))

	var out strings.Builder
	record := func(code int, body string, hdr http.Header) {
		fmt.Fprintf(&out, "%d %v\n%s\n", code, hdr, body)
	}
	q := url.QueryEscape
	for _, loc := range []string{signed(files.URL + "/tiny_transformer.bin"), signed(files.URL + "/tiny_transformer.safetensors"),
		signed(files.URL + "/missing.bin"), "s3://uploads/in/?" + bucket, "s3://uploads/in/tiny_transformer.bin?" + bucket,
		signed("https://elsewhere.example/m.bin"), "http://user:s3cretKey@127.0.0.1:1/m.bin"} {
		record(do(t, "POST", ts.URL+"/v1/scan?location="+q(loc), testToken, nil))
		record(do(t, "POST", ts.URL+"/v1/scan", testToken, strings.NewReader(fmt.Sprintf(`{"location": %q}`, loc)), "Content-Type", "application/json"))
		record(do(t, "GET", ts.URL+"/v1/inspect?location="+q(loc), testToken, nil))
		record(do(t, "GET", ts.URL+"/?location="+q(loc), testToken, nil))
	}
	record(do(t, "POST", ts.URL+"/v1/scan?location="+q(signed("hf://org/model")), testToken, nil))
	record(do(t, "GET", ts.URL+"/metrics", testToken, nil))
	all := out.String() + ts.logs.String()
	for _, s := range secrets {
		if strings.Contains(all, s) {
			i := strings.Index(all, s)
			t.Errorf("%q shown: ...%s...", s, all[max(0, i-300):min(len(all), i+100)])
		}
	}
	for _, want := range []string{`"verdict": "clean"`, `"path": "s3://uploads/in/tiny_transformer.bin?…"`, "tiny_transformer.safetensors?…"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("no %s in the answers:\n%s", want, out.String())
		}
	}
}
