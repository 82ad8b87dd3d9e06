package main

import (
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gosafetensors/safetensors/internal/pacedserver"
)

var loadSpec = pacedserver.ModelSpec{Hidden: 256, Intermediate: 512, Layers: 2, Vocab: 512, Shards: 2}

func writeLoadModel(t *testing.T) string {
	t.Helper()
	files, err := loadSpec.Model()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for name, f := range files {
		out, err := os.Create(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.Copy(out, io.NewSectionReader(f.Content, 0, f.Size)); err != nil {
			t.Fatal(err)
		}
		out.Close()
	}
	return dir
}

func TestLoadCommand(t *testing.T) {
	dir := writeLoadModel(t)
	var model int64
	for _, ti := range loadSpec.Tensors() {
		model += ti.NumElements() * int64(ti.DType.Bits()) / 8
	}
	code, out, errOut := runCLI(t, "load", dir, "--json", "--chunk", "64KiB", "-c", "4")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var j loadJSON
	if err := json.Unmarshal([]byte(out), &j); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if j.Bytes != model || j.ModelBytes != model || j.Tensors != len(loadSpec.Tensors()) || j.Files != 2 ||
		j.ChunkSize != 64<<10 || j.Concurrency != 4 || j.Chunks < model/(64<<10) || j.Requests != 0 || j.TP != nil || j.Into != "discard" {
		t.Fatalf("unexpected report %+v", j)
	}

	// Rank 1 of 2: half of every split tensor, the norms whole.
	code, out, errOut = runCLI(t, "load", dir, "--json", "--tp", "1/2", "--into", "memory")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	j = loadJSON{}
	if err := json.Unmarshal([]byte(out), &j); err != nil {
		t.Fatal(err)
	}
	norms := (2*loadSpec.Layers + 1) * loadSpec.Hidden * 4
	if j.TP == nil || j.TP.Rank != 1 || j.TP.World != 2 || j.TP.ReplicatedBytes != norms || j.Bytes != (model-norms)/2+norms {
		t.Fatalf("tp report %+v %+v", j, j.TP)
	}

	// A rule makes the embedding replicated.
	code, out, _ = runCLI(t, "load", dir, "--tp", "0/2", "--tp-rule", "*embed_tokens*=replicate")
	if code != 0 || !strings.Contains(out, "tensor parallel: rank 0 of 2") || !strings.Contains(out, "6 replicated") {
		t.Fatalf("exit %d: %s", code, out)
	}

	// --filter
	code, out, _ = runCLI(t, "load", dir, "--filter", "lm_head")
	if code != 0 || !strings.Contains(out, ": 1 tensor,") {
		t.Fatalf("exit %d: %s", code, out)
	}
}

func TestLoadCommandErrors(t *testing.T) {
	dir := writeLoadModel(t)
	for _, tc := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"--tp", "2/2"}, 2, "--tp"},
		{[]string{"--tp", "x"}, 2, "--tp"},
		{[]string{"--tp-rule", "a=rows"}, 2, "need --tp"},
		{[]string{"--tp", "0/2", "--tp-rule", "a=sideways"}, 2, "--tp-rule"},
		{[]string{"--tp", "0/2", "--tp-uneven", "maybe"}, 2, "--tp-uneven"},
		{[]string{"--chunk", "1"}, 2, "--chunk"},
		{[]string{"-c", "0"}, 2, "--concurrency"},
		{[]string{"--into", "gpu"}, 2, "--into"},
		{[]string{"--filter", "["}, 2, "--filter"},
		// 512 vocabulary rows do not split 3 ways.
		{[]string{"--tp", "0/3"}, 2, "do not divide"},
	} {
		code, _, errOut := runCLI(t, append([]string{"load", dir}, tc.args...)...)
		if code != tc.code || !strings.Contains(errOut, tc.msg) {
			t.Errorf("%v: exit %d, %q", tc.args, code, errOut)
		}
	}
	if code, _, _ := runCLI(t, "load", filepath.Join(dir, "missing")); code != 2 {
		t.Errorf("missing location: exit %d", code)
	}
}
