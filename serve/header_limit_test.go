package serve_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/gosafetensors/safetensors"
	"github.com/gosafetensors/safetensors/compressed"
	"github.com/gosafetensors/safetensors/serve"
)

// bigHeader is a safetensors file whose header is about hdr bytes: 2,000
// tensors and a metadata value that pads the rest.
func bigHeader(t testing.TB, hdr int) []byte {
	t.Helper()
	var ts []safetensors.TensorData
	for i := range 2000 {
		ts = append(ts, safetensors.TensorData{Name: fmt.Sprintf("model.layers.%d.weight", i), DType: safetensors.F32, Shape: []int64{1}, Data: make([]byte, 4)})
	}
	b, err := safetensors.Marshal(ts, map[string]string{"pad": strings.Repeat("x", hdr)})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// A compressed upload of a few hundred KiB whose header decompresses to
// 24 MiB is refused from its header length, before the header is read:
// 413 from /v1/inspect, verdict error from /v1/scan, and what the
// requests allocate stays far below the header (F7 of redteam2). A header
// under the limit is read.
func TestHeaderLimit(t *testing.T) {
	plain := bigHeader(t, 24<<20)
	var zst bytes.Buffer
	if _, err := compressed.Compress(context.Background(), &zst, bytes.NewReader(plain), int64(len(plain)), compressed.WithFrameSize(1<<20)); err != nil {
		t.Fatal(err)
	}
	if zst.Len() > 1<<20 {
		t.Fatalf("the crafted upload is %d bytes", zst.Len())
	}
	ts := start(t)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	code, body, _ := do(t, "POST", ts.URL+"/v1/inspect", "", bytes.NewReader(zst.Bytes()))
	if code != http.StatusRequestEntityTooLarge || !strings.Contains(body, "larger than the limit") || len(body) > 4096 {
		t.Errorf("inspect of a %d-byte upload with a %d-byte header: %d %.300s", zst.Len(), len(plain), code, body)
	}
	code, body, _ = do(t, "POST", ts.URL+"/v1/scan?name=m.safetensors", "", bytes.NewReader(zst.Bytes()))
	if code != 200 || !strings.Contains(body, `"verdict": "error"`) || !strings.Contains(body, "larger than the limit") {
		t.Errorf("scan: %d %.300s", code, body)
	}
	code, body, _ = do(t, "POST", ts.URL+"/v1/inspect", "", bytes.NewReader(plain))
	if code != http.StatusRequestEntityTooLarge {
		t.Errorf("inspect of the plain file: %d %.300s", code, body)
	}
	runtime.ReadMemStats(&after)
	// the plain upload's own bytes pass through 256 KiB buffers; the
	// compressed one decodes at most a frame or two
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 16<<20 {
		t.Errorf("three refused audits allocated %d bytes (the header is %d)", alloc, len(plain))
	}
	// a header within the limit is read
	ts2 := start(t, serve.WithLimits(func() serve.Limits { l := serve.DefaultLimits(); l.MaxModelHeader = 32 << 20; return l }()))
	code, body, _ = do(t, "POST", ts2.URL+"/v1/inspect", "", bytes.NewReader(zst.Bytes()))
	if code != 200 || !strings.Contains(body, "model.layers.1999.weight") {
		t.Errorf("inspect within a 32 MiB limit: %d %.300s", code, body)
	}
}

// The grouped container keeps the original's header in its own, which is
// bounded by twice the limit and 1 MiB (it holds the chunk index too): a
// 40 MiB header is refused from the container's length, before it is read.
func TestHeaderLimitGrouped(t *testing.T) {
	plain := bigHeader(t, 40<<20)
	f, err := os.Create(filepath.Join(t.TempDir(), "grouped.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := compressed.Compress(context.Background(), f, bytes.NewReader(plain), int64(len(plain)), compressed.WithCodec(compressed.Grouped)); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		t.Fatal(err)
	}
	ts := start(t)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	code, body, _ := do(t, "POST", ts.URL+"/v1/inspect", "", f)
	runtime.ReadMemStats(&after)
	if code != http.StatusRequestEntityTooLarge || !strings.Contains(body, "larger than the limit") {
		t.Errorf("inspect of a grouped container with a %d-byte header: %d %.300s", len(plain), code, body)
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 16<<20 {
		t.Errorf("the refused audit allocated %d bytes (the header is %d): the container's header was parsed", alloc, len(plain))
	}
}
