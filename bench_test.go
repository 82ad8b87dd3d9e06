package safetensors_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	peer "github.com/nlpodyssey/safetensors"

	"github.com/gosafetensors/safetensors"
)

// Benchmarks compare, in the same run, against the physical limit (reading
// or writing the same bytes with the os package) and against the Go peer
// github.com/nlpodyssey/safetensors. Each reports "ratio" metrics: our time
// divided by the other's, measured interleaved so machine noise hits both.
//
//	go test -run '^$' -bench . -benchtime 5x .

// interleave runs each function b.N times, alternating, and reports each
// one's median time and the ratio of the first one's median to each of the
// others'. Medians, because a virtual machine's disk and page cache throw
// occasional multi-second outliers at whichever call is running.
func interleave(b *testing.B, names []string, fns ...func()) {
	b.Helper()
	interleaveSettled(b, nil, names, fns...)
}

// interleaveSettled is interleave with settle run, untimed, before each
// measured call: for writes, flushing the previous call's dirty pages so
// that it does not slow down the next one.
func interleaveSettled(b *testing.B, settle func(), names []string, fns ...func()) {
	b.Helper()
	times := make([][]time.Duration, len(fns))
	for range b.N {
		for i, f := range fns {
			if settle != nil {
				settle()
			}
			start := time.Now()
			f()
			times[i] = append(times[i], time.Since(start))
		}
	}
	b.StopTimer()
	med := make([]float64, len(fns))
	for i := range fns {
		slices.Sort(times[i])
		med[i] = float64(times[i][len(times[i])/2])
		b.ReportMetric(med[i], "ns/"+names[i])
	}
	for i := 1; i < len(fns); i++ {
		b.ReportMetric(med[0]/med[i], "ratio-vs-"+names[i])
	}
	b.ReportMetric(0, "ns/op")
}

// manyTensorsFile writes a file with n small F32 tensors, like a model with
// a huge header, and returns its path and bytes.
func manyTensorsFile(b *testing.B, n int) (string, []byte) {
	b.Helper()
	tensors := make([]safetensors.TensorData, n)
	data := make([]byte, 16)
	for i := range tensors {
		tensors[i] = safetensors.TensorData{Name: fmt.Sprintf("model.layers.%d.mlp.weight", i), DType: safetensors.F32, Shape: []int64{2, 2}, Data: data}
	}
	buf, err := safetensors.Marshal(tensors, map[string]string{"format": "pt"})
	if err != nil {
		b.Fatal(err)
	}
	path := filepath.Join(b.TempDir(), "many.safetensors")
	if err := os.WriteFile(path, buf, 0o644); err != nil {
		b.Fatal(err)
	}
	return path, buf
}

// BenchmarkValidate100kTensors: validating the header of a 100,000-tensor
// file, against reading the same header bytes and against the Go peer.
func BenchmarkValidate100kTensors(b *testing.B) {
	path, buf := manyTensorsFile(b, 100_000)
	hlen := int64(len(buf)) - 100_000*16
	interleave(b, []string{"ours", "readheader", "nlpodyssey"},
		func() {
			f, err := safetensors.Open(path)
			if err != nil {
				b.Fatal(err)
			}
			f.Close()
		},
		func() {
			f, err := os.Open(path)
			if err != nil {
				b.Fatal(err)
			}
			p := make([]byte, hlen)
			if _, err := f.ReadAt(p, 0); err != nil {
				b.Fatal(err)
			}
			f.Close()
		},
		func() {
			if _, _, err := peer.ReadMetadata(buf); err != nil {
				b.Fatal(err)
			}
		})
}

var (
	bigOnce  sync.Once
	bigDir   string
	bigFiles = map[string]string{}
)

