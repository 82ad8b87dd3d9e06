package source

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gosafetensors/safetensors"
	"github.com/gosafetensors/safetensors/remote"
)

const shardedBin = "../testdata/torch/sharded_bin"

type expectedTensor struct {
	DType  string  `json:"dtype"`
	Shape  []int64 `json:"shape"`
	SHA256 string  `json:"sha256"`
}

// copyDir copies the regular files of src into a new temporary directory.
func copyDir(t *testing.T, src string, skip ...string) string {
	t.Helper()
	dst := t.TempDir()
	ents, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if slices.Contains(skip, e.Name()) {
			continue
		}
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, e.Name()), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dst
}

// checkShardedBin checks a model opened from the sharded checkpoint
// written by transformers-style torch.save (testdata/torch/sharded_bin):
// every name but one of the tied pair transformer.wte.weight and
// lm_head.weight, which converting writes once (convert.py's rule keeps
// the bytewise smaller, lm_head.weight), each tensor's bytes as torch
// computed them.
func checkShardedBin(t *testing.T, loc string, m *Model) {
	t.Helper()
	var want map[string]expectedTensor
	b, err := os.ReadFile(filepath.Join(shardedBin, "expected.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &want); err != nil {
		t.Fatal(err)
	}
	if m.Sharded == nil || len(m.Sharded.Shards()) != 5 {
		t.Fatalf("%s: not read as a sharded model of 5 shards: %+v", loc, m)
	}
	names := m.Names()
	if len(names) != len(want)-1 || slices.Contains(names, "transformer.wte.weight") || !slices.Contains(names, "lm_head.weight") {
		t.Fatalf("%s: %d names %q, want every name of %d but the tied alias transformer.wte.weight", loc, len(names), names, len(want))
	}
	if kept := m.Meta()["transformer.wte.weight"]; kept != "lm_head.weight" {
		t.Errorf("%s: __metadata__ records transformer.wte.weight -> %q, want lm_head.weight", loc, kept)
	}
	for _, n := range names {
		tn, err := m.Tensor(n)
		if err != nil {
			t.Fatalf("%s: %s: %v", loc, n, err)
		}
		data, err := tn.Copy()
		if err != nil {
			t.Fatalf("%s: %s: %v", loc, n, err)
		}
		sum := sha256.Sum256(data)
		w := want[n]
		if tn.DType.String() != w.DType || !slices.Equal(tn.Shape, w.Shape) || hex.EncodeToString(sum[:]) != w.SHA256 {
			t.Errorf("%s: %s is %s %v sha256 %x, torch says %s %v %s", loc, n, tn.DType, tn.Shape, sum, w.DType, w.Shape, w.SHA256)
		}
	}
	// The index listed the alias and counted it twice in total_size: the
	// model read is the one converting writes, and says how it differs.
	warned := false
	for _, w := range m.Warnings() {
		warned = warned || strings.Contains(w, "wte.weight")
	}
	if warned {
		t.Errorf("%s: the dropped alias is warned about: %q", loc, m.Warnings())
	}
}

// A sharded PyTorch checkpoint (pytorch_model-0000N-of-0000M.bin and
// pytorch_model.bin.index.json) opens as one model from its directory, its
// index, over HTTP and from the Hub, read as converting it would write.
func TestShardedCheckpoint(t *testing.T) {
	dir := copyDir(t, shardedBin, "make.py", "expected.json")
	for _, loc := range []string{dir, filepath.Join(dir, CheckpointIndex)} {
		m, err := OpenModel(ctx, loc)
		if err != nil {
			t.Fatalf("%s: %v", loc, err)
		}
		checkShardedBin(t, loc, m)
		m.Close()
	}

	srv := serveDir(t, dir)
	loc := srv.URL + "/" + CheckpointIndex
	m, err := OpenModel(ctx, loc)
	if err != nil {
		t.Fatalf("%s: %v", loc, err)
	}
	checkShardedBin(t, loc, m)
	m.Close()

	hub := serveHub(t, dir)
	h, err := remote.NewHub(remote.WithEndpoint(hub.URL), remote.WithToken(""))
	if err != nil {
		t.Fatal(err)
	}
	m, err = OpenModel(ctx, "hf://org/model", WithHub(h))
	if err != nil {
		t.Fatalf("hf://org/model: %v", err)
	}
	checkShardedBin(t, "hf://org/model", m)
	m.Close()
	if n := hub.APIRequests(); n != 1 {
		t.Errorf("the Hub's file list was asked %d times, want once", n)
	}
}

// A repository or directory with only pytorch_model.bin opens it; with
// both a checkpoint and safetensors, safetensors wins, as in transformers.
func TestCheckpointOnlyAndPreference(t *testing.T) {
	only := t.TempDir()
	copyFile(t, "../testdata/torch/tiny_transformer.bin", filepath.Join(only, CheckpointFile))
	copyFile(t, "../testdata/malicious/raw_pickle_os_system.bin", filepath.Join(only, "training_args.bin"))
	both := copyDir(t, only)
	copyFile(t, "../testdata/torch/tiny_transformer.safetensors", filepath.Join(both, SafetensorsFile))

	h := serveHub(t, only)
	hub, err := remote.NewHub(remote.WithEndpoint(h.URL), remote.WithToken(""))
	if err != nil {
		t.Fatal(err)
	}
	hb := serveHub(t, both)
	hubBoth, err := remote.NewHub(remote.WithEndpoint(hb.URL), remote.WithToken(""))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		loc        string
		opts       []Option
		checkpoint bool
	}{
		{only, nil, true},
		{"hf://org/model", []Option{WithHub(hub)}, true},
		{both, nil, false},
		{"hf://org/model", []Option{WithHub(hubBoth)}, false},
	} {
		m, err := OpenModel(ctx, c.loc, c.opts...)
		if err != nil {
			t.Fatalf("%s: %v", c.loc, err)
		}
		if (m.Checkpoint != nil) != c.checkpoint || (m.File != nil) == c.checkpoint || len(m.Names()) == 0 {
			t.Errorf("%s: checkpoint %v, file %v: want checkpoint %v", c.loc, m.Checkpoint != nil, m.File != nil, c.checkpoint)
		}
		m.Close()
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestPickModel(t *testing.T) {
	for _, c := range []struct {
		names []string
		want  string // "" for ErrNoModel
	}{
		{[]string{"config.json", CheckpointFile, SafetensorsFile}, SafetensorsFile},
		{[]string{SafetensorsIndex, SafetensorsFile}, SafetensorsFile},
		{[]string{CheckpointIndex, SafetensorsIndex, "model-00001-of-00002.safetensors"}, SafetensorsIndex},
		{[]string{CheckpointIndex, CheckpointFile}, CheckpointFile},
		{[]string{CheckpointIndex, "pytorch_model-00001-of-00002.bin"}, CheckpointIndex},
		{[]string{"adapter_model.safetensors", "README.md"}, "adapter_model.safetensors"},
		{[]string{"a.safetensors", "b.safetensors"}, ""},
		{[]string{"x.pt.index.json", "x-1.pt"}, "x.pt.index.json"},
		{[]string{"training_args.bin", "optimizer.pt", "rng_state_0.pth", "weights.ckpt"}, "weights.ckpt"},
		{[]string{"training_args.bin", "optimizer.pt"}, ""},
		{[]string{".model.safetensors.swp", "config.json"}, ""},
		{nil, ""},
	} {
		got, err := PickModel("here", c.names)
		switch {
		case c.want == "" && !errors.Is(err, ErrNoModel):
			t.Errorf("%q: %q, %v; want ErrNoModel", c.names, got, err)
		case c.want != "" && (err != nil || got != c.want):
			t.Errorf("%q: %q, %v; want %q", c.names, got, err, c.want)
		}
	}
}

// A folder with no model, locally or on the Hub, is ErrNoModel: nothing
// was read that could be wrong.
func TestNoModel(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "config.json"), []byte("{}"), 0o644)
	if _, err := OpenModel(ctx, dir); !errors.Is(err, ErrNoModel) {
		t.Fatalf("empty directory: %v", err)
	}
	h := serveHub(t, dir)
	hub, _ := remote.NewHub(remote.WithEndpoint(h.URL), remote.WithToken(""))
	if _, err := OpenModel(context.Background(), "hf://org/model", WithHub(hub)); !errors.Is(err, ErrNoModel) || !strings.Contains(err.Error(), "org/model") {
		t.Fatalf("empty repository: %v", err)
	}
}

