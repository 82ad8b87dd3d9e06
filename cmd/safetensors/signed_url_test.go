package main

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/gosafetensors/safetensors/internal/pacedserver"
	"github.com/gosafetensors/safetensors/internal/s3test"
)

// TestSignedURLNeverPrinted: when the Hub's signed CDN URL cannot be read
// (nothing listens there: net/http's *url.Error quotes the URL whole), no
// command prints its signature, on stdout or stderr, in text or --json
// (F13 of redteam2); nor does a failing bucket download print its URL's
// query (docs/buckets.md).
func TestSignedURLNeverPrinted(t *testing.T) {
	const secret = "SECRET_SIGNATURE"
	st, err := os.ReadFile(torchDir + "many_tensors.safetensors") // an LFS file: redirected
	if err != nil {
		t.Fatal(err)
	}
	served, err := pacedserver.Hub("org/model", dlCommit, map[string]pacedserver.File{
		"/model.safetensors": {Content: strings.NewReader(string(st)), Size: int64(len(st))},
	})
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := l.Addr().String()
	l.Close() // nothing listens there now: every read of the CDN fails in the transport
	for name, f := range served {
		if f.Redirect != "" {
			f.Redirect = "http://" + closed + f.Redirect + "?file=model.safetensors&sig=" + secret
			served[name] = f
		}
	}
	s, err := pacedserver.Start(pacedserver.Config{}, served)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	hubEnv(t, s)
	tmp := t.TempDir()
	local := torchDir + "many_tensors.safetensors"
	cmds := [][]string{
		{"inspect", "hf://org/model"},
		{"inspect", "hf://org/model", "--json"},
		{"get", "hf://org/model", "t0", "-o", filepath.Join(tmp, "x.npy")},
		{"stats", "hf://org/model"},
		{"load", "hf://org/model", "--json"},
		{"diff", "hf://org/model", local},
		{"download", "hf://org/model"},
		{"download", "hf://org/model", "--json"},
		{"download", "hf://org/model", "--local-dir", filepath.Join(tmp, "d")},
		{"scan", "hf://org/model"},
		{"validate", "hf://org/model", "--json"},
	}
	srv := s3test.Start(t, "models")
	query := srv.Query()
	srv.Put(t, "models", "ok/model.safetensors", st)
	for _, loc := range []string{"s3://nobucket/up/?" + query, "s3://models/missing.safetensors?" + query, "s3://models/none/?" + query} {
		cmds = append(cmds, []string{"download", loc, "--local-dir", filepath.Join(tmp, "b")}, []string{"download", loc, "--local-dir", filepath.Join(tmp, "b"), "--json"})
	}
	ok := "s3://models/ok/?" + query
	cmds = append(cmds, []string{"download", ok, "--local-dir", filepath.Join(tmp, "b"), "--include", "*.json"}, // no file matches
		[]string{"download", ok, "--local-dir", filepath.Join(tmp, "ok1")}, []string{"download", ok, "--local-dir", filepath.Join(tmp, "ok2"), "--json"})
	succeeds := len(cmds) - 2 // the last two
	// The Hub's cases each wait for their retries: run them together.
	type result struct {
		code     int
		out, err string
	}
	results := make([]result, len(cmds))
	var wg sync.WaitGroup
	for i, args := range cmds {
		wg.Go(func() {
			code, out, errs := runCLI(t, args...)
			results[i] = result{code, out, errs}
		})
	}
	wg.Wait()
	for i, args := range cmds {
		r := results[i]
		if (r.code == 0) != (i >= succeeds) {
			t.Errorf("%q: exit %d\n%s%s", args, r.code, r.out, r.err)
		}
		all := r.out + r.err
		for _, leak := range []string{secret, "use_path_style", "endpoint="} {
			if strings.Contains(all, leak) {
				t.Errorf("%q prints %q:\n%s", args, leak, all)
			}
		}
	}
}
