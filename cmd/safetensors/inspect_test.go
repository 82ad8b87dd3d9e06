package main

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestInspectTable(t *testing.T) {
	code, out, errOut := runCLI(t, "inspect", torchDir+"tiny_transformer.safetensors")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{
		"NAME", "h.0.fc_in.weight", "[16, 8]",
		"parameters  1.60K (1,600)",
		"bytes       6.3 KiB (6,464)",
		"F32", "I64",
		"header      2,640 bytes",
		"format = pt",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	// Name order by default; file order with --sort offset (position_ids
	// has offset 0).
	lines := strings.Split(out, "\n")
	if !strings.HasPrefix(lines[1], "h.0.fc_in.bias ") {
		t.Errorf("first row %q, want h.0.fc_in.bias (name order)", lines[1])
	}
	_, out, _ = runCLI(t, "inspect", "--sort", "offset", torchDir+"tiny_transformer.safetensors")
	if lines := strings.Split(out, "\n"); !strings.HasPrefix(lines[1], "position_ids ") {
		t.Errorf("--sort offset: first row %q, want position_ids (file order)", lines[1])
	}
}

// Plain lists order names as a person reads them: h.2 before h.10.
func TestInspectNumericOrder(t *testing.T) {
	for _, args := range [][]string{{"inspect"}, {"inspect", "-q"}, {"inspect", "--sort", "name", "--json"}} {
		_, out, _ := runCLI(t, append(args, torchDir+"sharded_bin")...)
		i2, i10 := strings.Index(out, "transformer.h.2.ln_1.weight"), strings.Index(out, "transformer.h.10.ln_1.weight")
		if i2 < 0 || i10 < 0 || i2 > i10 {
			t.Errorf("%v: h.2 at %d, h.10 at %d:\n%s", args, i2, i10, out)
		}
	}
}

func TestInspectScalarCountsOne(t *testing.T) {
	code, out, errOut := runCLI(t, "inspect", "--json", filesDir+"scalar.safetensors")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var got inspectJSON
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatal(err)
	}
	if len(got.Tensors) != 1 || len(got.Tensors[0].Shape) != 0 || got.Tensors[0].Parameters != 1 || got.TotalParameters != 1 {
		t.Errorf("scalar: %+v", got)
	}
	if !strings.Contains(out, `"shape": []`) {
		t.Errorf("scalar shape not [] in JSON:\n%s", out)
	}
}

func TestInspectJSONSchema(t *testing.T) {
	code, out, errOut := runCLI(t, "inspect", "--json", "--sort", "offset", torchDir+"tiny_transformer.safetensors")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal([]byte(out), &raw); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"file", "file_size", "header_size", "tensor_count", "tensors", "metadata",
		"total_parameters", "total_bytes", "parameters_by_dtype", "bytes_by_dtype", "warnings"} {
		if _, ok := raw[k]; !ok {
			t.Errorf("missing key %q", k)
		}
	}
	var tensors []map[string]json.RawMessage
	if err := json.Unmarshal(raw["tensors"], &tensors); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"name", "dtype", "shape", "data_offsets", "parameters", "bytes"} {
		if _, ok := tensors[0][k]; !ok {
			t.Errorf("tensor object lacks %q", k)
		}
	}
	var got inspectJSON
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatal(err)
	}
	if got.TotalParameters != 1600 || got.TotalBytes != 6464 || got.TensorCount != 35 || len(got.Tensors) != 35 {
		t.Errorf("totals: %d params, %d bytes, %d tensors", got.TotalParameters, got.TotalBytes, got.TensorCount)
	}
	if got.ParametersByDType["F32"] != 1584 || got.ParametersByDType["I64"] != 16 || got.BytesByDType["I64"] != 128 {
		t.Errorf("by dtype: %v %v", got.ParametersByDType, got.BytesByDType)
	}
	if got.HeaderSize != 2640 || got.Metadata["format"] != "pt" || got.Warnings == nil {
		t.Errorf("header_size %d, metadata %v, warnings %v", got.HeaderSize, got.Metadata, got.Warnings)
	}
	if got.Tensors[0].Name != "position_ids" || got.Tensors[0].DataOffsets == nil || *got.Tensors[0].DataOffsets != [2]int64{0, 128} {
		t.Errorf("first tensor %+v", got.Tensors[0])
	}
}

