package convert

import (
	"io"
	"os"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"sync"
	"testing"
	"time"

	"github.com/gosafetensors/safetensors/torch/torchtest"
)

// benchCheckpoint writes a ~260 MiB checkpoint of 301 F32/BF16 tensors, the
// largest 32 MiB, once per process.
var benchCheckpoint = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "convert-bench-")
	if err != nil {
		return "", err
	}
	var ts []torchtest.Tensor
	ts = append(ts, synth("embed.weight", "F32", 9, 8192, 1024))
	for i := range 100 {
		p := "layers." + itoa(i) + "."
		ts = append(ts,
			synth(p+"attn.weight", "F32", byte(i), 512, 512),
			synth(p+"mlp.weight", "BF16", byte(i+1), 1024, 512),
			synth(p+"attn.bias", "F32", byte(i+2), 512))
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

func copyBaseline(b *testing.B, in, out string) time.Duration {
	best := time.Duration(1<<63 - 1)
	for range 3 {
		start := time.Now()
		src, err := os.Open(in)
		if err != nil {
			b.Fatal(err)
		}
		dst, err := os.Create(out)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := io.Copy(dst, src); err != nil {
			b.Fatal(err)
		}
		dst.Sync()
		dst.Close()
		src.Close()
		best = min(best, time.Since(start))
		os.Remove(out)
	}
	return best
}

// BenchmarkConvert converts a 260 MiB checkpoint and reports its time
// relative to io.Copy of the same file (x-iocopy), and the peak live heap
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
		opt  Options
	}{{"verify", Options{Overwrite: true}}, {"noverify", Options{Overwrite: true, NoVerify: true}}} {
		b.Run(bc.name, func(b *testing.B) {
			out := filepath.Join(b.TempDir(), "out.safetensors")
			base := copyBaseline(b, in, out)
			runtime.GC()
			h := sampleHeap()
			b.SetBytes(st.Size())
			b.ResetTimer()
			for range b.N {
				if _, err := File(in, out, bc.opt); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			peak := h.peak()
			perOp := b.Elapsed() / time.Duration(b.N)
			b.ReportMetric(float64(perOp)/float64(base), "x-iocopy")
			b.ReportMetric(float64(peak)/(1<<20), "peak-heap-MiB")
			b.ReportMetric(float64(largestBenchTensor)/(1<<20), "largest-tensor-MiB")
		})
	}
}
