package source

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/gosafetensors/safetensors"
	"github.com/gosafetensors/safetensors/sharded"
)

// BenchmarkInspectShardedHTTP opens a 5-shard model (1,000 tensors a
// shard) over loopback HTTP and locally, interleaved, and reports the
// median time ratio, the requests and the bytes moved per open.
func BenchmarkInspectShardedHTTP(b *testing.B) {
	dir := b.TempDir()
	var tensors []safetensors.TensorData
	for i := range 5000 {
		tensors = append(tensors, safetensors.TensorData{Name: fmt.Sprintf("model.layers.%d.mlp.weight", i), DType: safetensors.BF16, Shape: []int64{64, 64}, Data: make([]byte, 64*64*2)})
	}
	src := filepath.Join(dir, "src.safetensors")
	if err := safetensors.WriteFile(src, tensors, map[string]string{"format": "pt"}); err != nil {
		b.Fatal(err)
	}
	m0, err := OpenModel(context.Background(), src)
	if err != nil {
		b.Fatal(err)
	}
	out := filepath.Join(dir, "model")
	if _, err := sharded.Split(context.Background(), m0, out, sharded.WithMaxShardSize(5000*64*64*2/5)); err != nil {
		b.Fatal(err)
	}
	m0.Close()
	srv := serveDir(b, out)
	index := filepath.Join(out, "model.safetensors.index.json")
	var local, remote []time.Duration
	var reqs int
	var moved int64
	for range b.N {
		t0 := time.Now()
		m, err := OpenModel(context.Background(), index)
		if err != nil {
			b.Fatal(err)
		}
		m.Close()
		local = append(local, time.Since(t0))
		r0, m0b := srv.total(), srv.bytes.Load()
		t0 = time.Now()
		m, err = OpenModel(context.Background(), srv.URL+"/model.safetensors.index.json")
		if err != nil {
			b.Fatal(err)
		}
		if len(m.Sharded.Shards()) != 5 {
			b.Fatalf("%d shards", len(m.Sharded.Shards()))
		}
		m.Close()
		remote = append(remote, time.Since(t0))
		reqs, moved = srv.total()-r0, srv.bytes.Load()-m0b
	}
	slices.Sort(local)
	slices.Sort(remote)
	b.ReportMetric(float64(remote[len(remote)/2])/float64(local[len(local)/2]), "http/local")
	b.ReportMetric(float64(reqs), "requests")
	b.ReportMetric(float64(moved), "bytes/open")
}
