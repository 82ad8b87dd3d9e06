package sharded

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/gosafetensors/safetensors"
)

// makeBig writes a safetensors file of n tensors of size bytes each.
func makeBig(b *testing.B, path string, n int, size int64) {
	infos := make([]safetensors.TensorInfo, n)
	for i := range infos {
		infos[i] = safetensors.TensorInfo{Name: "layers." + string(rune('a'+i)) + ".weight", DType: safetensors.U8, Shape: []int64{size}}
	}
	fw, err := safetensors.Create(path, infos, map[string]string{"format": "pt"})
	if err != nil {
		b.Fatal(err)
	}
	buf := make([]byte, size)
	for i := range buf {
		buf[i] = byte(i * 131)
	}
	for _, t := range fw.Tensors() {
		if err := fw.WriteTensor(t.Name, buf); err != nil {
			b.Fatal(err)
		}
	}
	if err := fw.Close(); err != nil {
		b.Fatal(err)
	}
}

func median(d []time.Duration) float64 {
	s := slices.Clone(d)
	slices.Sort(s)
	return float64(s[len(s)/2])
}

// BenchmarkSplitMerge1GiB splits a 1 GiB file into 256 MB shards and merges
// them back, interleaved in each iteration with `cp` of the same file
// (coreutils uses copy_file_range too) and with `cp` followed by `sync` of
// the copy (our outputs are synced before they are renamed). Page cache
// warm for all. Reported: medians of ours/cp and ours/(cp+sync).
//
//	go test ./sharded/ -run '^$' -bench SplitMerge1GiB -benchtime 5x
func BenchmarkSplitMerge1GiB(b *testing.B) {
	dir := b.TempDir()
	in := filepath.Join(dir, "in.safetensors")
	makeBig(b, in, 16, 64<<20)
	ctx := context.Background()
	for _, verify := range []bool{true, false} {
		name := "verify"
		if !verify {
			name = "no-verify"
		}
		b.Run(name, func(b *testing.B) {
			var cp, cpSync, split, merge []time.Duration
			for i := 0; i < b.N; i++ {
				cpOut := filepath.Join(dir, "cp.safetensors")
				t0 := time.Now()
				if out, err := exec.Command("cp", in, cpOut).CombinedOutput(); err != nil {
					b.Fatal(err, string(out))
				}
				cp = append(cp, time.Since(t0))
				os.Remove(cpOut)
				t0 = time.Now()
				if out, err := exec.Command("cp", in, cpOut).CombinedOutput(); err != nil {
					b.Fatal(err, string(out))
				}
				if out, err := exec.Command("sync", cpOut).CombinedOutput(); err != nil {
					b.Fatal(err, string(out))
				}
				cpSync = append(cpSync, time.Since(t0))
				os.Remove(cpOut)

				src, err := Open(ctx, in)
				if err != nil {
					b.Fatal(err)
				}
				shards := filepath.Join(dir, "shards")
				t0 = time.Now()
				if _, err := Split(ctx, src, shards, WithMaxShardSize(256_000_000), WithVerify(verify)); err != nil {
					b.Fatal(err)
				}
				split = append(split, time.Since(t0))
				src.Close()

				m, err := Open(ctx, shards)
				if err != nil {
					b.Fatal(err)
				}
				merged := filepath.Join(dir, "merged.safetensors")
				t0 = time.Now()
				if _, err := Merge(ctx, m, merged, WithVerify(verify)); err != nil {
					b.Fatal(err)
				}
				merge = append(merge, time.Since(t0))
				m.Close()
				os.RemoveAll(shards)
				os.Remove(merged)
			}
			b.ReportMetric(median(split)/median(cp), "split/cp")
			b.ReportMetric(median(merge)/median(cp), "merge/cp")
			b.ReportMetric(median(split)/median(cpSync), "split/cp+sync")
			b.ReportMetric(median(merge)/median(cpSync), "merge/cp+sync")
			b.ReportMetric(median(cp)/1e6, "cp-ms")
			b.ReportMetric(median(cpSync)/1e6, "cp+sync-ms")
		})
	}
}

// hidden hides a Model's type, so Merge takes the buffered path (read
// through the mapping, write) instead of copy_file_range.
type hidden struct{ safetensors.Source }

// BenchmarkMergeCopyPath compares, interleaved, a merge of a 256 MiB file
// through copy_file_range with one through a 16 MiB user-space buffer
// (reads from the mapping), both without verification.
//
//	go test ./sharded/ -run '^$' -bench MergeCopyPath -benchtime 7x
func BenchmarkMergeCopyPath(b *testing.B) {
	dir := b.TempDir()
	in := filepath.Join(dir, "in.safetensors")
	makeBig(b, in, 4, 64<<20)
	ctx := context.Background()
	m, err := Open(ctx, in)
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close()
	out := filepath.Join(dir, "out.safetensors")
	var fast, buffered []time.Duration
	for i := 0; i < b.N; i++ {
		for j, src := range []safetensors.Source{m, hidden{m}} {
			t0 := time.Now()
			if _, err := Merge(ctx, src, out, WithVerify(false), WithOverwrite(true)); err != nil {
				b.Fatal(err)
			}
			if j == 0 {
				fast = append(fast, time.Since(t0))
			} else {
				buffered = append(buffered, time.Since(t0))
			}
		}
	}
	b.ReportMetric(median(buffered)/median(fast), "buffered/copy_file_range")
}
