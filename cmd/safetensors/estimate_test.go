package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// modelWithConfig is a directory holding a small model and the real
// Llama-3-8B config.json.
func modelWithConfig(t *testing.T, cfg string) string {
	dir := t.TempDir()
	copyTestFile(t, torchDir+"tiny_transformer.safetensors", filepath.Join(dir, "model.safetensors"))
	copyTestFile(t, "../../testdata/configs/"+cfg, filepath.Join(dir, "config.json"))
	return dir
}

func TestEstimateServing(t *testing.T) {
	dir := modelWithConfig(t, "llama3_8b.json")
	srv := httptest.NewServer(withETag(dir))
	defer srv.Close()
	// Llama-3-8B: 128 KiB of BF16 KV per token; 8192 tokens x 2 sequences
	// = 2 GiB, over 2 devices 1 GiB each.
	for _, loc := range []string{dir, filepath.Join(dir, "model.safetensors"), srv.URL + "/model.safetensors"} {
		code, out, errOut := runCLI(t, "estimate", loc, "--context", "8192", "--batch", "2", "--tp", "2", "--gpu-memory", "2GiB", "--json")
		if code != 0 {
			t.Fatalf("%s: exit %d %s", loc, code, errOut)
		}
		var j estimateJSON
		if err := json.Unmarshal([]byte(out), &j); err != nil || j.Serving == nil {
			t.Fatalf("%s: %v %s", loc, err, out)
		}
		s := j.Serving
		if s.KVCachePerDevice != 1<<30 || s.KVHeadsPerDevice != 4 || s.Layers != 32 || s.WeightsPerDevice != j.Stored/2 || s.Fits == nil || !*s.Fits ||
			s.TotalPerDevice != s.WeightsPerDevice+s.KVCachePerDevice+s.ActivationAllowance+s.RuntimeAllowance {
			t.Errorf("%s: %+v", loc, *s)
		}
	}
	code, out, _ := runCLI(t, "estimate", dir, "--context", "8192", "--batch", "8", "--gpu-memory", "4GiB")
	if code != 1 || !strings.Contains(out, "does not fit in 4.0 GiB per device") || !strings.Contains(out, "(allowance") {
		t.Errorf("exit %d:\n%s", code, out)
	}
	// DeepSeek's latent attention and Mistral's sliding window, through --config.
	_, out, _ = runCLI(t, "estimate", dir, "--context", "4096", "--tp", "8", "--config", "../../testdata/configs/deepseek_v3.json", "--json")
	var j estimateJSON
	json.Unmarshal([]byte(out), &j)
	if j.Serving == nil || j.Serving.KVCachePerDevice != 4096*576*2*61 || !j.Serving.MLA {
		t.Errorf("deepseek: %s", out)
	}
	if code, _, errOut := runCLI(t, "estimate", filepath.Join(t.TempDir()), "--context", "10"); code == 0 {
		t.Errorf("no model, no config: exit 0 %s", errOut)
	}
	os.Remove(filepath.Join(dir, "config.json"))
	if code, _, errOut := runCLI(t, "estimate", dir, "--context", "10"); code != 2 || !strings.Contains(errOut, "--config") {
		t.Errorf("missing config: exit %d %q", code, errOut)
	}
	if code, _, _ := runCLI(t, "estimate", dir, "--tp", "2"); code != 2 {
		t.Errorf("--tp without --context: exit %d", code)
	}
}

// TestEstimateColumns: the numbers of the table are right-aligned (no
// ragged column) and no line ends in spaces.
func TestEstimateColumns(t *testing.T) {
	code, out, errOut := runCLI(t, "estimate", torchDir+"tiny_transformer.safetensors")
	if code != 0 {
		t.Fatal(errOut)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")[1:]
	end := -1
	for _, l := range lines {
		if strings.TrimRight(l, " ") != l {
			t.Errorf("trailing spaces: %q", l)
		}
		if !strings.HasSuffix(l, " bytes") {
			t.Errorf("row %q", l)
		}
		if end >= 0 && len(l) != end {
			t.Errorf("ragged: %q is %d wide, the others %d", l, len(l), end)
		}
		end = len(l)
	}
}

// TestEstimateServingHub: hf://org/model reads config.json from the repo
// beside the weights, through the Hub client (a Hub-shaped loopback server).
func TestEstimateServingHub(t *testing.T) {
	dir := modelWithConfig(t, "mistral_7b_v0.1.json")
	const commit = "0123456789abcdef0123456789abcdef01234567"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/api/models/org/model") {
			json.NewEncoder(w).Encode(map[string]any{"sha": commit, "siblings": []map[string]string{
				{"rfilename": "config.json"}, {"rfilename": "model.safetensors"}}})
			return
		}
		rest, ok := strings.CutPrefix(r.URL.Path, "/org/model/resolve/")
		_, file, _ := strings.Cut(rest, "/")
		b, err := os.ReadFile(filepath.Join(dir, file))
		if !ok || err != nil {
			w.Header().Set("X-Error-Code", "EntryNotFound")
			http.Error(w, "no such file", http.StatusNotFound)
			return
		}
		w.Header().Set("X-Repo-Commit", commit)
		w.Header().Set("ETag", `"`+file+`"`)
		http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(b))
	}))
	defer srv.Close()
	t.Setenv("HF_ENDPOINT", srv.URL)
	t.Setenv("HF_TOKEN", "")
	t.Setenv("HF_HOME", t.TempDir())
	// Mistral: a 32768-token context caches the 4096-token window per layer.
	code, out, errOut := runCLI(t, "estimate", "hf://org/model", "--context", "32768", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var j estimateJSON
	if err := json.Unmarshal([]byte(out), &j); err != nil || j.Serving == nil {
		t.Fatalf("%v %s", err, out)
	}
	if j.Serving.KVCachePerDevice != 4096*131072 || j.Serving.SlidingLayers != 32 || j.Serving.SlidingWindow != 4096 {
		t.Errorf("%+v", *j.Serving)
	}
}
