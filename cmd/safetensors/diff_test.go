package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gosafetensors/safetensors"
)

func TestDiffCommand(t *testing.T) {
	must := mustTensor(t)
	a := writeTestModel(t, "a.safetensors", map[string]string{"format": "pt"},
		must(safetensors.FromSlice("w", []int64{4}, []float32{1, 2, 3, 4})),
		must(safetensors.FromSlice("same", []int64{2}, []int8{1, 2})),
		must(safetensors.FromSlice("gone", []int64{1}, []int8{1})),
	)
	b := writeTestModel(t, "b.safetensors", map[string]string{"format": "pt"},
		must(safetensors.FromSlice("w", []int64{4}, []float32{1, 2, 3.5, 4.25})),
		must(safetensors.FromSlice("same", []int64{2}, []int8{1, 2})),
		must(safetensors.FromSlice("new", []int64{1}, []int8{1})),
	)
	code, out, _ := runCLI(t, "diff", a, a)
	if code != 0 || !strings.Contains(out, "3 in both: 3 identical") {
		t.Errorf("self: exit %d\n%s", code, out)
	}
	code, out, _ = runCLI(t, "diff", a, b)
	for _, want := range []string{"only in A: gone", "only in B: new", "values differ: w: 2 of 4 elements, max abs diff 0.5, max rel diff 0.142857"} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q in\n%s", want, out)
		}
	}
	if code != 1 {
		t.Errorf("different: exit %d", code)
	}
	code, out, _ = runCLI(t, "diff", a, b, "--json", "--epsilon", "1")
	var j diffJSON
	if err := json.Unmarshal([]byte(out), &j); err != nil {
		t.Fatal(err, out)
	}
	if code != 1 || j.Equal || len(j.Tensors) != 1 || j.Tensors[0].Differing != 0 || j.Tensors[0].MaxAbs.Float() != 0.5 || j.Identical != 1 {
		t.Errorf("json: exit %d %+v", code, j)
	}
	// Only w differs, within epsilon: equal once the name sets match.
	c := writeTestModel(t, "c.safetensors", map[string]string{"format": "np"},
		must(safetensors.FromSlice("w", []int64{4}, []float32{1, 2, 3.5, 4.25})),
		must(safetensors.FromSlice("same", []int64{2}, []int8{1, 2})),
		must(safetensors.FromSlice("gone", []int64{1}, []int8{1})),
	)
	if code, out, _ := runCLI(t, "diff", a, c, "--epsilon", "0.5"); code != 1 || !strings.Contains(out, "metadata differs: format: pt -> np") {
		t.Errorf("metadata: exit %d\n%s", code, out)
	}
	if code, out, _ := runCLI(t, "diff", a, c, "--epsilon", "0.5", "--ignore-metadata"); code != 0 {
		t.Errorf("within epsilon, metadata ignored: exit %d\n%s", code, out)
	}
	if code, _, _ := runCLI(t, "diff", a, c, "--names-only", "--ignore-metadata"); code != 0 {
		t.Errorf("names only: exit %d", code)
	}
	for _, args := range [][]string{
		{"diff", a, filepath.Join(t.TempDir(), "missing")},
		{"diff", a, b, "--epsilon", "-1"},
		{"diff", a},
		{"diff", a, filepath.Join(filesDir, "..", "..", "..", "go.mod")},
	} {
		if code, _, errOut := runCLI(t, args...); code != 2 || strings.Contains(errOut, "goroutine") {
			t.Errorf("%v: exit %d, want 2 (%q)", args, code, errOut)
		}
	}
}
