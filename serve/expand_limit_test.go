package serve_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/gosafetensors/safetensors"
	"github.com/gosafetensors/safetensors/compressed"
	"github.com/gosafetensors/safetensors/serve"
	"github.com/gosafetensors/safetensors/source"
)

// compressedModel is a safetensors file of one U8 tensor (n bytes from
// data) and its seekable zstd container.
func compressedModel(t testing.TB, data []byte) (plain, zst []byte) {
	t.Helper()
	plain, err := safetensors.Marshal([]safetensors.TensorData{{Name: "w", DType: safetensors.U8, Shape: []int64{int64(len(data))}, Data: data}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if _, err := compressed.Compress(context.Background(), &b, bytes.NewReader(plain), int64(len(plain))); err != nil {
		t.Fatal(err)
	}
	return plain, b.Bytes()
}

var decodedMetric = regexp.MustCompile(`(?m)^safetensors_serve_decompressed_bytes_total (\S+)$`)

// decoded reads the service's count of bytes compressed inputs
// decompressed to.
func decoded(t *testing.T, ts *testServer) int64 {
	t.Helper()
	_, m, _ := do(t, "GET", ts.URL+"/metrics", "", nil)
	g := decodedMetric.FindStringSubmatch(m)
	if g == nil {
		t.Fatalf("no decompressed_bytes_total in /metrics")
	}
	f, err := strconv.ParseFloat(g[1], 64)
	if err != nil {
		t.Fatal(err)
	}
	return int64(f)
}

// A 16 KiB compressed upload of zeros claims 96 MiB of original: the
// audit, which decompresses a compressed file whole to check it, would
// do about 6,000 times the upload's worth of work. Past the bound
// (32 times the compressed size plus 64 MiB, by default) it is refused
// from the container's table, before a frame is decompressed: verdict
// error from /v1/scan, 413 from /v1/inspect, uploaded, under the root or
// by URL, the message naming the flags. Without the bound the same
// upload decompresses whole (the count the test relies on sees it); a
// compressed model under the bound still scans clean.
func TestExpandedLimit(t *testing.T) {
	plain, zst := compressedModel(t, make([]byte, 96<<20))
	bound := int64(serve.DefaultMaxExpansionRatio)*int64(len(zst)) + source.ExpansionSlack
	if int64(len(plain)) <= bound || len(zst) > 200<<10 {
		t.Fatalf("the crafted file: %d bytes compressed to %d, bound %d", len(plain), len(zst), bound)
	}
	root := t.TempDir()
	if err := os.WriteFile(filepath.Join(root, "zeros.safetensors.zst"), zst, 0o644); err != nil {
		t.Fatal(err)
	}
	web := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("ETag", `"zeros-1"`)
		http.ServeContent(w, r, "zeros.safetensors.zst", fixedTime, bytes.NewReader(zst))
	}))
	defer web.Close()
	ts := start(t, serve.WithRoot(root), loopback(), serve.WithAllowLocations(web.URL+"/**"))

	scanned := func(how, url string, body []byte) {
		t.Helper()
		before := decoded(t, ts)
		var r io.Reader
		if body != nil {
			r = bytes.NewReader(body)
		}
		code, out, _ := do(t, "POST", url, "", r)
		if code != http.StatusOK || !strings.Contains(out, `"verdict": "error"`) || !contains(out, "decompresses to more than the limit", "--max-expanded") {
			t.Errorf("scan %s: %d %.400s", how, code, out)
		}
		if n := decoded(t, ts) - before; n > bound {
			t.Errorf("scan %s decompressed %d bytes, more than the bound %d", how, n, bound)
		}
	}
	inspected := func(how, method, url string, body []byte) {
		t.Helper()
		before := decoded(t, ts)
		var r io.Reader
		if body != nil {
			r = bytes.NewReader(body)
		}
		code, out, _ := do(t, method, url, "", r)
		if code != http.StatusRequestEntityTooLarge || !contains(out, "decompresses to more than the limit", "--max-expanded") {
			t.Errorf("inspect %s: %d %.400s", how, code, out)
		}
		if n := decoded(t, ts) - before; n > bound {
			t.Errorf("inspect %s decompressed %d bytes, more than the bound %d", how, n, bound)
		}
	}
	scanned("upload", ts.URL+"/v1/scan?name=zeros.safetensors.zst", zst)
	scanned("under the root", ts.URL+"/v1/scan?location=zeros.safetensors.zst", nil)
	scanned("by URL", ts.URL+"/v1/scan?location="+web.URL+"/zeros.safetensors.zst", nil)
	inspected("upload", "POST", ts.URL+"/v1/inspect", zst)
	inspected("by URL", "GET", ts.URL+"/v1/inspect?location="+web.URL+"/zeros.safetensors.zst", nil)

	// without the bound, the same upload is clean and costs its whole
	// original: what the counter sees
	lim := serve.DefaultLimits()
	lim.MaxExpansionRatio = 0
	open := start(t, serve.WithLimits(lim))
	before := decoded(t, open)
	code, out, _ := do(t, "POST", open.URL+"/v1/scan?name=zeros.safetensors.zst", "", bytes.NewReader(zst))
	if n := decoded(t, open) - before; code != http.StatusOK || !strings.Contains(out, `"verdict": "clean"`) || n < int64(len(plain)) {
		t.Errorf("scan without a ratio bound: %d, decompressed %d bytes of %d: %.400s", code, n, len(plain), out)
	}

	// a model that compresses as weights do is well within the bound
	data := make([]byte, 4<<20)
	rand.Read(data)
	plain, zst = compressedModel(t, data)
	before = decoded(t, ts)
	code, out, _ = do(t, "POST", ts.URL+"/v1/scan?name=w.safetensors.zst", "", bytes.NewReader(zst))
	if n := decoded(t, ts) - before; code != http.StatusOK || !strings.Contains(out, `"verdict": "clean"`) || n < int64(len(plain)) || n > 2*int64(len(plain)) {
		t.Errorf("scan of a compressed model: %d, decompressed %d bytes of %d: %.400s", code, n, len(plain), out)
	}
}

// MaxExpandedBytes bounds a compressed file whatever its ratio.
func TestExpandedLimitAbsolute(t *testing.T) {
	data := make([]byte, 4<<20)
	rand.Read(data)
	plain, zst := compressedModel(t, data)
	lim := serve.DefaultLimits()
	lim.MaxExpandedBytes = int64(len(plain)) - 1
	ts := start(t, serve.WithLimits(lim))
	code, out, _ := do(t, "POST", ts.URL+"/v1/scan?name=w.safetensors.zst", "", bytes.NewReader(zst))
	if n := decoded(t, ts); code != http.StatusOK || !strings.Contains(out, `"verdict": "error"`) || !contains(out, strconv.Itoa(len(plain)-1), "--max-expanded") || n != 0 {
		t.Errorf("scan past MaxExpandedBytes: %d, decompressed %d: %.400s", code, n, out)
	}
	lim.MaxExpandedBytes++
	ts = start(t, serve.WithLimits(lim))
	code, out, _ = do(t, "POST", ts.URL+"/v1/scan?name=w.safetensors.zst", "", bytes.NewReader(zst))
	if code != http.StatusOK || !strings.Contains(out, `"verdict": "clean"`) {
		t.Errorf("scan at MaxExpandedBytes: %d %.400s", code, out)
	}
}
