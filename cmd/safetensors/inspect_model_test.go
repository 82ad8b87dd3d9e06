package main

import (
	"encoding/json"
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
	if code != 0 || !strings.Contains(out, "model-00001-of-") || !strings.Contains(out, "1.6K (1,600)") {
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
