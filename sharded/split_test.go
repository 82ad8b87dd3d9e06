package sharded

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gosafetensors/safetensors"
	"github.com/gosafetensors/safetensors/internal/mmap"
)

// The Hub's own test (huggingface_hub tests/test_serialization.py,
// test_multiple_shards): sizes 6, 10, 30, 2, 2 with a limit of 10.
func TestPlanShardsLikeTheHub(t *testing.T) {
	sizes := map[string]int64{"layer_1": 6, "layer_2": 10, "layer_3": 30, "layer_4": 2, "layer_5": 2}
	got := PlanShards([]string{"layer_1", "layer_2", "layer_3", "layer_4", "layer_5"}, func(n string) int64 { return sizes[n] }, 10)
	want := [][]string{{"layer_1"}, {"layer_3"}, {"layer_2"}, {"layer_4", "layer_5"}}
	if !slices.EqualFunc(got, want, slices.Equal) {
		t.Errorf("got %q, want %q", got, want)
	}
	if got := PlanShards(nil, nil, 10); len(got) != 1 || len(got[0]) != 0 {
		t.Errorf("no tensors: %q", got)
	}
	if ShardName(1, 3) != "model-00002-of-00003.safetensors" || ShardName(0, 1) != SingleName {
		t.Error(ShardName(1, 3), ShardName(0, 1))
	}
}

// Every reference safetensors file in testdata/torch, split into small
// shards and merged back, gives the file Layout writes for it: byte for
// byte the original whenever the original is in the reference writer's
// canonical form, and always the same tensors and metadata.
func TestSplitMergeRoundTrip(t *testing.T) {
	files, _ := filepath.Glob("../testdata/torch/*.safetensors")
	if len(files) < 10 {
		t.Fatalf("only %d fixtures", len(files))
	}
	identical := 0
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			orig, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			src, err := Open(context.Background(), file)
			if err != nil {
				t.Fatal(err)
			}
			defer src.Close()
			out := t.TempDir()
			limit := max(src.Shards()[0].Bytes/3, 1)
			res, err := Split(context.Background(), src, out, WithMaxShardSize(limit))
			if err != nil {
				t.Fatal(err)
			}
			m, err := Open(context.Background(), out)
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			if len(res.Files) > 1 && (m.Index() == nil || len(m.Warnings()) != 0) {
				t.Errorf("split into %d files: index %v, warnings %q", len(res.Files), m.Index(), m.Warnings())
			}
			merged := filepath.Join(t.TempDir(), "merged.safetensors")
			if _, err := Merge(context.Background(), m, merged); err != nil {
				t.Fatal(err)
			}
			got, _ := os.ReadFile(merged)
			canon := canonical(t, src)
			if !bytes.Equal(got, canon) {
				t.Fatalf("merged file differs from the canonical encoding of %s", file)
			}
			if bytes.Equal(orig, canon) {
				identical++
			}
		})
	}
	if identical < len(files)/2 {
		t.Errorf("only %d of %d round trips were byte-identical to the original", identical, len(files))
	}
	t.Logf("%d of %d round trips byte-identical to the original file", identical, len(files))
}

