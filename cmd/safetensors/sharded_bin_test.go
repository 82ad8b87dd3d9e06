package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gosafetensors/safetensors/internal/hubtest"
)

// The most common layout of older Hub models, a sharded PyTorch checkpoint
// (pytorch_model-0000N-of-0000M.bin and pytorch_model.bin.index.json, as
// transformers writes it), works with every command that reads a model,
// from its directory, its index and hf://, read as converting it would
// write it; so does a repository with only pytorch_model.bin.
func TestShardedCheckpointEverywhere(t *testing.T) {
	dir := t.TempDir()
	ents, _ := os.ReadDir(torchDir + "sharded_bin")
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), "pytorch_model") {
			copyTestFile(t, torchDir+"sharded_bin/"+e.Name(), filepath.Join(dir, e.Name()))
		}
	}
	srv := hubtest.Serve(t, dir)
	t.Setenv("HF_ENDPOINT", srv.URL)
	t.Setenv("HF_TOKEN", "")
	t.Setenv("HF_HOME", t.TempDir())
	const name = "transformer.h.10.attn.c_attn.weight"
	for _, loc := range []string{dir, filepath.Join(dir, "pytorch_model.bin.index.json"), "hf://org/model", srv.URL + "/org/model/resolve/main/pytorch_model.bin.index.json"} {
		for _, c := range []struct {
			args []string
			want string
		}{
			{[]string{"inspect", loc}, "5 shards"},
			{[]string{"inspect", "--tree", loc}, "[0-11] x12"},
			{[]string{"get", loc, name, "--slice", "0, :3"}, "["},
			{[]string{"stats", loc, name}, name},
			{[]string{"estimate", loc}, "26 tensors"},
			{[]string{"diff", loc, dir}, "26 identical"},
			{[]string{"scan", loc}, "clean (zip)"},
		} {
			code, out, errOut := runCLI(t, c.args...)
			if code != 0 || !strings.Contains(out, c.want) {
				t.Errorf("%s: exit %d, want %q in:\n%s%s", strings.Join(c.args, " "), code, c.want, out, errOut)
			}
		}
	}
	for _, loc := range []string{filepath.Join(dir, "pytorch_model.bin.index.json"), "hf://org/model/pytorch_model.bin.index.json"} {
		if code, out, errOut := runCLI(t, "validate", loc); code != 0 || !strings.Contains(out, "26 tensors") {
			t.Errorf("validate %s: exit %d\n%s%s", loc, code, out, errOut)
		}
	}

	// a repository with only pytorch_model.bin
	one := t.TempDir()
	copyTestFile(t, torchDir+"tiny_transformer.bin", filepath.Join(one, "pytorch_model.bin"))
	srv1 := hubtest.Serve(t, one)
	t.Setenv("HF_ENDPOINT", srv1.URL)
	for _, loc := range []string{one, "hf://org/model"} {
		if code, out, errOut := runCLI(t, "inspect", loc); code != 0 || !strings.Contains(out, "PyTorch checkpoint (zip)") {
			t.Errorf("inspect %s: exit %d\n%s%s", loc, code, out, errOut)
		}
	}
}
