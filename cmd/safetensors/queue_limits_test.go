package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gosafetensors/safetensors"
	"github.com/gosafetensors/safetensors/compressed"
	"github.com/gosafetensors/safetensors/queue"
	"github.com/gosafetensors/safetensors/source"
)

// zstdOf is data in the seekable zstd container.
func zstdOf(t *testing.T, data []byte, opts ...compressed.WriteOption) []byte {
	t.Helper()
	var b bytes.Buffer
	if _, err := compressed.Compress(context.Background(), &b, bytes.NewReader(data), int64(len(data)), opts...); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// serve --queue holds an uploaded object to the bounds of the HTTP
// service's audits, from the same flags: a compressed object whose header
// decompresses past --max-header, and one of zeros that claims more than
// --max-expansion times its size, each end as one "error" result naming
// the limit and its flag, written on the first delivery (the message
// acknowledged, not delivered again); models within the bounds are clean.
func TestServeQueueLimits(t *testing.T) {
	// 2,000 tensors and 5 MiB of metadata: a header past --max-header 4MiB
	var ts []safetensors.TensorData
	for i := range 2000 {
		ts = append(ts, safetensors.TensorData{Name: fmt.Sprintf("model.layers.%d.weight", i), DType: safetensors.F32, Shape: []int64{1}, Data: make([]byte, 4)})
	}
	header, err := safetensors.Marshal(ts, map[string]string{"pad": strings.Repeat("x", 5<<20)})
	if err != nil {
		t.Fatal(err)
	}
	bigHeader := zstdOf(t, header, compressed.WithFrameSize(1<<20))
	// 96 MiB of zeros in one tensor
	zeros, err := safetensors.Marshal([]safetensors.TensorData{{Name: "w", DType: safetensors.U8, Shape: []int64{96 << 20}, Data: make([]byte, 96<<20)}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	bomb := zstdOf(t, zeros)
	if ratio := len(zeros) / len(bomb); ratio < 1000 || int64(len(zeros)) <= 32*int64(len(bomb))+source.ExpansionSlack {
		t.Fatalf("the zeros model compresses %d times (%d bytes to %d): within --max-expansion 32", ratio, len(zeros), len(bomb))
	}
	t.Logf("header: %d bytes compressed to %d; zeros: %d to %d (%d times)", len(header), len(bigHeader), len(zeros), len(bomb), len(zeros)/len(bomb))
	tiny, err := os.ReadFile("../../testdata/torch/tiny_transformer.safetensors")
	if err != nil {
		t.Fatal(err)
	}
	objects := []struct {
		key     string
		data    []byte
		verdict string
		says    []string
	}{
		{"in/header.safetensors.zst", bigHeader, "error", []string{"larger than the limit (4194304 bytes", "--max-header"}},
		{"in/zeros.safetensors.zst", bomb, "error", []string{"decompresses to more than the limit", "32 times its", "--max-expansion"}},
		{"in/tiny.safetensors", tiny, "clean", nil},
		{"in/tiny.safetensors.zst", zstdOf(t, tiny), "clean", nil},
	}

	q := startQueueWorker(t, "--max-header", "4MiB", "--max-expansion", "32", "--ack-wait", "5s", "--max-deliver", "5")
	js, results := q.js, q.results
	etags := map[string]string{}
	for i, o := range objects {
		etags[o.key] = q.upload(t, o.key, o.data, i)
	}
	waitUntil(t, "every message acknowledged", func() bool {
		c, err := js.Consumer(context.Background(), queue.DefaultStream, queue.DefaultConsumer)
		if err != nil {
			return false
		}
		info, err := c.Info(context.Background())
		return err == nil && info.AckFloor.Stream == uint64(len(objects)) && info.NumAckPending == 0 && info.NumPending == 0
	})
	c, _ := js.Consumer(context.Background(), queue.DefaultStream, queue.DefaultConsumer)
	info, _ := c.Info(context.Background())
	if info.NumRedelivered != 0 || info.Delivered.Consumer != uint64(len(objects)) {
		t.Errorf("%d deliveries of %d messages, %d redelivered: want each delivered once", info.Delivered.Consumer, len(objects), info.NumRedelivered)
	}
	sigtermExitsZero(t, q.codes)
	if m, _ := filepath.Glob(filepath.Join(results, "uploads", "*.json")); len(m) != len(objects) {
		t.Errorf("%d result documents, want %d", len(m), len(objects))
	}
	for _, o := range objects {
		ev := queue.Event{Bucket: "uploads", Key: o.key, ETag: etags[o.key]}
		doc, err := os.ReadFile(filepath.Join(results, filepath.FromSlash(queue.ResultKey(&ev))))
		if err != nil {
			t.Fatal(err)
		}
		var r struct {
			Verdict  string `json:"verdict"`
			Error    string `json:"error"`
			Attempts int    `json:"attempts"`
		}
		if err := json.Unmarshal(doc, &r); err != nil {
			t.Fatal(err)
		}
		if r.Verdict != o.verdict || r.Attempts != 1 {
			t.Errorf("%s: verdict %s in %d attempts, want %s in 1: %.500s", o.key, r.Verdict, r.Attempts, o.verdict, doc)
		}
		for _, s := range o.says {
			if !strings.Contains(r.Error, s) {
				t.Errorf("%s: the error does not say %q: %q", o.key, s, r.Error)
			}
		}
	}
}