func TestInspectFilterAndSort(t *testing.T) {
	code, out, _ := runCLI(t, "inspect", "--json", "--filter", "h.1.*.weight", "--sort", "name", torchDir+"tiny_transformer.safetensors")
	if code != 0 {
		t.Fatal(code)
	}
	var got inspectJSON
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tn := range got.Tensors {
		names = append(names, tn.Name)
	}
	want := "h.1.fc_in.weight h.1.fc_out.weight h.1.k_proj.weight h.1.ln_1.weight h.1.ln_2.weight h.1.o_proj.weight h.1.q_proj.weight h.1.v_proj.weight"
	if strings.Join(names, " ") != want {
		t.Errorf("glob filter + name sort: %v", names)
	}
	if got.TensorCount != 35 || got.TotalParameters != 128+128+64+8+8+64+64+64 {
		t.Errorf("filtered totals: count %d params %d", got.TensorCount, got.TotalParameters)
	}

	code, out, _ = runCLI(t, "inspect", "--filter", "lm_head", "--sort", "size", torchDir+"tiny_transformer.safetensors")
	if code != 0 || !strings.Contains(out, "1 of 35 match") {
		t.Errorf("substring filter: exit %d\n%s", code, out)
	}
	code, out, _ = runCLI(t, "inspect", "-s", torchDir+"tiny_transformer.safetensors")
	if code != 0 || strings.Contains(out, "NAME") {
		t.Errorf("--summary printed the table: exit %d\n%s", code, out)
	}
}

func TestInspectErrors(t *testing.T) {
	code, _, errOut := runCLI(t, "inspect", filesDir+"offsets_gap.safetensors")
	if code != 1 || !strings.Contains(errOut, "InvalidOffset") || !strings.Contains(errOut, `tensor "b"`) {
		t.Errorf("invalid file: exit %d, %q", code, errOut)
	}
	code, _, errOut = runCLI(t, "inspect", filesDir+"no_such_file.safetensors")
	if code != 2 || !strings.Contains(errOut, "no such file") {
		t.Errorf("missing file: exit %d, %q", code, errOut)
	}
	// A broken checkpoint is reported by the checkpoint reader.
	code, _, errOut = runCLI(t, "inspect", "../../testdata/broken/truncated_zip_half.bin")
	if code != 1 || errOut == "" {
		t.Errorf("broken checkpoint: exit %d, %q", code, errOut)
	}
}

// TestInspectManyTensorsFast checks that a 100,000-tensor header is listed
// well under a second.
func TestInspectManyTensorsFast(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	path := writeManyTensors(t, 100_000)
	start := time.Now()
	code, out, errOut := runCLI(t, "inspect", path)
	elapsed := time.Since(start)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if n := strings.Count(out, "\n"); n < 100_000 {
		t.Fatalf("%d lines", n)
	}
	if !strings.Contains(out, "parameters  400K (400,000)") {
		t.Errorf("totals wrong:\n%s", out[len(out)-300:])
	}
	t.Logf("inspect of 100k tensors: %v", elapsed)
	// About 0.25 s on a laptop; the bound is loose for -race and slow CI,
	// and still catches anything quadratic.
	if elapsed > 10*time.Second {
		t.Errorf("inspect took %v", elapsed)
	}
}

// writeManyTensors writes a valid file of n F32 tensors of shape [2, 2].
func writeManyTensors(t testing.TB, n int) string {
	var h strings.Builder
	h.WriteString(`{"__metadata__":{"format":"pt"}`)
	for i := range n {
		fmt.Fprintf(&h, `,"model.layers.%d.weight":{"dtype":"F32","shape":[2,2],"data_offsets":[%d,%d]}`, i, i*16, i*16+16)
	}
	h.WriteString("}")
	for h.Len()%8 != 0 {
		h.WriteByte(' ')
	}
	buf := binary.LittleEndian.AppendUint64(nil, uint64(h.Len()))
	buf = append(buf, h.String()...)
	buf = append(buf, make([]byte, n*16)...)
	path := filepath.Join(t.TempDir(), "many.safetensors")
	if err := os.WriteFile(path, buf, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestInspectCheckpoint(t *testing.T) {
	code, out, errOut := runCLI(t, "inspect", torchDir+"tiny_transformer.bin")
	if code != 0 || !strings.Contains(out, "PyTorch checkpoint (zip), read without running it") || !strings.Contains(out, "lm_head.weight") {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
	code, out, errOut = runCLI(t, "inspect", "--json", torchDir+"dtypes_legacy.pt")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var got struct {
		Format  string `json:"format"`
		Tensors []struct {
			Name        string    `json:"name"`
			DType       string    `json:"dtype"`
			DataOffsets *[2]int64 `json:"data_offsets"`
			Bytes       int64     `json:"bytes"`
		} `json:"tensors"`
		TotalBytes int64 `json:"total_bytes"`
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatal(err)
	}
	if got.Format != "pytorch-legacy" || len(got.Tensors) != 14 || got.Tensors[0].DataOffsets != nil {
		t.Fatalf("format %q, %d tensors, first %+v", got.Format, len(got.Tensors), got.Tensors[0])
	}
	for _, tn := range got.Tensors {
		if tn.Name == "bf16" && (tn.DType != "BF16" || tn.Bytes != 8) {
			t.Errorf("bf16 listed as %+v", tn)
		}
	}
	// A dangerous checkpoint is refused, naming the global, and never run.
	code, _, errOut = runCLI(t, "inspect", "../../testdata/malicious/torch_zip_os_system.bin")
	if code != 1 || !strings.Contains(errOut, "posix.system") {
		t.Fatalf("exit %d: %s", code, errOut)
	}
}