// Shards are opened by content whatever their names; an index among the
// shards is not a shard.
func TestShardMustBeTensors(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "inner.json"), []byte(`{"weight_map":{"a":"x.safetensors"}}`), 0o644)
	os.WriteFile(filepath.Join(dir, "outer.json"), []byte(`{"weight_map":{"a":"inner.json"}}`), 0o644)
	_, err := OpenModel(ctx, filepath.Join(dir, "outer.json"))
	var ce *ContentError
	if !errors.As(err, &ce) || IsIOError(err) || !strings.Contains(err.Error(), "inner.json") {
		t.Fatalf("an index naming an index: %v", err)
	}
	_ = safetensors.ErrTensorNotFound
}

// A checkpoint named .safetensors is read by its content, and the model
// warns that the name is wrong; names that agree, or say nothing, do not.
func TestNameMismatch(t *testing.T) {
	dir := t.TempDir()
	lie := filepath.Join(dir, "model.safetensors")
	copyFile(t, "../testdata/torch/tiny_transformer.bin", lie)
	m, err := OpenModel(ctx, lie)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if w := m.Warnings(); len(w) != 1 || !strings.Contains(w[0], "the name says safetensors, but this is a PyTorch checkpoint (zip)") {
		t.Errorf("warnings %q", w)
	}
	for _, c := range []struct {
		loc  string
		f    Format
		want bool
	}{
		{"x.safetensors", TorchPickle, true},
		{"https://h/x.safetensors?download=1", TorchZip, true},
		{"x.safetensors", Index, true},
		{"pytorch_model.bin", Safetensors, true},
		{"pytorch_model.bin", TorchZip, false},
		{"x.safetensors", Safetensors, false},
		{"model", TorchZip, false},
		{"hf://org/repo", TorchZip, false},
	} {
		if got := NameMismatch(c.loc, c.f) != ""; got != c.want {
			t.Errorf("NameMismatch(%q, %v) = %v", c.loc, c.f, got)
		}
	}
}

