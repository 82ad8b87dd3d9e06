package serve_test

import (
	"bytes"
	"mime/multipart"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gosafetensors/safetensors/serve"
)

// uploadBoth posts body to /v1/scan and as the viewer's multipart form,
// and returns both answers.
func uploadBoth(t *testing.T, ts *testServer, body []byte) (codes [2]int, bodies [2]string) {
	t.Helper()
	codes[0], bodies[0], _ = do(t, "POST", ts.URL+"/v1/scan?name=m.safetensors", "", bytes.NewReader(body))
	var form bytes.Buffer
	mw := multipart.NewWriter(&form)
	fw, _ := mw.CreateFormFile("file", "m.safetensors")
	fw.Write(body)
	mw.Close()
	codes[1], bodies[1], _ = do(t, "POST", ts.URL+"/", "", &form, "Content-Type", mw.FormDataContentType(), "Sec-Fetch-Site", "same-origin")
	return codes, bodies
}

// A spool the service cannot write is the service's failure, not the
// client's: 503 (507 when the file system is full), and no answer names a
// server path.
func TestSpoolFailure(t *testing.T) {
	model, err := os.ReadFile("../testdata/torch/tiny_transformer.safetensors")
	if err != nil {
		t.Fatal(err)
	}
	t.Run("gone", func(t *testing.T) {
		spool := filepath.Join(t.TempDir(), "spool-dir-name")
		os.Mkdir(spool, 0o755)
		ts := start(t, serve.WithSpoolDir(spool))
		os.Remove(spool)
		codes, bodies := uploadBoth(t, ts, model)
		for i := range codes {
			if codes[i] != http.StatusServiceUnavailable || strings.Contains(bodies[i], "spool-dir-name") || strings.Contains(bodies[i], os.TempDir()) {
				t.Errorf("upload %d to a removed spool: %d\n%s", i, codes[i], bodies[i])
			}
		}
	})
	t.Run("full", func(t *testing.T) {
		if os.Geteuid() != 0 {
			t.Skip("needs root to mount a small tmpfs as a full spool")
		}
		spool := filepath.Join(t.TempDir(), "full-spool-dir")
		os.Mkdir(spool, 0o755)
		if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=16k", "tmpfs", spool).CombinedOutput(); err != nil {
			t.Skipf("cannot mount a tmpfs (%v: %s)", err, out)
		}
		t.Cleanup(func() { exec.Command("umount", spool).Run() })
		ts := start(t, serve.WithSpoolDir(spool))
		codes, bodies := uploadBoth(t, ts, append(model, make([]byte, 256<<10)...))
		for i := range codes {
			if codes[i] != http.StatusInsufficientStorage || strings.Contains(bodies[i], "full-spool-dir") || strings.Contains(bodies[i], os.TempDir()) {
				t.Errorf("upload %d to a full spool: %d\n%s", i, codes[i], bodies[i])
			}
		}
	})
}
