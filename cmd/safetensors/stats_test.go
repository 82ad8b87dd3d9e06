package main

import (
	"encoding/json"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gosafetensors/safetensors"
)

// writeTestModel saves tensors under dir/name and returns the path.
func writeTestModel(t *testing.T, name string, meta map[string]string, ts ...*safetensors.Tensor) string {
	t.Helper()
	m := map[string]*safetensors.Tensor{}
	for _, x := range ts {
		m[x.Name] = x
	}
	p := filepath.Join(t.TempDir(), name)
	if err := safetensors.SaveFile(p, m, meta); err != nil {
		t.Fatal(err)
	}
	return p
}

func mustTensor(t *testing.T) func(*safetensors.Tensor, error) *safetensors.Tensor {
	return func(x *safetensors.Tensor, err error) *safetensors.Tensor {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return x
	}
}

func TestStatsCommand(t *testing.T) {
	must := mustTensor(t)
	vals := []float32{1, 2, 3, 4, 0, float32(math.NaN()), float32(math.Inf(-1))}
	p := writeTestModel(t, "m.safetensors", nil,
		must(safetensors.FromFloat32("w", []int64{7}, vals, safetensors.F32)),
		must(safetensors.FromSlice("ids", []int64{3}, []int64{-5, 0, 5})),
		safetensors.NewTensorBytes(safetensors.TensorInfo{Name: "f8", DType: safetensors.F8_E4M3, Shape: []int64{3}, DataOffsets: [2]int64{0, 3}}, []byte{0x7F, 0x38, 0xFF}, ""),
	)
	code, out, errOut := runCLI(t, "stats", p, "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var got []statsJSON
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatal(err, out)
	}
	byName := map[string]statsJSON{}
	for _, s := range got {
		byName[s.Name] = s
	}
	// Finite values of w: 1 2 3 4 0 -> mean 2, population std sqrt(2).
	w := byName["w"]
	if w.Min.Float() != 0 || w.Max.Float() != 4 || w.Mean.Float() != 2 || math.Abs(w.Std.Float()-math.Sqrt2) > 1e-15 || w.NaN != 1 || w.NegInf != 1 || w.Zeros != 1 || w.Finite != 5 {
		t.Errorf("w: %+v", w)
	}
	if ids := byName["ids"]; ids.Mean.Float() != 0 || ids.Min.Float() != -5 || ids.Max.Float() != 5 {
		t.Errorf("ids: %+v", ids)
	}
	// F8_E4M3: 0x7F and 0xFF are NaN, 0x38 is 1.
	if f8 := byName["f8"]; f8.NaN != 2 || f8.Min.Float() != 1 || f8.Finite != 1 {
		t.Errorf("f8: %+v", f8)
	}
	code, out, _ = runCLI(t, "stats", p, "w")
	if code != 0 || !strings.Contains(out, "1 tensor; 1 NaN, 1 infinite values") || strings.Contains(out, "ids") {
		t.Errorf("table: exit %d\n%s", code, out)
	}
	if code, _, errOut := runCLI(t, "stats", p, "nosuch"); code != 2 || !strings.Contains(errOut, "no tensor named nosuch") {
		t.Errorf("missing name: exit %d, %q", code, errOut)
	}
	if code, _, _ := runCLI(t, "stats", filepath.Join(t.TempDir(), "missing")); code != 2 {
		t.Errorf("missing file: exit %d", code)
	}
	bad := filepath.Join(filesDir, "..", "..", "..", "README.md")
	if code, _, errOut := runCLI(t, "stats", bad); code != 1 || strings.Contains(errOut, "goroutine") {
		t.Errorf("not safetensors: exit %d %q", code, errOut)
	}
}

func TestEstimateCommand(t *testing.T) {
	must := mustTensor(t)
	p := writeTestModel(t, "m.safetensors", nil,
		must(safetensors.FromFloat32("w", []int64{10, 10}, make([]float32, 100), safetensors.BF16)),
		must(safetensors.FromSlice("ids", []int64{4}, []int64{1, 2, 3, 4})),
	)
	code, out, errOut := runCLI(t, "estimate", p, "--json")
	if code != 0 {
		t.Fatalf("exit %d %s", code, errOut)
	}
	var e estimateJSON
	if err := json.Unmarshal([]byte(out), &e); err != nil {
		t.Fatal(err)
	}
	want := estimateJSON{File: p, Tensors: 2, Parameters: 104, FloatParameters: 100, Stored: 232, F32: 432, F16: 232, INT8: 132, INT4: 82,
		Adam: 200 + 200 + 800 + 32, AdamF32: 1632, AdamMixed: 1632}
	if e != want {
		t.Errorf("got  %+v\nwant %+v", e, want)
	}
	code, out, _ = runCLI(t, "estimate", p)
	if code != 0 || !strings.Contains(out, "INT4") || !strings.Contains(out, "1,632 bytes") {
		t.Errorf("table: exit %d\n%s", code, out)
	}
}

