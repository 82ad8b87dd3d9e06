package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestInspectShardedTreeQuiet(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "model")
	if code, _, errOut := runCLI(t, "split", torchDir+"tiny_transformer.safetensors", dir, "--max-shard-size", "2KB"); code != 0 {
		t.Fatalf("split: exit %d %s", code, errOut)
	}
	for _, loc := range []string{dir, filepath.Join(dir, "model.safetensors.index.json")} {
		code, out, errOut := runCLI(t, "inspect", "--json", loc)
		if code != 0 {
			t.Fatalf("inspect %s: exit %d %s", loc, code, errOut)
		}
		var res inspectJSON
		if err := json.Unmarshal([]byte(out), &res); err != nil {
			t.Fatal(err)
		}
		if res.Format != "sharded" || len(res.Shards) < 2 || res.TotalParameters != 1600 || res.TensorCount != 35 {
			t.Fatalf("%s: format %s, %d shards, %d params, %d tensors", loc, res.Format, len(res.Shards), res.TotalParameters, res.TensorCount)
		}
		for _, tj := range res.Tensors {
			if tj.Shard == "" {
				t.Fatalf("tensor %s has no shard", tj.Name)
			}
		}
	}
	code, out, _ := runCLI(t, "inspect", dir)
	if code != 0 || !strings.Contains(out, "model-00001-of-") || !strings.Contains(out, "1.60K (1,600)") {
		t.Fatalf("text: exit %d\n%s", code, out)
	}
	code, out, _ = runCLI(t, "inspect", "-q", torchDir+"tiny_transformer.safetensors")
	if lines := strings.Split(strings.TrimSpace(out), "\n"); code != 0 || len(lines) != 35 || strings.Contains(out, " ") {
		t.Fatalf("-q: exit %d, %d lines\n%s", code, len(lines), out)
	}
	code, out, _ = runCLI(t, "inspect", "--tree", torchDir+"tiny_transformer.safetensors")
	if code != 0 || !strings.Contains(out, "[0-1] x2") || !strings.Contains(out, "each 15 tensors") {
		t.Fatalf("--tree: exit %d\n%s", code, out)
	}
}

// A checkpoint is listed with the names convert writes: a training
// checkpoint's state_dict prefix is stripped.
func TestInspectCheckpointShowsConvertNames(t *testing.T) {
	code, out, errOut := runCLI(t, "inspect", "-q", torchDir+"checkpoint_model_key.pth")
	if code != 0 {
		t.Fatalf("exit %d %s", code, errOut)
	}
	_, want, _ := runCLI(t, "inspect", "-q", torchDir+"checkpoint_model_key.safetensors")
	if out != want {
		t.Fatalf("checkpoint names:\n%s\nconverted file names:\n%s", out, want)
	}
}

func TestValidateShardedModelAttacks(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "model")
	if code, _, errOut := runCLI(t, "split", torchDir+"tiny_transformer.safetensors", dir, "--max-shard-size", "2KB"); code != 0 {
		t.Fatalf("split: exit %d %s", code, errOut)
	}
	index := filepath.Join(dir, "model.safetensors.index.json")
	if code, out, errOut := runCLI(t, "validate", index); code != 0 || !strings.HasPrefix(out, "ok ") {
		t.Fatalf("validate index: exit %d %s %s", code, out, errOut)
	}
	if code, out, _ := runCLI(t, "validate", "-q", dir); code != 0 || out != "" {
		t.Fatalf("validate dir: exit %d %s", code, out)
	}
	b, _ := os.ReadFile(index)
	for _, evil := range []string{"../model-00001-of-00004.safetensors", "/etc/passwd", "https://example.com/x.safetensors"} {
		bad := strings.Replace(string(b), `"model-00001-of-`, `"`+strings.TrimSuffix(evil, "model-00001-of-00004.safetensors")+`model-00001-of-`, 1)
		if strings.HasPrefix(evil, "/") || strings.Contains(evil, "://") {
			bad = strings.Replace(string(b), `"model-00001-of-00004.safetensors"`, `"`+evil+`"`, 1)
		}
		os.WriteFile(index, []byte(bad), 0o644)
		code, out, errOut := runCLI(t, "validate", index)
		if code != 1 || !strings.Contains(out, "FAIL") {
			t.Errorf("index naming %s: exit %d\n%s%s", evil, code, out, errOut)
		}
	}
}

// A small count is not printed twice ("99 (99)").
func TestInspectSmallCountsOnce(t *testing.T) {
	_, out, _ := runCLI(t, "inspect", "-s", filesDir+"single_f32.safetensors")
	if !strings.Contains(out, "parameters  4\n") || !strings.Contains(out, "bytes       16 B\n") {
		t.Fatalf("%s", out)
	}
}
