package sharded

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gosafetensors/safetensors"
)

func TestOpenShardedModel(t *testing.T) {
	dir := twoShardDir(t)
	for _, loc := range []string{dir, filepath.Join(dir, IndexName)} {
		m, err := Open(context.Background(), loc)
		if err != nil {
			t.Fatal(err)
		}
		if got := m.Names(); !slices.Equal(got, []string{"a.weight", "b.weight", "c.weight"}) {
			t.Errorf("Names %q", got)
		}
		if s, _ := m.ShardOf("c.weight"); s != "model-00002-of-00002.safetensors" {
			t.Errorf("ShardOf c.weight = %q", s)
		}
		if info, ok := m.Info("b.weight"); !ok || info.Size() != 9 {
			t.Errorf("Info b.weight = %+v", info)
		}
		tn, err := m.Tensor("c.weight")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := tn.Copy()
		want := tensorsOf([]string{"c.weight"}, []int{8})[0].Data
		if !slices.Equal(b, want) {
			t.Errorf("c.weight bytes %v, want %v", b, want)
		}
		var order []string
		for tn, err := range m.All() {
			if err != nil {
				t.Fatal(err)
			}
			order = append(order, tn.Name)
		}
		if !slices.Equal(order, []string{"a.weight", "b.weight", "c.weight"}) {
			t.Errorf("All order %q", order)
		}
		sh := m.Shards()
		if len(sh) != 2 || sh[0].Tensors != 2 || sh[0].Bytes != 17 || sh[1].Parameters != 8 {
			t.Errorf("Shards %+v", sh)
		}
		if m.Meta()["format"] != "pt" || len(m.Warnings()) != 1 { // total_size 0 is wrong
			t.Errorf("Meta %v, warnings %q", m.Meta(), m.Warnings())
		}
		if _, err := m.Tensor("nope"); !errors.Is(err, safetensors.ErrTensorNotFound) {
			t.Errorf("missing tensor: %v", err)
		}
		if err := m.Close(); err != nil {
			t.Error(err)
		}
		if _, err := m.Tensor("a.weight"); !errors.Is(err, safetensors.ErrClosed) {
			t.Errorf("after Close: %v", err)
		}
	}
}

func TestOpenSingleFile(t *testing.T) {
	dir := t.TempDir()
	writeShard(t, filepath.Join(dir, SingleName), nil, "x", "y")
	for _, loc := range []string{dir, filepath.Join(dir, SingleName)} {
		m, err := Open(context.Background(), loc)
		if err != nil {
			t.Fatal(err)
		}
		if m.Index() != nil || len(m.Names()) != 2 || m.Meta() == nil {
			t.Errorf("single: index %v names %v meta %v", m.Index(), m.Names(), m.Meta())
		}
		m.Close()
	}
}

