package main

import (
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"testing"

	"github.com/gosafetensors/safetensors/internal/s3test"
)

// secrets are what a location may carry that no output may show.
var secrets = []string{"SIGn4tur3", "Cr3dentialAKIA", "t0ken-value", "hunter2", "s3cretKey", "sAsSig", "pa55word"}

// signed appends a signed URL's query to u.
func signed(u string) string {
	return u + "?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=Cr3dentialAKIA%2F20261201&X-Amz-Signature=SIGn4tur3&X-Amz-Security-Token=t0ken-value&sig=sAsSig"
}

// No output of scan or validate, in text or JSON, shows a secret of a
// location: a signed URL's query (read, or failing to connect), userinfo,
// a bucket URL's query (its endpoint's userinfo; a parameter the driver
// refuses), the objects listed under a bucket prefix.
func TestNoSecretInOutput(t *testing.T) {
	t.Setenv("HF_TOKEN", "hf_t0ken-value")
	srv := httptest.NewServer(http.FileServer(http.Dir(torchDir)))
	defer srv.Close()
	s3 := s3test.Start(t, "uploads")
	for _, f := range []string{"tiny_transformer.bin", "tiny_transformer.safetensors"} {
		b, _ := os.ReadFile(torchDir + f)
		s3.Put(t, "uploads", "in/"+f, b)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + ln.Addr().String()
	ln.Close() // nothing listens there: the dial is refused
	host := strings.TrimPrefix(srv.URL, "http://")
	bucket := "?endpoint=" + url.QueryEscape("http://AKIA:s3cretKey@"+strings.TrimPrefix(s3.URL, "http://")) + "&use_path_style=true&region=us-east-1"
	locs := []string{
		signed(srv.URL + "/tiny_transformer.bin"),
		signed(srv.URL + "/tiny_transformer.safetensors"),
		"http://user:hunter2@" + host + "/tiny_transformer.bin",
		"s3://uploads/in/" + bucket,
		"s3://uploads/in/tiny_transformer.safetensors" + bucket,
		"s3://b/k.bin?endpoint=" + url.QueryEscape(closed) + "&region=us-east-1&password=pa55word",
	}
	check := func(args []string, want string) {
		t.Helper()
		_, out, errOut := runCLI(t, args...)
		for _, s := range secrets {
			if strings.Contains(out+errOut, s) {
				t.Errorf("%s shows %q:\n%s%s", strings.Join(args, " "), s, out, errOut)
			}
		}
		if !strings.Contains(out, want) {
			t.Errorf("%s: no %q in\n%s%s", strings.Join(args, " "), want, out, errOut)
		}
	}
	for _, args := range [][]string{{"scan"}, {"scan", "--json"}, {"scan", "--jsonl"}, {"validate"}, {"validate", "--json"}} {
		for _, loc := range locs {
			shown, _, _ := strings.Cut(loc, "?")
			shown = strings.Replace(shown, "user:hunter2@", "", 1)
			check(append(args, loc), shown)
		}
	}
	check([]string{"scan", "--json", "s3://uploads/in/" + bucket}, `"path":"s3://uploads/in/tiny_transformer.bin?…","format":"zip","verdict":"clean"`)
	check([]string{"scan", "--json", signed(closed + "/m.bin")}, "connection refused") // retried: once only
}
