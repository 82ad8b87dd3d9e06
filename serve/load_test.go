package serve_test

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gosafetensors/safetensors"
	"github.com/gosafetensors/safetensors/serve"
	"github.com/gosafetensors/safetensors/torch/torchtest"
)

// TestLoadScan is the service's load test, on loopback only and bounded
// in requests and time: 8 clients POST a 1 MB file to /v1/scan, and the
// same clients POST the same bytes to a handler that only reads them (the
// loopback HTTP upload limit of this machine, measured in the same run).
// It reports requests/s and latency percentiles; docs/serve.md quotes it.
// Run it with GOSAFETENSORS_LOAD=1 (GOSAFETENSORS_LOAD_REQUESTS sets the
// count, 800 by default).
func TestLoadScan(t *testing.T) {
	if os.Getenv("GOSAFETENSORS_LOAD") == "" {
		t.Skip("set GOSAFETENSORS_LOAD=1 to run the load test")
	}
	requests := 800
	if n := os.Getenv("GOSAFETENSORS_LOAD_REQUESTS"); n != "" {
		fmt.Sscan(n, &requests)
	}
	const clients = 8
	dir := t.TempDir()
	// a 1 MiB torch zip checkpoint (64 tensors of 16 KiB) and a 1 MiB
	// safetensors file
	var tensors []torchtest.Tensor
	var stTensors []safetensors.TensorData
	for i := range 64 {
		data := bytes.Repeat([]byte{byte(i)}, 16<<10)
		name := fmt.Sprintf("layers.%d.weight", i)
		tensors = append(tensors, torchtest.Tensor{Name: name, DType: "F32", Shape: []int64{64, 64}, Data: data})
		stTensors = append(stTensors, safetensors.TensorData{Name: name, DType: safetensors.F32, Shape: []int64{64, 64}, Data: data})
	}
	ckpt := filepath.Join(dir, "model.bin")
	if err := torchtest.WriteFile(ckpt, tensors, torchtest.Options{}); err != nil {
		t.Fatal(err)
	}
	st := filepath.Join(dir, "model.safetensors")
	if err := safetensors.WriteFile(st, stTensors, nil); err != nil {
		t.Fatal(err)
	}
	lim := serve.DefaultLimits()
	lim.MaxQueued = 64
	ts := start(t, serve.WithLimits(lim), serve.WithLogger(discardLogger()))
	sink := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		io.WriteString(w, "[]\n")
	}))
	defer sink.Close()

	var report strings.Builder
	fmt.Fprintf(&report, "POST 1 MB, %d clients, %d requests each run:\n", clients, requests)
	var limitRate float64
	for _, run := range []struct{ name, url, file string }{
		{"read-only handler (limit)", sink.URL + "/", ckpt},
		{"/v1/scan torch zip", ts.URL + "/v1/scan?name=model.bin", ckpt},
		{"/v1/scan safetensors", ts.URL + "/v1/scan?name=model.safetensors", st},
	} {
		body, _ := os.ReadFile(run.file)
		rate, lat := load(t, run.url, body, clients, requests)
		if limitRate == 0 {
			limitRate = rate
		}
		fmt.Fprintf(&report, "  %-28s %8.1f req/s (%.2f of the limit)  p50 %6.2f ms  p90 %6.2f ms  p99 %6.2f ms\n",
			run.name, rate, rate/limitRate, ms(lat, 0.50), ms(lat, 0.90), ms(lat, 0.99))
	}
	t.Log("\n" + report.String())
}

func load(t *testing.T, url string, body []byte, clients, requests int) (float64, []time.Duration) {
	var mu sync.Mutex
	var lat []time.Duration
	next := make(chan struct{}, requests)
	for range requests {
		next <- struct{}{}
	}
	close(next)
	deadline := time.Now().Add(2 * time.Minute)
	start := time.Now()
	var wg sync.WaitGroup
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range next {
				if time.Now().After(deadline) {
					return
				}
				t0 := time.Now()
				resp, err := http.Post(url, "application/octet-stream", bytes.NewReader(body))
				if err != nil {
					t.Error(err)
					return
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 || bytes.Contains(b, []byte(`"error"`)) {
					t.Errorf("%s: %d %s", url, resp.StatusCode, b)
					return
				}
				d := time.Since(t0)
				mu.Lock()
				lat = append(lat, d)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	el := time.Since(start)
	slices.Sort(lat)
	return float64(len(lat)) / el.Seconds(), lat
}

func ms(lat []time.Duration, q float64) float64 {
	if len(lat) == 0 {
		return 0
	}
	return float64(lat[min(len(lat)-1, int(q*float64(len(lat))))].Microseconds()) / 1000
}
