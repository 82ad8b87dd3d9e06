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

// BenchmarkSplitMerge1GiB splits a 1 GiB file (16 tensors of 64 MiB) into
// 256 MB shards and merges them back, without and with verification. Each
// iteration also times two baselines that copy the same 1 GiB, interleaved
// with ours:
//
//   - cp: `cp in out` (coreutils copies with one copy_file_range call and
//     syncs nothing: the data is only in the page cache when it returns);
//   - cp+sync: `cp in out && sync out` (sync with a file argument fsyncs
//     that file only): the like-for-like baseline, since every file Split
//     and Merge write is fsynced before it gets its name.
//
// Before each timed operation, untimed, the outputs no longer needed are
// removed, the file system is synced (`sync -f`) and left alone for a
// second: on a file system mounted with online discard, whoever commits the
// journal after a deletion pays for the discards, and every operation must
// start from the same state. The merge reads the shards the unverified
// split of the same iteration wrote. Page cache warm for all.
// Reported: ratios of medians (ours / baseline), the cost of verification
// (verified / unverified), and the baselines' medians in ms.
//
//	go test ./sharded/ -run '^$' -bench SplitMerge1GiB -benchtime 5x
func BenchmarkSplitMerge1GiB(b *testing.B) {
	dir := b.TempDir()
	in := filepath.Join(dir, "in.safetensors")
	makeBig(b, in, 16, 64<<20)
	ctx := context.Background()
	run := func(c ...string) {
		if out, err := exec.Command(c[0], c[1:]...).CombinedOutput(); err != nil {
			b.Fatal(err, string(out))
		}
	}
	cpOut := filepath.Join(dir, "cp.safetensors")
	cpSyncOut := filepath.Join(dir, "cp-sync.safetensors")
	merged := filepath.Join(dir, "merged.safetensors")
	mergedV := filepath.Join(dir, "merged-verified.safetensors")
	shards := filepath.Join(dir, "shards")
	shardsV := filepath.Join(dir, "shards-verified")
	settle := func(keep string) {
		for _, p := range []string{cpOut, cpSyncOut, merged, mergedV, shards, shardsV} {
			if p != keep {
				os.RemoveAll(p)
			}
		}
		run("sync", "-f", dir)
		time.Sleep(time.Second)
	}
	timed := func(d *[]time.Duration, keep string, f func()) {
		settle(keep)
		t0 := time.Now()
		f()
		*d = append(*d, time.Since(t0))
	}
	var cp, cpSync, split, merge, splitV, mergeV []time.Duration
	for i := 0; i < b.N; i++ {
		timed(&cp, "", func() { run("cp", in, cpOut) })
		timed(&cpSync, "", func() { run("cp", in, cpSyncOut); run("sync", cpSyncOut) })
		src, err := Open(ctx, in)
		if err != nil {
			b.Fatal(err)
		}
		for _, s := range []struct {
			d      *[]time.Duration
			out    string
			verify bool
			keep   string
		}{{&split, shards, false, ""}, {&splitV, shardsV, true, shards}} {
			timed(s.d, s.keep, func() {
				if _, err := Split(ctx, src, s.out, WithMaxShardSize(256_000_000), WithVerify(s.verify)); err != nil {
					b.Fatal(err)
				}
			})
		}
		src.Close()
		m, err := Open(ctx, shards)
		if err != nil {
			b.Fatal(err)
		}
		for _, s := range []struct {
			d      *[]time.Duration
			out    string
			verify bool
		}{{&merge, merged, false}, {&mergeV, mergedV, true}} {
			timed(s.d, shards, func() {
				if _, err := Merge(ctx, m, s.out, WithVerify(s.verify)); err != nil {
					b.Fatal(err)
				}
			})
		}
		m.Close()
	}
	settle("")
	for _, base := range []struct {
		name string
		d    []time.Duration
	}{{"cp+sync", cpSync}, {"cp", cp}} {
		b.ReportMetric(median(split)/median(base.d), "split/"+base.name)
		b.ReportMetric(median(merge)/median(base.d), "merge/"+base.name)
		b.ReportMetric(median(splitV)/median(base.d), "split-verified/"+base.name)
		b.ReportMetric(median(mergeV)/median(base.d), "merge-verified/"+base.name)
	}
	b.ReportMetric(median(splitV)/median(split), "split-verified/split")
	b.ReportMetric(median(mergeV)/median(merge), "merge-verified/merge")
	b.ReportMetric(median(cp)/1e6, "cp-ms")
	b.ReportMetric(median(cpSync)/1e6, "cp+sync-ms")
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
