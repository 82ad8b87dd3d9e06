package main

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gosafetensors/safetensors"
)

// numpyPython is the Python with numpy (the one torch came with), or the
// test is skipped saying so.
func numpyPython(t *testing.T) string {
	t.Helper()
	for _, py := range []string{"/usr/bin/python3", "python3"} {
		if p, err := exec.LookPath(py); err == nil && exec.Command(p, "-c", "import numpy").Run() == nil {
			return p
		}
	}
	t.Skip("no python3 with numpy: get's printing is not compared with numpy's")
	return ""
}

// numpyDescr is numpy's name for a safetensors dtype numpy has.
var numpyDescr = map[safetensors.DType]string{
	safetensors.F64: "<f8", safetensors.F32: "<f4", safetensors.F16: "<f2", safetensors.I64: "<i8", safetensors.I32: "<i4",
	safetensors.I16: "<i2", safetensors.I8: "i1", safetensors.U8: "u1", safetensors.U16: "<u2", safetensors.U32: "<u4",
	safetensors.U64: "<u8", safetensors.BOOL: "?", safetensors.C64: "<c8",
}

// TestGetPrintsLikeNumpy: `get` prints every tensor as numpy's
// array2string(x, separator=", ", threshold=LIMIT, edgeitems=3,
// max_line_width=75) does, for every dtype numpy has, in fixed and
// scientific layouts, wrapped, summarised, with non-finite values.
func TestGetPrintsLikeNumpy(t *testing.T) {
	py := numpyPython(t)
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(1, 2))
	f32 := func(n int, f func(i int) float64) []byte {
		b := make([]byte, 4*n)
		for i := range n {
			v := math.Float32bits(float32(f(i)))
			b[4*i], b[4*i+1], b[4*i+2], b[4*i+3] = byte(v), byte(v>>8), byte(v>>16), byte(v>>24)
		}
		return b
	}
	f64 := func(n int, f func(i int) float64) []byte {
		b := make([]byte, 8*n)
		for i := range n {
			v := math.Float64bits(f(i))
			for k := range 8 {
				b[8*i+k] = byte(v >> (8 * k))
			}
		}
		return b
	}
	tensors := []safetensors.TensorData{
		{Name: "randn768", DType: safetensors.F32, Shape: []int64{768}, Data: f32(768, func(int) float64 { return rng.NormFloat64() })},
		{Name: "small", DType: safetensors.F32, Shape: []int64{3, 5}, Data: f32(15, func(i int) float64 { return float64(i) / 4 })},
		{Name: "whole", DType: safetensors.F64, Shape: []int64{4}, Data: f64(4, func(i int) float64 { return float64(i * i) })},
		{Name: "tiny", DType: safetensors.F64, Shape: []int64{2, 3}, Data: f64(6, func(i int) float64 { return math.Pow(10, float64(-i*3)) })},
		{Name: "big", DType: safetensors.F32, Shape: []int64{40, 50}, Data: f32(2000, func(i int) float64 { return float64(i) / 7 })},
		{Name: "cube", DType: safetensors.F32, Shape: []int64{20, 10, 12}, Data: f32(2400, func(i int) float64 { return float64(i%97) - 48.5 })},
		{Name: "nonfinite", DType: safetensors.F64, Shape: []int64{5}, Data: f64(5, func(i int) float64 { return []float64{math.NaN(), 1, math.Inf(-1), -0.5, math.Inf(1)}[i] })},
		{Name: "allnan", DType: safetensors.F32, Shape: []int64{2}, Data: f32(2, func(int) float64 { return math.NaN() })},
		{Name: "half", DType: safetensors.F16, Shape: []int64{7}, Data: []byte{0, 0x3c, 0x66, 0x2e, 0x00, 0xc5, 0xff, 0x7b, 0x01, 0x00, 0x00, 0x7c, 0x55, 0x35}},
	}
	ints := make([]byte, 8*1200)
	for i := range ints {
		ints[i] = byte(rng.IntN(256))
	}
	tensors = append(tensors,
		safetensors.TensorData{Name: "i64", DType: safetensors.I64, Shape: []int64{3, 400}, Data: ints},
		safetensors.TensorData{Name: "u8", DType: safetensors.U8, Shape: []int64{6, 7}, Data: ints[:42]},
		safetensors.TensorData{Name: "i16", DType: safetensors.I16, Shape: []int64{2, 2, 3}, Data: ints[:24]},
		safetensors.TensorData{Name: "bool", DType: safetensors.BOOL, Shape: []int64{2, 3}, Data: []byte{1, 0, 1, 1, 1, 0}},
		safetensors.TensorData{Name: "c64", DType: safetensors.C64, Shape: []int64{3}, Data: f32(6, func(i int) float64 { return []float64{1, 2, -0.5, -1.25, math.Inf(1), 0}[i] })},
		safetensors.TensorData{Name: "scalar", DType: safetensors.F32, Shape: []int64{}, Data: f32(1, func(int) float64 { return 2.5 })},
	)
	// every cell width, so that lines end at every distance from the edge
	for w := 1; w <= 13; w++ {
		b := make([]byte, 8*31)
		for i := range 31 {
			v := uint64(math.Pow10(w - 1))
			for k := range 8 {
				b[8*i+k] = byte(v >> (8 * k))
			}
		}
		tensors = append(tensors, safetensors.TensorData{Name: fmt.Sprintf("width%d", w), DType: safetensors.U64, Shape: []int64{31}, Data: b})
		tensors = append(tensors, safetensors.TensorData{Name: fmt.Sprintf("rows%d", w), DType: safetensors.U64, Shape: []int64{31, 1}, Data: b})
	}
	file := filepath.Join(dir, "m.safetensors")
	b, err := safetensors.Marshal(tensors, nil)
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(file, b, 0o644)

	type job struct {
		Name, Descr, Raw string
		Shape            []int64
		Limit            int64
	}
	var jobs []job
	var args [][]string
	for _, td := range tensors {
		for _, limit := range []int64{1000, 10} {
			raw := filepath.Join(dir, fmt.Sprintf("%s.%d.raw", td.Name, limit))
			os.WriteFile(raw, td.Data, 0o644)
			jobs = append(jobs, job{td.Name, numpyDescr[td.DType], raw, td.Shape, limit})
			args = append(args, []string{"get", file, td.Name, "--limit", fmt.Sprint(limit)})
		}
	}
	spec, _ := json.Marshal(jobs)
	script := `
import json, sys, numpy as np
for j in json.loads(sys.argv[1]):
    a = np.fromfile(j["Raw"], dtype=np.dtype(j["Descr"])).reshape(j["Shape"])
    print(json.dumps(np.array2string(a, separator=", ", threshold=j["Limit"], edgeitems=3, max_line_width=75)))
`
	out, err := exec.Command(py, "-c", script, string(spec)).Output()
	if err != nil {
		t.Fatalf("numpy: %v", err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	for i, a := range args {
		var want string
		json.Unmarshal([]byte(lines[i]), &want)
		code, got, stderr := runCLI(t, a...)
		if code != 0 || got != want+"\n" {
			t.Errorf("%s --limit %s: exit %d %s\n got:\n%s\nnumpy:\n%s", a[2], a[4], code, stderr, got, want)
		}
	}
	if len(lines) != len(args) {
		t.Fatalf("numpy printed %d arrays for %d tensors", len(lines), len(args))
	}
	t.Logf("%d prints agree with numpy", len(args))
}
