package download

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gosafetensors/safetensors"
	"github.com/gosafetensors/safetensors/internal/pacedserver"
)

// TestVerifyCache: a fresh download checks; a blob with one byte changed
// is a mismatch naming it and both digests, seen from the repository
// folder (by the blob's name) and from the snapshot (through the link).
func TestVerifyCache(t *testing.T) {
	h := newHubFixture(t, smallSpec(), pacedserver.Config{})
	cache := t.TempDir()
	res, err := Download(context.Background(), "hf://"+testRepo, WithHub(h.hub(t, 4)), WithCacheDir(cache))
	if err != nil {
		t.Fatal(err)
	}
	repo := filepath.Join(cache, "models--org--model")
	for _, loc := range []string{"hf://" + testRepo, repo, res.Dir} {
		rep, err := Verify(context.Background(), loc, WithCacheDir(cache))
		if err != nil {
			t.Fatal(err)
		}
		if !rep.OK() || len(rep.Indexes) != 1 || len(rep.Files) != len(h.files) {
			t.Fatalf("%s: problems %v, %d indexes, %d files", loc, rep.Problems, len(rep.Indexes), len(rep.Files))
		}
		for _, f := range rep.Files {
			if f.Status != "ok" {
				t.Fatalf("%s: %+v", loc, f)
			}
		}
	}
	var shard File
	for _, f := range res.Files {
		if f.Path == "model-00003-of-00003.safetensors" {
			shard = f
		}
	}
	blob := filepath.Join(repo, "blobs", shard.Digest.Hex)
	b, _ := os.ReadFile(blob)
	b[len(b)-3] ^= 1
	os.Chmod(blob, 0o644)
	if err := os.WriteFile(blob, b, 0o644); err != nil {
		t.Fatal(err)
	}
	for loc, name := range map[string]string{repo: "blobs/" + shard.Digest.Hex, res.Dir: shard.Path} {
		rep, err := Verify(context.Background(), loc)
		if err != nil {
			t.Fatal(err)
		}
		if len(rep.Problems) != 1 || !strings.Contains(rep.Problems[0], name+": sha256 mismatch: expected "+shard.Digest.Hex) {
			t.Fatalf("%s: problems %q", loc, rep.Problems)
		}
	}
	// A link that leads nowhere.
	os.Remove(blob)
	rep, err := Verify(context.Background(), res.Dir)
	if err != nil || rep.OK() || !strings.Contains(strings.Join(rep.Problems, "\n"), "which is missing") {
		t.Fatalf("dangling link: %q %v", rep.Problems, err)
	}
}

// TestVerifyIndex: an index is checked against its shards' headers, and a
// model in both formats for agreement.
func TestVerifyIndex(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, ts ...safetensors.TensorData) {
		if err := safetensors.WriteFile(filepath.Join(dir, name), ts, nil); err != nil {
			t.Fatal(err)
		}
	}
	f32 := func(name string, n int64) safetensors.TensorData {
		return safetensors.TensorData{Name: name, DType: safetensors.F32, Shape: []int64{n}, Data: make([]byte, 4*n)}
	}
	write("model-00001-of-00002.safetensors", f32("a", 2))
	write("model-00002-of-00002.safetensors", f32("b", 3), f32("c", 1))
	index := func(m string) {
		os.WriteFile(filepath.Join(dir, "model.safetensors.index.json"), []byte(`{"metadata":{},"weight_map":{`+m+`}}`), 0o666)
	}
	index(`"a":"model-00001-of-00002.safetensors","b":"model-00002-of-00002.safetensors","c":"model-00002-of-00002.safetensors"`)
	rep, err := Verify(context.Background(), dir)
	if err != nil || !rep.OK() || len(rep.Indexes) != 1 {
		t.Fatalf("consistent index: %q %v", rep.Problems, err)
	}
	if rep.Files[0].Status != "unverified" {
		t.Fatalf("a file without a digest: %+v", rep.Files[0])
	}
	index(`"a":"model-00001-of-00002.safetensors","b":"model-00002-of-00002.safetensors"`)
	if rep, _ := Verify(context.Background(), dir); rep.OK() || !strings.Contains(rep.Problems[0], `"c"`) {
		t.Fatalf("a shard tensor missing from the index: %q", rep.Problems)
	}
	index(`"a":"model-00001-of-00002.safetensors","b":"model-00002-of-00002.safetensors","c":"model-00002-of-00002.safetensors","d":"model-00001-of-00002.safetensors"`)
	if rep, _ := Verify(context.Background(), dir); rep.OK() || !strings.Contains(rep.Problems[0], `"d"`) {
		t.Fatalf("an index tensor missing from its shard: %q", rep.Problems)
	}

	// Both formats of one model (torch-made), then one that disagrees.
	both := t.TempDir()
	copyFile(t, "../testdata/torch/dtypes.pt", filepath.Join(both, "pytorch_model.bin"))
	copyFile(t, "../testdata/torch/dtypes.safetensors", filepath.Join(both, "model.safetensors"))
	if rep, err := Verify(context.Background(), both); err != nil || !rep.OK() {
		t.Fatalf("both formats: %q %v", rep.Problems, err)
	}
	if err := safetensors.WriteFile(filepath.Join(both, "model.safetensors"), []safetensors.TensorData{f32("f32", 8)}, nil); err != nil {
		t.Fatal(err)
	}
	rep, err = Verify(context.Background(), both)
	if err != nil || rep.OK() || !strings.Contains(rep.Problems[0], `tensor "f32" is F32[8] in the safetensors model, F32[2 4] in the PyTorch one`) {
		t.Fatalf("formats disagree: %q %v", rep.Problems, err)
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o666); err != nil {
		t.Fatal(err)
	}
}

// TestVerifyCheckpointIndex: a pytorch_model.bin.index.json is checked
// against its checkpoints, read through the opener.
func TestVerifyCheckpointIndex(t *testing.T) {
	dir := t.TempDir()
	copyFile(t, "../testdata/torch/dtypes.pt", filepath.Join(dir, "pytorch_model-00001-of-00001.bin"))
	var meta struct {
		Tensors map[string]any `json:"tensors"`
	}
	b, _ := os.ReadFile("../testdata/torch/dtypes.pt.json")
	if err := json.Unmarshal(b, &meta); err != nil {
		t.Fatal(err)
	}
	index := func(extra string) {
		var m []string
		for name := range meta.Tensors {
			m = append(m, `"`+name+`":"pytorch_model-00001-of-00001.bin"`)
		}
		if extra != "" {
			m = append(m, `"`+extra+`":"pytorch_model-00001-of-00001.bin"`)
		}
		os.WriteFile(filepath.Join(dir, "pytorch_model.bin.index.json"), []byte(`{"metadata":{},"weight_map":{`+strings.Join(m, ",")+`}}`), 0o666)
	}
	index("")
	rep, err := Verify(context.Background(), dir)
	if err != nil || !rep.OK() || len(rep.Indexes) != 1 {
		t.Fatalf("consistent checkpoint index: %q %v", rep.Problems, err)
	}
	index("lm_head.weight")
	rep, err = Verify(context.Background(), dir)
	if err != nil || rep.OK() || !strings.Contains(strings.Join(rep.Problems, "\n"), `"lm_head.weight"`) {
		t.Fatalf("an index tensor the checkpoint lacks: %q %v", rep.Problems, err)
	}
}