func TestValidateFullCountsF8(t *testing.T) {
	// The issue-6 defect: NaN/Inf in F8 went unreported.
	p := writeTestModel(t, "m.safetensors", nil,
		safetensors.NewTensorBytes(safetensors.TensorInfo{Name: "e4m3", DType: safetensors.F8_E4M3, Shape: []int64{3}, DataOffsets: [2]int64{0, 3}}, []byte{0x7F, 0xFF, 0x01}, ""),
		safetensors.NewTensorBytes(safetensors.TensorInfo{Name: "e5m2", DType: safetensors.F8_E5M2, Shape: []int64{4}, DataOffsets: [2]int64{0, 4}}, []byte{0x7C, 0x7D, 0xFC, 0x00}, ""),
	)
	_, out, errOut := runCLI(t, "validate", "--full", p)
	all := out + errOut
	for _, want := range []string{"tensor e4m3: 2 NaN and 0 infinite of 3 values", "tensor e5m2: 1 NaN and 2 infinite of 4 values"} {
		if !strings.Contains(all, want) {
			t.Errorf("validate --full does not say %q:\n%s", want, all)
		}
	}
}

// TestStatsAndDiffOnCheckpoint runs on a PyTorch checkpoint through the
// opener: its statistics equal those of its conversion, and diff finds
// them equal.
func TestStatsAndDiffOnCheckpoint(t *testing.T) {
	_, pt, errPT := runCLI(t, "stats", "--json", torchDir+"dtypes.pt")
	_, st, errST := runCLI(t, "stats", "--json", torchDir+"dtypes.safetensors")
	if pt != st || pt == "" {
		t.Errorf("checkpoint and conversion differ:\n%s\n%s\n%s%s", pt, st, errPT, errST)
	}
	var got []statsJSON
	if err := json.Unmarshal([]byte(pt), &got); err != nil {
		t.Fatal(err)
	}
	for _, s := range got {
		// The fixture stores NaN, ±Inf, -0 and subnormals in f32.
		if s.Name == "f32" && (s.NaN != 1 || s.PosInf != 1 || s.NegInf != 1 || s.Zeros != 2) {
			t.Errorf("f32: %+v", s)
		}
		if s.Name == "f64" && s.Std == "" {
			t.Errorf("f64 std overflowed: %+v", s)
		}
	}
	if code, out, errOut := runCLI(t, "diff", torchDir+"dtypes.pt", torchDir+"dtypes.safetensors", "--ignore-metadata"); code != 0 {
		t.Errorf("diff checkpoint conversion: exit %d\n%s%s", code, out, errOut)
	}
}

// TestStatsExactIntegers: the extremes of I64 and U64 tensors are printed
// exactly, in the table and as JSON numbers that parse back to the same
// integers (not rounded through float64: 9223372036854775807 is not
// 9223372036854775808).
func TestStatsExactIntegers(t *testing.T) {
	must := mustTensor(t)
	p := writeTestModel(t, "ints.safetensors", nil,
		must(safetensors.FromSlice("i64", []int64{3}, []int64{math.MinInt64, math.MaxInt64, 1})),
		must(safetensors.FromSlice("u64", []int64{3}, []uint64{math.MaxUint64, 1<<63 + 1, 2})),
		must(safetensors.FromSlice("big", []int64{2}, []float64{-math.MaxFloat64, math.MaxFloat64})),
	)
	code, out, errOut := runCLI(t, "stats", p, "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	dec := json.NewDecoder(strings.NewReader(out))
	dec.UseNumber()
	var got []map[string]any
	if err := dec.Decode(&got); err != nil {
		t.Fatal(err)
	}
	want := map[string][2]string{
		"i64": {"-9223372036854775808", "9223372036854775807"},
		"u64": {"2", "18446744073709551615"},
	}
	for _, s := range got {
		name := s["name"].(string)
		if w, ok := want[name]; ok {
			lo, _ := s["min"].(json.Number)
			hi, _ := s["max"].(json.Number)
			if string(lo) != w[0] || string(hi) != w[1] {
				t.Errorf("%s: min %v max %v, want %s %s", name, s["min"], s["max"], w[0], w[1])
			}
		}
	}
	_, table, _ := runCLI(t, "stats", p)
	for _, w := range []string{"-9223372036854775808", "9223372036854775807", "18446744073709551615"} {
		if !strings.Contains(table, w) {
			t.Errorf("table lacks %s:\n%s", w, table)
		}
	}
}

// TestStatsTable: no line of the table ends in spaces; a misspelt name
// gets suggestions.
func TestStatsTable(t *testing.T) {
	code, out, errOut := runCLI(t, "stats", torchDir+"tiny_transformer.safetensors")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for i, line := range strings.Split(out, "\n") {
		if strings.TrimRight(line, " ") != line {
			t.Errorf("line %d ends in spaces: %q", i+1, line)
		}
	}
	code, _, errOut = runCLI(t, "stats", torchDir+"tiny_transformer.safetensors", "lm_haed.weight")
	if code != 2 || !strings.Contains(errOut, "did you mean: lm_head.weight") {
		t.Errorf("misspelt name: exit %d, %q", code, errOut)
	}
}
