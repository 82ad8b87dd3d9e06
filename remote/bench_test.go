package remote

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	safetensors "github.com/gosafetensors/safetensors"
	"github.com/gosafetensors/safetensors/convert"
	"github.com/gosafetensors/safetensors/torch"
)

// BenchmarkHeaderRemoteVsLocal opens a file and parses its header over
// loopback HTTP and, alternately in the same loop, locally (safetensors.Open,
// a memory mapping). It reports the medians of both, their ratio, and the
// requests and bytes of the remote reads.
func BenchmarkHeaderRemoteVsLocal(b *testing.B) {
	dir := b.TempDir()
	synth := filepath.Join(dir, "synthetic_1000.safetensors")
	var ts []safetensors.TensorData
	for i := range 1000 {
		ts = append(ts, safetensors.TensorData{Name: fmt.Sprintf("model.layers.%d.mlp.down_proj.weight", i), DType: safetensors.F16, Shape: []int64{4, 8}, Data: make([]byte, 64)})
	}
	if err := safetensors.WriteFile(synth, ts, map[string]string{"format": "pt"}); err != nil {
		b.Fatal(err)
	}
	for _, path := range []string{"../testdata/torch/tiny_transformer.safetensors", "../testdata/torch/large_dims.safetensors", synth} {
		data, err := os.ReadFile(path)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(filepath.Base(path), func(b *testing.B) {
			srv := newRangeServer(b, data)
			var remote, local []time.Duration
			var reqs, bytes int64
			for b.Loop() {
				t0 := time.Now()
				lf, err := safetensors.Open(path)
				if err != nil {
					b.Fatal(err)
				}
				_ = lf.Names()
				lf.Close()
				t1 := time.Now()
				f, err := Open(context.Background(), srv.URL+"/m")
				if err != nil {
					b.Fatal(err)
				}
				r, err := safetensors.NewReader(f, f.Size())
				if err != nil {
					b.Fatal(err)
				}
				_ = r.Names()
				t2 := time.Now()
				local, remote = append(local, t1.Sub(t0)), append(remote, t2.Sub(t1))
				st := f.Stats()
				reqs, bytes = reqs+st.Requests, bytes+st.Bytes
			}
			n := int64(len(remote))
			lm, rm := median(local), median(remote)
			b.ReportMetric(float64(rm.Nanoseconds()), "remote-ns")
			b.ReportMetric(float64(lm.Nanoseconds()), "local-ns")
			b.ReportMetric(float64(rm)/float64(lm), "ratio")
			b.ReportMetric(float64(reqs)/float64(n), "requests/op")
			b.ReportMetric(float64(bytes)/float64(n), "bytes/op")
			b.ReportMetric(float64(len(data)), "file-bytes")
		})
	}
}

func median(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}

// BenchmarkColumnSlice reads 1/8 of the columns of a 2048 x 4096-byte
// matrix (2048 runs of 512 bytes) over loopback with multi-range requests
// and, alternately, with parallel single-range requests (what servers
// without multi-range get); local is a copy of the same runs from memory.
func BenchmarkColumnSlice(b *testing.B) {
	const rows, cols = 2048, 4096
	data := randomBytes(rows*cols, 60)
	srv := newRangeServer(b, data)
	multi, err := Open(context.Background(), srv.URL+"/m", WithPrefetch(8))
	if err != nil {
		b.Fatal(err)
	}
	single, err := Open(context.Background(), srv.URL+"/m", WithPrefetch(8), WithMultiRange(1, 100))
	if err != nil {
		b.Fatal(err)
	}
	bufs, offs := columnRuns(0, rows, cols, 0, cols/8)
	var tm, ts, tl []time.Duration
	m0, s0 := multi.Stats(), single.Stats()
	for b.Loop() {
		t0 := time.Now()
		if err := multi.ReadRuns(bufs, offs); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		if err := single.ReadRuns(bufs, offs); err != nil {
			b.Fatal(err)
		}
		t2 := time.Now()
		for i, buf := range bufs {
			copy(buf, data[offs[i]:])
		}
		t3 := time.Now()
		tm, ts, tl = append(tm, t1.Sub(t0)), append(ts, t2.Sub(t1)), append(tl, t3.Sub(t2))
	}
	n := float64(len(tm))
	m1, s1 := multi.Stats(), single.Stats()
	b.ReportMetric(float64(median(tm).Microseconds()), "multi-us")
	b.ReportMetric(float64(median(ts).Microseconds()), "single-us")
	b.ReportMetric(float64(median(tl).Microseconds()), "local-us")
	b.ReportMetric(float64(median(ts))/float64(median(tm)), "single/multi")
	b.ReportMetric(float64(m1.Requests-m0.Requests)/n, "multi-requests/op")
	b.ReportMetric(float64(s1.Requests-s0.Requests)/n, "single-requests/op")
	b.ReportMetric(float64(m1.Bytes-m0.Bytes)/n, "multi-bytes/op")
	b.ReportMetric(float64(rows*cols/8), "slice-bytes")
}