// Each attack is refused with an error naming the index and the shard (and
// the tensor where one is concerned).
func TestIndexAttacks(t *testing.T) {
	const s1, s2 = "model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"
	cases := []struct {
		name     string
		setup    func(t *testing.T, dir string)
		sentinel error
		want     []string
	}{
		{"dotdot", func(t *testing.T, dir string) {
			writeShard(t, filepath.Join(filepath.Dir(dir), "x.safetensors"), nil, "a")
			writeIndexJSON(t, filepath.Join(dir, IndexName), map[string]string{"a": "../x.safetensors"})
		}, ErrUnsafeName, []string{IndexName, `"../x.safetensors"`}},
		{"absolute", func(t *testing.T, dir string) {
			writeIndexJSON(t, filepath.Join(dir, IndexName), map[string]string{"a": "/etc/passwd"})
		}, ErrUnsafeName, []string{IndexName, `"/etc/passwd"`}},
		{"url", func(t *testing.T, dir string) {
			writeIndexJSON(t, filepath.Join(dir, IndexName), map[string]string{"a": "http://127.0.0.1:1/x"})
		}, ErrUnsafeName, []string{"URL"}},
		{"symlink out of the directory", func(t *testing.T, dir string) {
			outside := filepath.Join(filepath.Dir(dir), "outside.safetensors")
			writeShard(t, outside, nil, "a")
			if err := os.Symlink(outside, filepath.Join(dir, s1)); err != nil {
				t.Skip(err)
			}
			writeIndexJSON(t, filepath.Join(dir, IndexName), map[string]string{"a": s1})
		}, ErrUnsafeName, []string{IndexName, s1, "outside"}},
		{"relative symlink out of the directory", func(t *testing.T, dir string) {
			writeShard(t, filepath.Join(filepath.Dir(dir), "outside.safetensors"), nil, "a")
			if err := os.Symlink("../outside.safetensors", filepath.Join(dir, s1)); err != nil {
				t.Skip(err)
			}
			writeIndexJSON(t, filepath.Join(dir, IndexName), map[string]string{"a": s1})
		}, ErrUnsafeName, []string{IndexName, s1, "outside"}},
		{"tensor in two shards", func(t *testing.T, dir string) {
			writeShard(t, filepath.Join(dir, s1), nil, "a", "b")
			writeShard(t, filepath.Join(dir, s2), nil, "b")
			writeIndexJSON(t, filepath.Join(dir, IndexName), map[string]string{"a": s1, "b": s2})
		}, ErrMismatch, []string{IndexName, "shard " + s2, `tensor "b"`, "also in shard " + s1}},
		{"weight_map names a missing tensor", func(t *testing.T, dir string) {
			writeShard(t, filepath.Join(dir, s1), nil, "a")
			writeShard(t, filepath.Join(dir, s2), nil, "b")
			writeIndexJSON(t, filepath.Join(dir, IndexName), map[string]string{"a": s1, "b": s2, "ghost": s2})
		}, ErrMismatch, []string{IndexName, "shard " + s2, `tensor "ghost"`, "not in the shard"}},
		{"tensor in the wrong shard", func(t *testing.T, dir string) {
			writeShard(t, filepath.Join(dir, s1), nil, "a")
			writeShard(t, filepath.Join(dir, s2), nil, "b")
			writeIndexJSON(t, filepath.Join(dir, IndexName), map[string]string{"a": s2, "b": s1})
		}, ErrMismatch, []string{IndexName, "shard " + s1, `tensor "a"`, "weight_map says " + s2}},
		{"shard tensor missing from the weight_map", func(t *testing.T, dir string) {
			writeShard(t, filepath.Join(dir, s1), nil, "a", "stowaway")
			writeShard(t, filepath.Join(dir, s2), nil, "b")
			writeIndexJSON(t, filepath.Join(dir, IndexName), map[string]string{"a": s1, "b": s2})
		}, ErrMismatch, []string{IndexName, "shard " + s1, `tensor "stowaway"`, "not in the weight_map"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "model")
			if err := os.Mkdir(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			c.setup(t, dir)
			m, err := Open(context.Background(), dir)
			if err == nil {
				m.Close()
				t.Fatal("accepted")
			}
			t.Log(err)
			if !errors.Is(err, c.sentinel) {
				t.Errorf("error %v is not %v", err, c.sentinel)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %s", err, w)
				}
			}
		})
	}
}

