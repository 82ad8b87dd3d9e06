package diff_test

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/gosafetensors/safetensors"
	"github.com/gosafetensors/safetensors/diff"
)

// TestComplexAgainstNumpy: C64 tensors are compared as numpy compares
// complex arrays: elements counted once, |a-b| the modulus of the complex
// difference (numpy's abs, in complex128), relative to max(|a|, |b|).
func TestComplexAgainstNumpy(t *testing.T) {
	py := "/usr/bin/python3"
	if err := exec.Command(py, "-c", "import numpy").Run(); err != nil {
		t.Skipf("numpy not available in %s: not checking C64 against it (%v)", py, err)
	}
	const n = 5000
	rng := rand.New(rand.NewPCG(9, 14))
	a, b := make([]byte, 8*n), make([]byte, 8*n)
	for i := range 2 * n {
		x := float32(rng.NormFloat64())
		y := x
		if rng.IntN(3) == 0 {
			y = x + float32(rng.NormFloat64()*0.01)
		}
		binary.LittleEndian.PutUint32(a[4*i:], math.Float32bits(x))
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(y))
	}
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "a.bin"), a, 0o644)
	os.WriteFile(filepath.Join(dir, "b.bin"), b, 0o644)
	const eps = 0.005
	script := `
import json, sys, numpy as np
a = np.fromfile(sys.argv[1], dtype=np.complex64).astype(np.complex128)
b = np.fromfile(sys.argv[2], dtype=np.complex64).astype(np.complex128)
d = np.abs(a - b)
m = np.maximum(np.abs(a), np.abs(b))
rel = np.where(d > 0, d / np.where(m > 0, m, 1), 0)
print(json.dumps({"count": int(a.size), "differing": int((d > float(sys.argv[3])).sum()), "max_abs": float(d.max()), "max_rel": float(rel.max())}))
`
	out, err := exec.Command(py, "-c", script, filepath.Join(dir, "a.bin"), filepath.Join(dir, "b.bin"), "0.005").Output()
	if err != nil {
		t.Fatalf("numpy: %v", err)
	}
	var want struct {
		Count, Differing int64
		MaxAbs           float64 `json:"max_abs"`
		MaxRel           float64 `json:"max_rel"`
	}
	if err := json.Unmarshal(out, &want); err != nil {
		t.Fatal(err)
	}
	info := safetensors.TensorInfo{Name: "z", DType: safetensors.C64, Shape: []int64{n}, DataOffsets: [2]int64{0, 8 * n}}
	pa := save(t, nil, safetensors.NewTensorBytes(info, a, ""))
	pb := save(t, nil, safetensors.NewTensorBytes(info, b, ""))
	r, err := diff.Compare(context.Background(), open(t, pa), open(t, pb), diff.WithEpsilon(eps))
	if err != nil {
		t.Fatal(err)
	}
	got := r.Tensors[0]
	if got.Count != want.Count || got.Differing != want.Differing ||
		math.Abs(got.MaxAbs-want.MaxAbs) > 1e-15*want.MaxAbs || math.Abs(got.MaxRel-want.MaxRel) > 1e-15*want.MaxRel {
		t.Errorf("got count %d differing %d max abs %v max rel %v; numpy %+v", got.Count, got.Differing, got.MaxAbs, got.MaxRel, want)
	}
}