// canonical is src written by the reference writer's rules, in memory.
func canonical(t *testing.T, src safetensors.Source) []byte {
	var tensors []safetensors.TensorData
	for _, n := range src.Names() {
		tn, err := src.Tensor(n)
		if err != nil {
			t.Fatal(err)
		}
		b, err := tn.Copy()
		if err != nil {
			t.Fatal(err)
		}
		tensors = append(tensors, safetensors.TensorData{Name: n, DType: tn.DType, Shape: tn.Shape, Data: b})
	}
	meta := src.Meta()
	if len(meta) == 0 {
		meta = nil
	}
	b, err := safetensors.Marshal(tensors, meta)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestSplitLargeTensorAlone(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "in.safetensors")
	names := []string{"a", "big", "c", "d"}
	if err := safetensors.WriteFile(in, tensorsOf(names, []int{40, 500, 30, 50}), map[string]string{"format": "pt"}); err != nil {
		t.Fatal(err)
	}
	src, err := Open(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	out := filepath.Join(dir, "out")
	var last, total int64
	res, err := Split(context.Background(), src, out, WithMaxShardSize(100), WithProgress(func(d, tt int64) { last, total = d, tt }))
	if err != nil {
		t.Fatal(err)
	}
	if last != 620 || total != 620 || res.Bytes != 620 {
		t.Errorf("progress %d of %d, result %d bytes", last, total, res.Bytes)
	}
	// The Hub's order: big alone, met second, comes first; a+c fill the
	// next; d would overflow it.
	want := map[string]string{"big": "model-00001-of-00003.safetensors", "a": "model-00002-of-00003.safetensors", "c": "model-00002-of-00003.safetensors", "d": "model-00003-of-00003.safetensors"}
	for n, s := range want {
		if res.Index.WeightMap[n] != s {
			t.Errorf("%s in %s, want %s", n, res.Index.WeightMap[n], s)
		}
	}
	wantFiles := []string{"model-00001-of-00003.safetensors", "model-00002-of-00003.safetensors", "model-00003-of-00003.safetensors", IndexName}
	if got := listDir(t, out); !slices.Equal(got, wantFiles) {
		t.Errorf("files %q", got)
	}
	idx, err := ReadIndex(filepath.Join(out, IndexName))
	if err != nil || idx.TotalSize != 620 || idx.TotalParameters != 620 {
		t.Errorf("index %+v, %v", idx, err)
	}
	for _, f := range wantFiles[:3] {
		sf, err := safetensors.Open(filepath.Join(out, f))
		if err != nil {
			t.Fatal(err)
		}
		if sf.Metadata["format"] != "pt" {
			t.Errorf("%s: metadata %v", f, sf.Metadata)
		}
		sf.Close()
	}
}

func TestSplitOneShardWritesNoIndex(t *testing.T) {
	src, err := Open(context.Background(), twoShardDir(t))
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	out := t.TempDir()
	res, err := Split(context.Background(), src, out)
	if err != nil {
		t.Fatal(err)
	}
	if res.Index != nil || !slices.Equal(listDir(t, out), []string{SingleName}) {
		t.Errorf("index %v, files %q", res.Index, listDir(t, out))
	}
	// Again: the output exists now.
	if _, err := Split(context.Background(), src, out); !errors.Is(err, ErrExists) {
		t.Errorf("second split: %v", err)
	}
	if _, err := Split(context.Background(), src, out, WithOverwrite(true)); err != nil {
		t.Errorf("overwrite: %v", err)
	}
	// Sharding now would leave model.safetensors to shadow the shards.
	if _, err := Split(context.Background(), src, out, WithMaxShardSize(10), WithOverwrite(true)); !errors.Is(err, ErrExists) || !strings.Contains(err.Error(), SingleName) {
		t.Errorf("stale single file: %v", err)
	}
	if !slices.Equal(listDir(t, out), []string{SingleName}) {
		t.Errorf("files %q", listDir(t, out))
	}
}

// A read error in the middle of a split leaves nothing: not the shards
// already written, not their temporary files.
func TestSplitAllOrNothing(t *testing.T) {
	dir := twoShardDir(t)
	idx, _ := ReadIndex(filepath.Join(dir, IndexName))
	const bad = "model-00002-of-00002.safetensors"
	st, _ := os.Stat(filepath.Join(dir, bad))
	m, err := OpenIndex(context.Background(), idx, "idx", failingOpener(dir, bad, st.Size()-1))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	out := filepath.Join(t.TempDir(), "out")
	_, err = Split(context.Background(), m, out, WithMaxShardSize(9))
	if !errors.Is(err, errInjected) {
		t.Fatalf("got %v", err)
	}
	if got := listDir(t, out); len(got) != 0 {
		t.Errorf("left behind: %q", got)
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	src, _ := Open(context.Background(), dir)
	defer src.Close()
	if _, err := Split(ctx, src, out, WithMaxShardSize(9)); !errors.Is(err, context.Canceled) {
		t.Errorf("canceled: %v", err)
	}
	if got := listDir(t, out); len(got) != 0 {
		t.Errorf("left behind: %q", got)
	}
}

// verify notices an output that does not match its source, whichever way
// it reads the two: the output mapped or read with pread, the source a
// local file (mapped afresh) or any Source (read through it). A changed
// byte in a tensor, in the header or past the end, and a truncated file,
// are all errors.
func TestVerifyCatchesTampering(t *testing.T) {
	m, err := Open(context.Background(), twoShardDir(t))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	for _, mapOut := range []bool{true, false} {
		for _, src := range []safetensors.Source{m, hidden{m}} {
			_, fileBacked := src.(FileBacked)
			t.Run(fmt.Sprintf("map-output=%v/file-backed=%v", mapOut, fileBacked), func(t *testing.T) {
				defer func(old bool) { mapOutput = old }(mapOutput)
				mapOutput = mapOut
				path := filepath.Join(t.TempDir(), "x.safetensors")
				f, err := os.Create(path)
				if err != nil {
					t.Fatal(err)
				}
				defer f.Close()
				c := &copier{ctx: context.Background(), src: src}
				h, _, err := c.writeFile(f, path, src.Names(), src.Meta(), false, true)
				if err != nil {
					t.Fatal(err)
				}
				if err := c.verify(f, path, h); err != nil {
					t.Fatalf("untouched file: %v", err)
				}
				// b.weight is 9 bytes from data byte 8 (a.weight is 8).
				tamper := func(off int64, b byte) {
					t.Helper()
					if _, err := f.WriteAt([]byte{b}, off); err != nil {
						t.Fatal(err)
					}
				}
				orig := make([]byte, 1)
				f.ReadAt(orig, h.DataOffset()+10)
				tamper(h.DataOffset()+10, orig[0]^0x01)
				if err := c.verify(f, path, h); !errors.Is(err, ErrVerify) || !strings.Contains(err.Error(), `"b.weight" differs from its source at byte 2 `) {
					t.Errorf("tampered tensor byte: %v", err)
				}
				tamper(h.DataOffset()+10, orig[0])
				if err := c.verify(f, path, h); err != nil {
					t.Fatalf("restored file: %v", err)
				}
				f.ReadAt(orig, 9)
				tamper(9, orig[0]^0x20) // inside the header's JSON
				if err := c.verify(f, path, h); !errors.Is(err, ErrVerify) {
					t.Errorf("tampered header: %v", err)
				}
				tamper(9, orig[0])
				tamper(h.FileSize(), 0) // one byte too many
				if err := c.verify(f, path, h); !errors.Is(err, ErrVerify) {
					t.Errorf("longer file: %v", err)
				}
				f.Truncate(h.FileSize() - 1)
				if err := c.verify(f, path, h); !errors.Is(err, ErrVerify) {
					t.Errorf("shorter file: %v", err)
				}
			})
		}
	}
}

// The checker that runs while a file is written catches a byte changed
// right after it was written, before the rest of the file is.
func TestVerifyWhileWriting(t *testing.T) {
	m, err := Open(context.Background(), twoShardDir(t))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	for _, src := range []safetensors.Source{m, hidden{m}} {
		for _, off := range []int64{0, 8, 16, 24} { // first, middle and last bytes of the data (25)
			path := filepath.Join(t.TempDir(), "x.safetensors")
			f, err := os.Create(path)
			if err != nil {
				t.Fatal(err)
			}
			c := &copier{ctx: context.Background(), src: src, opt: writeOptions{verify: true}}
			var dataStart int64 = -1
			c.afterWrite = func(written int64) {
				switch at := dataStart + off; {
				case dataStart == -1:
					dataStart = written // the header is written first
				case dataStart >= 0 && written > at:
					b := []byte{0}
					f.ReadAt(b, at)
					b[0] ^= 0x80
					f.WriteAt(b, at)
					dataStart = -2 // once
				}
			}
			// The checker may find the change while the copy goes on (which
			// then stops with it) or once it is done.
			_, ck, err := c.writeFile(f, path, src.Names(), src.Meta(), true, true)
			if err == nil {
				err = ck.finish()
			}
			if !errors.Is(err, ErrVerify) || !strings.Contains(err.Error(), "differs from its source") {
				t.Errorf("byte %d of the data changed: %v", off, err)
			}
			f.Close()
		}
	}
}

// Once the checker has found a difference, the copy stops at its next
// chunk instead of copying the rest of the file.
func TestVerifyFailureStopsTheCopy(t *testing.T) {
	m, err := Open(context.Background(), twoShardDir(t))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	path := filepath.Join(t.TempDir(), "x.safetensors")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	c := &copier{ctx: context.Background(), src: hidden{m}, opt: writeOptions{verify: true}} // one write per tensor
	writes := 0
	c.afterWrite = func(written int64) {
		writes++
		switch writes {
		case 2: // the first tensor (a.weight): change its last byte
			b := []byte{0}
			f.ReadAt(b, written-1)
			b[0] ^= 1
			f.WriteAt(b, written-1)
		case 3: // let the checker see it before the third tensor
			for deadline := time.Now().Add(5 * time.Second); c.check.failure() == nil && time.Now().Before(deadline); {
				time.Sleep(time.Millisecond)
			}
		}
	}
	_, ck, err := c.writeFile(f, path, m.Names(), m.Meta(), true, true)
	if !errors.Is(err, ErrVerify) || ck != nil || writes != 3 {
		t.Errorf("got %v after %d writes", err, writes)
	}
}

// Merging into a FIFO (or a device) writes into it directly; what went
// there cannot be read back, so it is not verified, and that is no error.
func TestMergeIntoFIFO(t *testing.T) {
	// Tensors of some MiB, written through a buffer one by one (hidden):
	// were a checker reading the FIFO back, it would fail on the first
	// while the others are still being written, and stop the merge.
	in := filepath.Join(t.TempDir(), "in.safetensors")
	if err := safetensors.WriteFile(in, tensorsOf([]string{"a", "b", "c"}, []int{5 << 20, 5 << 20, 5 << 20}), nil); err != nil {
		t.Fatal(err)
	}
	m, err := Open(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	src := hidden{m}
	fifo := filepath.Join(t.TempDir(), "out.safetensors")
	if err := mkfifo(fifo); err != nil {
		t.Skip(err)
	}
	got := make(chan []byte, 1)
	go func() {
		f, err := os.Open(fifo)
		if err != nil {
			got <- nil
			return
		}
		defer f.Close()
		b, _ := io.ReadAll(f)
		got <- b
	}()
	if _, err := Merge(context.Background(), src, fifo, WithOverwrite(true)); err != nil {
		t.Fatal(err)
	}
	if b := <-got; !bytes.Equal(b, canonical(t, src)) {
		t.Errorf("the FIFO received %d bytes, not the merged file", len(b))
	}
}

// Reading a mapping past the end of a file that shrank after it was
// mapped is an error from firstDiff, not a crash (SIGBUS).
func TestFirstDiffSurvivesTruncation(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f")
	data := bytes.Repeat([]byte{7}, 3*os.Getpagesize())
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	mm, err := mmap.Map(f, 0)
	if err != nil {
		t.Skip("no mappings here:", err)
	}
	defer mmap.Unmap(mm)
	if at, err := firstDiff(mm, data); at != -1 || err != nil {
		t.Fatalf("same bytes: %d, %v", at, err)
	}
	data[len(data)-1] = 8
	if at, err := firstDiff(mm, data); at != len(data)-1 || err != nil {
		t.Fatalf("last byte differs: %d, %v", at, err)
	}
	if err := os.Truncate(path, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := firstDiff(mm, data); err == nil || !strings.Contains(err.Error(), "fault") {
		t.Fatalf("truncated: %v", err)
	}
}

func TestMergeRefusesExisting(t *testing.T) {
	src, err := Open(context.Background(), twoShardDir(t))
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	out := filepath.Join(t.TempDir(), "m.safetensors")
	os.WriteFile(out, []byte("keep"), 0o644)
	if _, err := Merge(context.Background(), src, out); !errors.Is(err, ErrExists) {
		t.Errorf("got %v", err)
	}
	if b, _ := os.ReadFile(out); string(b) != "keep" {
		t.Error("existing file changed")
	}
	if _, err := Merge(context.Background(), src, out, WithOverwrite(true), WithVerify(false)); err != nil {
		t.Error(err)
	}
	for _, bad := range []WriteOption{WithMaxShardSize(0), WithMaxShardSize(-5)} {
		if _, err := Merge(context.Background(), src, out, bad); !errors.Is(err, ErrOption) {
			t.Errorf("bad option: %v", err)
		}
	}
}

// A Model over local files says where each tensor's bytes are, and they
// are the tensor's bytes.
func TestModelTensorFile(t *testing.T) {
	m, err := Open(context.Background(), twoShardDir(t))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	var fb FileBacked = m
	for _, n := range m.Names() {
		f, off, ok := fb.TensorFile(n)
		if !ok {
			t.Fatalf("%s: not file-backed", n)
		}
		tn, _ := m.Tensor(n)
		want, _ := tn.Copy()
		got := make([]byte, len(want))
		if _, err := f.ReadAt(got, off); err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s: bytes at %d are %v, want %v (%v)", n, off, got, want, err)
		}
	}
	if _, _, ok := fb.TensorFile("nope"); ok {
		t.Error("missing tensor is file-backed")
	}
}

// Re-splitting over an existing split: at every point where a crash could
// stop the renames, the directory must not load as a mix of old and new
// tensors (the old index over new and old shards would load without an
// error, since the shard and tensor names are the same). Afterwards it
// holds the new model.
func TestSplitOverwriteNeverMixes(t *testing.T) {
	dir := t.TempDir()
	write := func(seed byte) {
		t.Helper()
		td := tensorsOf([]string{"a", "b", "c"}, []int{40, 40, 40})
		for _, x := range td {
			x.Data[0] = seed
		}
		in := filepath.Join(t.TempDir(), "in.safetensors")
		if err := safetensors.WriteFile(in, td, nil); err != nil {
			t.Fatal(err)
		}
		src, err := Open(context.Background(), in)
		if err != nil {
			t.Fatal(err)
		}
		defer src.Close()
		if _, err := Split(context.Background(), src, dir, WithMaxShardSize(50), WithOverwrite(true)); err != nil {
			t.Fatal(err)
		}
	}
	write(1)
	var states []string
	beforeCommit = func(path string) {
		m, err := Open(context.Background(), dir)
		if err != nil {
			return // refused: fine
		}
		defer m.Close()
		seeds := map[byte]bool{}
		for _, n := range m.Names() {
			tn, _ := m.Tensor(n)
			b, _ := tn.Copy()
			seeds[b[0]] = true
		}
		if len(seeds) != 1 {
			states = append(states, "old and new tensors load together before renaming "+filepath.Base(path))
		}
	}
	defer func() { beforeCommit = nil }()
	write(2)
	if len(states) != 0 {
		t.Errorf("mid-rename states that load: %q", states)
	}
	m, err := Open(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	for _, n := range m.Names() {
		tn, _ := m.Tensor(n)
		if b, _ := tn.Copy(); b[0] != 2 {
			t.Errorf("%s: old data after the overwrite", n)
		}
	}
	if got := listDir(t, dir); len(got) != 4 {
		t.Errorf("directory holds %q", got)
	}
}

// An output that is a file the source reads (a shard, the index, the
// single input file) is refused even with overwriting: renaming over it
// would leave the model broken (red-team round 4).
func TestOutputIsInputRefused(t *testing.T) {
	ctx := context.Background()
	dir := twoShardDir(t)
	m, err := Open(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	shards := m.Shards()
	for _, out := range []string{filepath.Join(dir, shards[0].Name), filepath.Join(dir, shards[1].Name), filepath.Join(dir, IndexName)} {
		before, _ := os.ReadFile(out)
		if _, err := Merge(ctx, m, out, WithOverwrite(true)); !errors.Is(err, ErrOutputIsInput) {
			t.Errorf("merge into %s: %v, want ErrOutputIsInput", filepath.Base(out), err)
		}
		if after, _ := os.ReadFile(out); !bytes.Equal(before, after) {
			t.Errorf("%s changed", out)
		}
	}
	if _, err := Split(ctx, m, dir, WithOverwrite(true), WithMaxShardSize(1)); !errors.Is(err, ErrOutputIsInput) {
		t.Errorf("split into the model's own directory: %v, want ErrOutputIsInput", err)
	}
	// a single file split into its own directory as one shard
	single := filepath.Join(t.TempDir(), SingleName)
	if _, err := Merge(ctx, m, single); err != nil {
		t.Fatal(err)
	}
	sm, err := Open(ctx, single)
	if err != nil {
		t.Fatal(err)
	}
	defer sm.Close()
	if _, err := Split(ctx, sm, filepath.Dir(single), WithOverwrite(true)); !errors.Is(err, ErrOutputIsInput) {
		t.Errorf("split of %s onto itself: %v, want ErrOutputIsInput", single, err)
	}
}