// A bad name anywhere in the index stops everything before any shard is
// opened.
func TestUnsafeNamesRefusedBeforeOpening(t *testing.T) {
	dir := twoShardDir(t)
	d, err := NewDirOpener(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	op := &countingOpener{d: d}
	idx, err := ReadIndex(filepath.Join(dir, IndexName))
	if err != nil {
		t.Fatal(err)
	}
	idx.WeightMap["evil"] = "../../etc/passwd"
	if _, err := OpenIndex(context.Background(), idx, "idx", op); !errors.Is(err, ErrUnsafeName) {
		t.Errorf("got %v", err)
	}
	if n := op.calls.Load(); n != 0 {
		t.Errorf("%d shards were opened before the name was refused", n)
	}
}

func TestMissingShardIsIOError(t *testing.T) {
	dir := twoShardDir(t)
	os.Remove(filepath.Join(dir, "model-00002-of-00002.safetensors"))
	_, err := Open(context.Background(), dir)
	var ie *IndexError
	if !errors.Is(err, fs.ErrNotExist) || errors.As(err, &ie) {
		t.Errorf("got %v, want a not-exist I/O error", err)
	}
	if err == nil || !strings.Contains(err.Error(), "model-00002-of-00002.safetensors") {
		t.Errorf("error does not name the shard: %v", err)
	}
}

// Hugging Face's cache stores files in blobs/ and links them from
// snapshots/REV/: those links stay inside the repository folder and are
// followed; one leading out of it is not.
func TestHubCacheLayout(t *testing.T) {
	repo := filepath.Join(t.TempDir(), "models--org--name")
	blobs, snap := filepath.Join(repo, "blobs"), filepath.Join(repo, "snapshots", "0123abcd")
	for _, d := range []string{blobs, snap} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	src := twoShardDir(t)
	for i, n := range []string{IndexName, "model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"} {
		b, _ := os.ReadFile(filepath.Join(src, n))
		blob := filepath.Join(blobs, "sha"+string(rune('0'+i)))
		os.WriteFile(blob, b, 0o644)
		if err := os.Symlink(filepath.Join("..", "..", "blobs", filepath.Base(blob)), filepath.Join(snap, n)); err != nil {
			t.Skip(err)
		}
	}
	m, err := Open(context.Background(), snap)
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Names()) != 3 {
		t.Errorf("names %v", m.Names())
	}
	m.Close()

	outside := filepath.Join(filepath.Dir(repo), "elsewhere.safetensors")
	os.Rename(filepath.Join(blobs, "sha2"), outside)
	os.Remove(filepath.Join(snap, "model-00002-of-00002.safetensors"))
	os.Symlink(filepath.Join("..", "..", "..", "elsewhere.safetensors"), filepath.Join(snap, "model-00002-of-00002.safetensors"))
	if _, err := Open(context.Background(), snap); !errors.Is(err, ErrUnsafeName) {
		t.Errorf("link out of the cache repository: %v", err)
	}
}