// A Hub folder (hf://ORG/REPO/FOLDER, or WithSubfolder) is chosen from the
// files directly in it.
func TestHubFolder(t *testing.T) {
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "sub", "deeper"), 0o755)
	copyFile(t, "../testdata/torch/tiny_transformer.bin", filepath.Join(dir, "sub", CheckpointFile))
	copyFile(t, "../testdata/torch/tiny_transformer.safetensors", filepath.Join(dir, "sub", "deeper", SafetensorsFile))
	copyFile(t, "../testdata/torch/tiny_transformer.safetensors", filepath.Join(dir, SafetensorsFile))
	h := serveHub(t, dir)
	hub, err := remote.NewHub(remote.WithEndpoint(h.URL), remote.WithToken(""))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		loc        string
		opts       []Option
		checkpoint bool
	}{
		{"hf://org/model", nil, false},
		{"hf://org/model/sub", nil, true},
		{"hf://org/model", []Option{WithSubfolder("sub")}, true},
		{"hf://org/model/sub/deeper", nil, false},
	} {
		m, err := OpenModel(ctx, c.loc, append(c.opts, WithHub(hub))...)
		if err != nil {
			t.Fatalf("%s: %v", c.loc, err)
		}
		if (m.Checkpoint != nil) != c.checkpoint {
			t.Errorf("%s %v: checkpoint %v, want %v", c.loc, c.opts, m.Checkpoint != nil, c.checkpoint)
		}
		m.Close()
	}
	if _, err := OpenModel(ctx, "hf://org/model/nothing", WithHub(hub)); !errors.Is(err, ErrNoModel) {
		t.Errorf("an empty folder: %v", err)
	}
}
