package convert

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/gosafetensors/safetensors/torch"
	"github.com/gosafetensors/safetensors/torch/torchtest"
)

// benchCheckpoint writes a ~1 GiB checkpoint of 241 F32/BF16 tensors, the
// largest 32 MiB, once per process.
var benchCheckpoint = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "convert-bench-")
	if err != nil {
		return "", err
	}
	var ts []torchtest.Tensor
	ts = append(ts, synth("embed.weight", "F32", 9, 8192, 1024))
	for i := range 80 {
		p := "layers." + itoa(i) + "."
		ts = append(ts,
			synth(p+"attn.weight", "F32", byte(i), 1024, 1024),
			synth(p+"mlp.weight", "BF16", byte(i+1), 4096, 1024),
			synth(p+"attn.bias", "F32", byte(i+2), 1024))
	}
	path := filepath.Join(dir, "bench.pt")
	writeTorchZip(&testing.B{}, path, ts)
	return path, nil
})

func itoa(i int) string {
	return string(rune('0'+i/100)) + string(rune('0'+i/10%10)) + string(rune('0'+i%10))
}

const largestBenchTensor = 8192 * 1024 * 4

// heapSampler records the peak of live heap objects while running.
type heapSampler struct {
	stop chan struct{}
	done chan uint64
}

func sampleHeap() *heapSampler {
	h := &heapSampler{stop: make(chan struct{}), done: make(chan uint64)}
	go func() {
		s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
		var peak uint64
		t := time.NewTicker(time.Millisecond)
		defer t.Stop()
		for {
			metrics.Read(s)
			peak = max(peak, s[0].Value.Uint64())
			select {
			case <-h.stop:
				h.done <- peak
				return
			case <-t.C:
			}
		}
	}()
	return h
}

func (h *heapSampler) peak() uint64 { close(h.stop); return <-h.done }

// copyOnce copies in to out with io.Copy and syncs it: the physical limit
// a conversion is measured against.
func copyOnce(b *testing.B, in, out string) {
	src, err := os.Open(in)
	if err != nil {
		b.Fatal(err)
	}
	defer src.Close()
	dst, err := os.Create(out)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		b.Fatal(err)
	}
	if err := dst.Sync(); err != nil {
		b.Fatal(err)
	}
	dst.Close()
}

// BenchmarkConvert converts a 1 GiB checkpoint and reports its time
// relative to io.Copy (plus fsync) of the same file, measured interleaved
// with it so that disk noise hits both (x-iocopy), and the peak live heap
// next to the largest tensor.
func BenchmarkConvert(b *testing.B) {
	in, err := benchCheckpoint()
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { os.RemoveAll(filepath.Dir(in)) })
	st, _ := os.Stat(in)
	for _, bc := range []struct {
		name string
		opt  []Option
	}{{"verify", []Option{WithOverwrite(true)}}, {"noverify", []Option{WithOverwrite(true), WithVerify(false)}}} {
		b.Run(bc.name, func(b *testing.B) {
			dir := b.TempDir()
			out, copied := filepath.Join(dir, "out.safetensors"), filepath.Join(dir, "copy.bin")
			b.SetBytes(st.Size())
			var ours, base time.Duration
			var peak uint64
			for range b.N {
				runtime.GC()
				h := sampleHeap()
				start := time.Now()
				if _, err := File(context.Background(), in, out, bc.opt...); err != nil {
					b.Fatal(err)
				}
				ours += time.Since(start)
				peak = max(peak, h.peak())
				start = time.Now()
				copyOnce(b, in, copied)
				base += time.Since(start)
				os.Remove(out)
				os.Remove(copied)
			}
			b.ReportMetric(float64(ours)/float64(base), "x-iocopy")
			b.ReportMetric(float64(ours.Nanoseconds())/float64(b.N), "ns/convert")
			b.ReportMetric(float64(base.Nanoseconds())/float64(b.N), "ns/iocopy")
			b.ReportMetric(float64(peak)/(1<<20), "peak-heap-MiB")
			b.ReportMetric(float64(largestBenchTensor)/(1<<20), "largest-tensor-MiB")
		})
	}
}

// BenchmarkScanVsConvert100kTensors compares auditing a 100,000-tensor
// checkpoint (torch.ScanFile) with converting it (File, verified), run
// interleaved; ratio-scan-per-convert is scan time / convert time.
func BenchmarkScanVsConvert100kTensors(b *testing.B) {
	dir := b.TempDir()
	in := filepath.Join(dir, "many.pt")
	ts := make([]torchtest.Tensor, 100_000)
	data := make([]byte, 16)
	for i := range ts {
		ts[i] = torchtest.Tensor{Name: "layers." + strconv.Itoa(i) + ".weight", DType: "F32", Shape: []int64{2, 2}, Data: data}
	}
	writeTorchZip(b, in, ts)
	out := filepath.Join(dir, "many.safetensors")
	var scan, conv time.Duration
	for range b.N {
		start := time.Now()
		rep, err := torch.ScanFile(in)
		if err != nil || !rep.Safe() {
			b.Fatal(err)
		}
		scan += time.Since(start)
		start = time.Now()
		if _, err := File(context.Background(), in, out, WithOverwrite(true)); err != nil {
			b.Fatal(err)
		}
		conv += time.Since(start)
	}
	b.ReportMetric(float64(scan.Nanoseconds())/float64(b.N), "ns/scan")
	b.ReportMetric(float64(conv.Nanoseconds())/float64(b.N), "ns/convert")
	b.ReportMetric(float64(scan)/float64(conv), "ratio-scan-per-convert")
}