func TestMetadataDisagreementIsWarned(t *testing.T) {
	dir := twoShardDir(t)
	writeShard(t, filepath.Join(dir, "model-00002-of-00002.safetensors"), map[string]string{"format": "tf", "extra": "1"}, "c.weight")
	m, err := Open(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if len(m.Meta()) != 0 {
		t.Errorf("Meta kept a disputed key: %v", m.Meta())
	}
	w := strings.Join(m.Warnings(), "\n")
	for _, want := range []string{`"format"`, `model-00002-of-00002.safetensors="tf"`, `"extra"`, "model-00001-of-00002.safetensors has none"} {
		if !strings.Contains(w, want) {
			t.Errorf("warnings %q lack %s", w, want)
		}
	}
}

// A read error injected through the Opener reaches the caller as that
// error: when the header cannot be read, and when tensor data cannot.
func TestInjectedReadErrors(t *testing.T) {
	dir := twoShardDir(t)
	idx, err := ReadIndex(filepath.Join(dir, IndexName))
	if err != nil {
		t.Fatal(err)
	}
	const bad = "model-00002-of-00002.safetensors"
	_, err = OpenIndex(context.Background(), idx, "idx", failingOpener(dir, bad, 0))
	var fe *safetensors.FormatError
	var ie *IndexError
	if !errors.Is(err, errInjected) || errors.As(err, &fe) || errors.As(err, &ie) {
		t.Fatalf("header read error: got %v", err)
	}
	if !strings.Contains(err.Error(), bad) {
		t.Errorf("error does not name the shard: %v", err)
	}

	st, _ := os.Stat(filepath.Join(dir, bad))
	m, err := OpenIndex(context.Background(), idx, "idx", failingOpener(dir, bad, st.Size()-3))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	out := filepath.Join(t.TempDir(), "merged.safetensors")
	_, err = Merge(context.Background(), m, out)
	if !errors.Is(err, errInjected) || errors.As(err, &fe) || errors.As(err, &ie) {
		t.Fatalf("data read error: got %v", err)
	}
	if !strings.Contains(err.Error(), `"c.weight"`) {
		t.Errorf("error does not name the tensor: %v", err)
	}
	if got := listDir(t, filepath.Dir(out)); len(got) != 0 {
		t.Errorf("left behind: %v", got)
	}
	// a failed split leaves not even the directory it created
	outDir := filepath.Join(t.TempDir(), "new", "shards")
	if _, err := Split(context.Background(), m, outDir, WithMaxShardSize(1)); !errors.Is(err, errInjected) {
		t.Fatalf("split: %v", err)
	}
	if _, err := os.Stat(filepath.Dir(outDir)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a failed split left %s: %v", filepath.Dir(outDir), err)
	}
}

func TestOpenOptions(t *testing.T) {
	if _, err := Open(context.Background(), twoShardDir(t), WithConcurrency(0)); !errors.Is(err, ErrOption) {
		t.Errorf("concurrency 0: %v", err)
	}
	m, err := Open(context.Background(), twoShardDir(t), WithConcurrency(1))
	if err != nil {
		t.Fatal(err)
	}
	m.Close()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Open(ctx, twoShardDir(t)); !errors.Is(err, context.Canceled) {
		t.Errorf("canceled: %v", err)
	}
}

func TestOpenDirChoices(t *testing.T) {
	empty := t.TempDir()
	if _, err := OpenDir(context.Background(), empty); !errors.Is(err, ErrNoModel) {
		t.Errorf("empty dir: %v", err)
	}
	two := t.TempDir()
	writeShard(t, filepath.Join(two, "a.safetensors"), nil, "x")
	writeShard(t, filepath.Join(two, "b.safetensors"), nil, "y")
	if _, err := OpenDir(context.Background(), two); !errors.Is(err, ErrNoModel) || !strings.Contains(err.Error(), "name one") {
		t.Errorf("two files: %v", err)
	}
	one := t.TempDir()
	writeShard(t, filepath.Join(one, "weights.safetensors"), nil, "x")
	m, err := OpenDir(context.Background(), one)
	if err != nil {
		t.Fatal(err)
	}
	m.Close()
}

// Open tells an index from a safetensors file by content when the name
// does not say: an unpadded header of 123 bytes makes a safetensors file
// start with '{' too.
func TestOpenSniffsContent(t *testing.T) {
	dir := t.TempDir()
	hdr := []byte(`{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}`)
	hdr = append(hdr, bytes.Repeat([]byte(" "), 123-len(hdr))...)
	file := append([]byte{123, 0, 0, 0, 0, 0, 0, 0}, hdr...)
	file = append(file, 42)
	weights := filepath.Join(dir, "weights.bin")
	os.WriteFile(weights, file, 0o644)
	m, err := Open(context.Background(), weights)
	if err != nil {
		t.Fatal(err)
	}
	if m.Index() != nil || len(m.Names()) != 1 {
		t.Errorf("read as %v / %v", m.Index(), m.Names())
	}
	m.Close()

	src := twoShardDir(t)
	b, _ := os.ReadFile(filepath.Join(src, IndexName))
	renamed := filepath.Join(src, "index.txt")
	os.WriteFile(renamed, b, 0o644)
	m, err = Open(context.Background(), renamed)
	if err != nil {
		t.Fatal(err)
	}
	if m.Index() == nil || len(m.Shards()) != 2 {
		t.Errorf("index not recognized: %v", m.Shards())
	}
	m.Close()
}

func TestMaxShards(t *testing.T) {
	dir := twoShardDir(t)
	if _, err := Open(context.Background(), dir, WithMaxShards(1)); !errors.Is(err, ErrInvalidIndex) || !strings.Contains(err.Error(), "2 shards") {
		t.Errorf("got %v", err)
	}
	if _, err := Open(context.Background(), dir, WithMaxShards(0)); !errors.Is(err, ErrOption) {
		t.Errorf("got %v", err)
	}
}

// A shard that is a FIFO or a directory is refused without blocking.
func TestShardNotARegularFile(t *testing.T) {
	dir := twoShardDir(t)
	fifo := filepath.Join(dir, "model-00002-of-00002.safetensors")
	os.Remove(fifo)
	if err := mkfifo(fifo); err != nil {
		t.Skip(err)
	}
	if _, err := Open(context.Background(), dir); !errors.Is(err, ErrUnsafeName) || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("FIFO shard: %v", err)
	}
	if _, err := Open(context.Background(), fifo); !errors.Is(err, ErrNoModel) {
		t.Errorf("FIFO given directly: %v", err)
	}
	os.Remove(fifo)
	os.Mkdir(fifo, 0o755)
	if _, err := Open(context.Background(), dir); !errors.Is(err, ErrUnsafeName) {
		t.Errorf("directory shard: %v", err)
	}
}