// bigFile writes (once per process) a file of n tensors of size bytes each,
// with the same names in every file so that headers are alike.
func bigFile(b *testing.B, n int, size int64) string {
	b.Helper()
	bigOnce.Do(func() {
		var err error
		if bigDir, err = os.MkdirTemp("", "stbench"); err != nil {
			b.Fatal(err)
		}
	})
	key := fmt.Sprintf("%dx%d", n, size)
	if p, ok := bigFiles[key]; ok {
		return p
	}
	infos := make([]safetensors.TensorInfo, n)
	for i := range infos {
		infos[i] = safetensors.TensorInfo{Name: fmt.Sprintf("layer.%04d.weight", i), DType: safetensors.F32, Shape: []int64{size / 4}}
	}
	path := filepath.Join(bigDir, key+".safetensors")
	fw, err := safetensors.Create(path, infos, nil)
	if err != nil {
		b.Fatal(err)
	}
	chunk := make([]byte, size)
	for i := range chunk {
		chunk[i] = byte(i * 7)
	}
	for _, t := range fw.Tensors() {
		if err := fw.WriteTensor(t.Name, chunk); err != nil {
			b.Fatal(err)
		}
	}
	if err := fw.Close(); err != nil {
		b.Fatal(err)
	}
	bigFiles[key] = path
	return path
}

// BenchmarkOpen1GiBvs1MiB: opening costs O(header), so a 1 GiB file opens
// as fast as a 1 MiB file with the same header.
func BenchmarkOpen1GiBvs1MiB(b *testing.B) {
	big := bigFile(b, 1024, 1<<20)
	small := bigFile(b, 1024, 1<<10)
	open := func(p string) func() {
		return func() {
			f, err := safetensors.Open(p)
			if err != nil {
				b.Fatal(err)
			}
			f.Close()
		}
	}
	interleave(b, []string{"open1GiB", "open1MiB"}, open(big), open(small))
}

// BenchmarkReadAll1GiB: reading every tensor of a 1 GiB file into fresh
// memory, against os.ReadFile of the same file. ReadAll does it in one read
// and one allocation; Copy per tensor pays for zeroing each new buffer.
func BenchmarkReadAll1GiB(b *testing.B) {
	path := bigFile(b, 1024, 1<<20)
	b.SetBytes(1 << 30)
	interleave(b, []string{"readall", "readfile", "copyeach"},
		func() {
			f, err := safetensors.Open(path)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := f.ReadAll(); err != nil {
				b.Fatal(err)
			}
			f.Close()
		},
		func() {
			if _, err := os.ReadFile(path); err != nil {
				b.Fatal(err)
			}
		},
		func() {
			f, err := safetensors.Open(path)
			if err != nil {
				b.Fatal(err)
			}
			for t, err := range f.All() {
				if err != nil {
					b.Fatal(err)
				}
				if _, err := t.Copy(); err != nil {
					b.Fatal(err)
				}
			}
			f.Close()
		})
}

// BenchmarkWriteFile1GiB: WriteFile (atomic: temp file, fsync, rename)
// against os.WriteFile of the same bytes, with and without an fsync.
func BenchmarkWriteFile1GiB(b *testing.B) {
	const n, size = 1024, 1 << 20
	chunk := bytes.Repeat([]byte{1, 2, 3, 4}, size/4)
	tensors := make([]safetensors.TensorData, n)
	for i := range tensors {
		tensors[i] = safetensors.TensorData{Name: fmt.Sprintf("layer.%04d.weight", i), DType: safetensors.F32, Shape: []int64{size / 4}, Data: chunk}
	}
	flat := bytes.Repeat(chunk, n)
	dir := b.TempDir()
	b.SetBytes(n * size)
	// os.WriteFile does not fsync; WriteFile must (atomic and durable), so
	// oswritefile+fsync is the like-for-like comparison. Before each run the
	// previous outputs are removed and dirty pages flushed (untimed), so that
	// every run writes a new file into the same conditions: otherwise the
	// cost of freeing a replaced 1 GiB file, and of the guest VM touching
	// fresh memory for a second copy, lands on whichever run replaces it.
	settle := func() {
		for _, name := range []string{"a.safetensors", "b.bin", "c.bin"} {
			os.Remove(filepath.Join(dir, name))
		}
		flushDirtyPages()
	}
	interleaveSettled(b, settle, []string{"ours", "oswritefile", "oswritefile+fsync"},
		func() {
			if err := safetensors.WriteFile(filepath.Join(dir, "a.safetensors"), tensors, nil); err != nil {
				b.Fatal(err)
			}
		},
		func() {
			if err := os.WriteFile(filepath.Join(dir, "b.bin"), flat, 0o644); err != nil {
				b.Fatal(err)
			}
		},
		func() {
			f, err := os.Create(filepath.Join(dir, "c.bin"))
			if err != nil {
				b.Fatal(err)
			}
			f.Write(flat)
			f.Sync()
			f.Close()
		})
}
