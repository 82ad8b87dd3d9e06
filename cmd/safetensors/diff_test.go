package main

import (
	"encoding/binary"
	"encoding/json"
	"math"
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

func diffJSONOf(t *testing.T, a, b string) (int, map[string]map[string]any) {
	t.Helper()
	code, out, errOut := runCLI(t, "diff", "--json", a, b)
	dec := json.NewDecoder(strings.NewReader(out))
	dec.UseNumber()
	var j struct {
		Tensors []map[string]any `json:"tensors"`
	}
	if err := dec.Decode(&j); err != nil {
		t.Fatalf("%v: %s %s", err, out, errOut)
	}
	by := map[string]map[string]any{}
	for _, x := range j.Tensors {
		by[x["name"].(string)] = x
	}
	return code, by
}

// TestDiffNumbers: C64 is compared by complex element (numpy's abs of the
// complex difference), I64 differences are exact JSON integers, and an
// infinite difference is "inf".
func TestDiffNumbers(t *testing.T) {
	must := mustTensor(t)
	c64 := func(v ...float32) *safetensors.Tensor {
		b := make([]byte, 4*len(v))
		for i, x := range v {
			binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
		}
		return safetensors.NewTensorBytes(safetensors.TensorInfo{Name: "z", DType: safetensors.C64, Shape: []int64{int64(len(v) / 2)}, DataOffsets: [2]int64{0, int64(len(b))}}, b, "")
	}
	inf := float32(math.Inf(1))
	pa := writeTestModel(t, "a.safetensors", nil, c64(1, 1, 3, 4, 2, 0),
		must(safetensors.FromSlice("i", []int64{2}, []int64{math.MinInt64, 7})),
		must(safetensors.FromFloat32("f", []int64{2}, []float32{1, inf}, safetensors.F32)))
	pb := writeTestModel(t, "b.safetensors", nil, c64(1, 1, 0, 0, 2, 0),
		must(safetensors.FromSlice("i", []int64{2}, []int64{math.MaxInt64, 7})),
		must(safetensors.FromFloat32("f", []int64{2}, []float32{1, 2}, safetensors.F32)))
	code, by := diffJSONOf(t, pa, pb)
	if code != 1 {
		t.Errorf("exit %d", code)
	}
	// (3+4i) - 0 has modulus 5; max(|a|, |b|) = 5: relative 1. Two
	// elements equal, one differs: 3 elements, 1 differing.
	z := by["z"]
	if z["count"] != json.Number("3") || z["differing"] != json.Number("1") || z["max_abs"] != json.Number("5") || z["max_rel"] != json.Number("1") {
		t.Errorf("C64: %v", z)
	}
	if i := by["i"]; i["max_abs"] != json.Number("18446744073709551615") {
		t.Errorf("I64 max_abs %v, want 18446744073709551615 exactly", i["max_abs"])
	}
	if f := by["f"]; f["max_abs"] != "inf" || f["max_rel"] != "inf" {
		t.Errorf("F32 with an infinity: max_abs %v max_rel %v, want \"inf\"", f["max_abs"], f["max_rel"])
	}
	_, out, _ := runCLI(t, "diff", pa, pb)
	if !strings.Contains(out, "values differ: z: 1 of 3 elements, max abs diff 5,") || !strings.Contains(out, "max abs diff 18,446,744,073,709,551,615") {
		t.Errorf("text:\n%s", out)
	}
}

// TestDiffSaysWhatDiffers: only the dtype, or an empty tensor, is not
// "values differ: 0 of N elements".
func TestDiffSaysWhatDiffers(t *testing.T) {
	must := mustTensor(t)
	pa := writeTestModel(t, "a.safetensors", nil,
		must(safetensors.FromFloat32("w", []int64{2}, []float32{1, 2}, safetensors.F32)),
		must(safetensors.FromFloat32("e", []int64{0, 3}, nil, safetensors.F32)))
	pb := writeTestModel(t, "b.safetensors", nil,
		must(safetensors.FromFloat32("w", []int64{2}, []float32{1, 2}, safetensors.BF16)),
		must(safetensors.FromFloat32("e", []int64{0, 3}, nil, safetensors.F16)))
	code, out, _ := runCLI(t, "diff", pa, pb)
	if code != 1 || strings.Contains(out, "values differ") ||
		!strings.Contains(out, "dtype differs: w F32 -> BF16; the values are equal (2 elements") ||
		!strings.Contains(out, "dtype differs: e F32 -> F16 (empty tensor: no values to compare)") {
		t.Errorf("exit %d:\n%s", code, out)
	}
}

// TestDiffKeepAliases: a conversion with --keep-aliases against one
// without is the same model: the removed names are the kept tensors, by
// the removed -> kept metadata the converter writes.
func TestDiffKeepAliases(t *testing.T) {
	dir := t.TempDir()
	keep, drop := filepath.Join(dir, "keep.safetensors"), filepath.Join(dir, "drop.safetensors")
	if code, _, errOut := runCLI(t, "convert", torchDir+"tied_weights.pt", keep, "--keep-aliases"); code != 0 {
		t.Fatalf("convert --keep-aliases: %s", errOut)
	}
	if code, _, errOut := runCLI(t, "convert", torchDir+"tied_weights.pt", drop); code != 0 {
		t.Fatalf("convert: %s", errOut)
	}
	for _, args := range [][2]string{{keep, drop}, {drop, keep}} {
		code, out, errOut := runCLI(t, "diff", args[0], args[1])
		if code != 0 || strings.Contains(out, "only in A: ") || strings.Contains(out, "only in B: ") || strings.Contains(out, "metadata only") || !strings.Contains(out, "tied weight: ") {
			t.Errorf("diff %s %s: exit %d\n%s%s", filepath.Base(args[0]), filepath.Base(args[1]), code, out, errOut)
		}
	}
}