// BenchmarkRemoteCheckpoint audits a 10,000-tensor zip checkpoint over
// loopback HTTP (torch.Scan through a File) and, alternately, from memory
// (the same synthetic object as an io.ReaderAt: the work without the
// network); then converts a 50-storage, 50 MiB one over loopback and,
// alternately, downloads it whole with one GET into io.Discard (what the
// link can do at best) and converts it from a local file. It reports the medians, their ratios, and the
// requests and bytes of the remote runs against the minimum.
//
//	go test ./remote/ -run '^$' -bench RemoteCheckpoint -benchtime 5x
func BenchmarkRemoteCheckpoint(b *testing.B) {
	b.Run("scan", func(b *testing.B) {
		obj := sparseZip(b, 10_000, 1000)
		minimum := zipMinimum(b, obj)
		srv := serveObject(b, obj, obj.size)
		var remote, local []time.Duration
		for b.Loop() {
			t0 := time.Now()
			if _, err := torch.Scan(obj, obj.size, "local"); err != nil {
				b.Fatal(err)
			}
			t1 := time.Now()
			f, err := Open(context.Background(), srv.URL+"/m")
			if err != nil {
				b.Fatal(err)
			}
			if _, err := torch.Scan(f, f.Size(), f.Name()); err != nil {
				b.Fatal(err)
			}
			local, remote = append(local, t1.Sub(t0)), append(remote, time.Since(t1))
		}
		n := float64(len(remote))
		b.ReportMetric(float64(median(remote))/float64(median(local)), "remote/memory")
		b.ReportMetric(float64(srv.requests.Load())/n, "requests/op")
		b.ReportMetric(float64(srv.bytes.Load())/n/float64(minimum), "bytes/minimum")
	})
	b.Run("convert", func(b *testing.B) {
		obj := sparseZip(b, 50, 1<<20)
		srv := serveObject(b, obj, obj.size)
		dir := b.TempDir()
		out := filepath.Join(dir, "model.safetensors")
		in := filepath.Join(dir, "pytorch_model.bin")
		lf, err := os.Create(in)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := io.Copy(lf, io.NewSectionReader(obj, 0, obj.size)); err != nil {
			b.Fatal(err)
		}
		lf.Close()
		var conv, get, local []time.Duration
		var reqs, moved int64
		for b.Loop() {
			tl := time.Now()
			if _, err := convert.File(context.Background(), in, out, convert.WithOverwrite(true)); err != nil {
				b.Fatal(err)
			}
			local = append(local, time.Since(tl))
			t0 := time.Now()
			resp, err := http.Get(srv.URL + "/m")
			if err != nil {
				b.Fatal(err)
			}
			if _, err := io.Copy(io.Discard, resp.Body); err != nil {
				b.Fatal(err)
			}
			resp.Body.Close()
			t1 := time.Now()
			r0, b0 := srv.requests.Load(), srv.bytes.Load()
			f, err := Open(context.Background(), srv.URL+"/m")
			if err != nil {
				b.Fatal(err)
			}
			ck, err := torch.NewReader(f, f.Size(), f.Name())
			if err != nil {
				b.Fatal(err)
			}
			plan, err := convert.PlanCheckpoint(ck, f.Name())
			if err != nil {
				b.Fatal(err)
			}
			if _, err := plan.Write(context.Background(), out, convert.WithVerifyFromCopy(true), convert.WithOverwrite(true)); err != nil {
				b.Fatal(err)
			}
			get, conv = append(get, t1.Sub(t0)), append(conv, time.Since(t1))
			reqs, moved = reqs+srv.requests.Load()-r0, moved+srv.bytes.Load()-b0
		}
		n := float64(len(conv))
		b.ReportMetric(float64(median(conv))/float64(median(get)), "convert/GET")
		b.ReportMetric(float64(median(conv))/float64(median(local)), "remote/local")
		b.ReportMetric(float64(reqs)/n, "requests/op")
		b.ReportMetric(float64(moved)/n/float64(obj.size), "bytes/size")
	})
}
