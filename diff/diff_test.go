package diff_test

import (
	"bytes"
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/gosafetensors/safetensors"
	"github.com/gosafetensors/safetensors/diff"
)

func save(t *testing.T, meta map[string]string, ts ...*safetensors.Tensor) string {
	t.Helper()
	m := map[string]*safetensors.Tensor{}
	for _, x := range ts {
		m[x.Name] = x
	}
	p := filepath.Join(t.TempDir(), "m.safetensors")
	if err := safetensors.SaveFile(p, m, meta); err != nil {
		t.Fatal(err)
	}
	return p
}

func must(x *safetensors.Tensor, err error) *safetensors.Tensor {
	if err != nil {
		panic(err)
	}
	return x
}

func open(t *testing.T, p string) safetensors.Source {
	t.Helper()
	f, err := safetensors.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// expected computes the comparison straight from two float64 slices.
func expected(a, b []float64, eps float64) (differing int64, maxAbs, maxRel float64) {
	for i := range a {
		x, y := a[i], b[i]
		if x == y {
			continue
		}
		if math.IsNaN(x) || math.IsNaN(y) {
			if math.IsNaN(x) != math.IsNaN(y) {
				differing++
			}
			continue
		}
		d := math.Abs(x - y)
		maxAbs = math.Max(maxAbs, d)
		if math.IsInf(d, 0) {
			maxRel = math.Inf(1)
		} else {
			maxRel = math.Max(maxRel, d/math.Max(math.Abs(x), math.Abs(y)))
		}
		if d > eps {
			differing++
		}
	}
	return
}

func TestCompare(t *testing.T) {
	n := 200_003
	rng := rand.New(rand.NewPCG(1, 1))
	va := make([]float32, n)
	for i := range va {
		va[i] = float32(rng.NormFloat64())
	}
	vb := slices.Clone(va)
	for i := 0; i < n; i += 997 {
		vb[i] += float32(rng.Float64() * 1e-3)
	}
	vb[5] = float32(math.NaN())
	na := slices.Clone(va)
	na[7], vb[7] = float32(math.NaN()), float32(math.NaN()) // NaN on both sides: equal
	a := save(t, map[string]string{"format": "pt", "x": "1"},
		must(safetensors.FromFloat32("same", []int64{int64(n)}, va, safetensors.F32)),
		must(safetensors.FromFloat32("changed", []int64{int64(n)}, na, safetensors.F32)),
		must(safetensors.FromFloat32("cast", []int64{int64(n)}, va, safetensors.F32)),
		must(safetensors.FromSlice("shape", []int64{2, 3}, []int8{1, 2, 3, 4, 5, 6})),
		must(safetensors.FromSlice("onlyA", []int64{1}, []int8{1})),
		must(safetensors.FromFloat32("changedh", []int64{int64(n)}, na, safetensors.BF16)),
	)
	b := save(t, map[string]string{"format": "pt", "x": "2", "y": "3"},
		must(safetensors.FromFloat32("same", []int64{int64(n)}, va, safetensors.F32)),
		must(safetensors.FromFloat32("changed", []int64{int64(n)}, vb, safetensors.F32)),
		must(safetensors.FromFloat32("cast", []int64{int64(n)}, va, safetensors.BF16)),
		must(safetensors.FromSlice("shape", []int64{3, 2}, []int8{1, 2, 3, 4, 5, 6})),
		must(safetensors.FromSlice("onlyB", []int64{1}, []int8{1})),
		must(safetensors.FromFloat32("changedh", []int64{int64(n)}, vb, safetensors.BF16)),
	)
	raw, _ := os.ReadFile(a)
	ra, _ := safetensors.NewReader(bytes.NewReader(raw), int64(len(raw)))
	f64 := func(v []float32) []float64 {
		out := make([]float64, len(v))
		for i, x := range v {
			out[i] = float64(x)
		}
		return out
	}
	// Round to nearest even by hand, independently of the library.
	roundBF := func(v []float32) []float64 {
		out := make([]float64, len(v))
		for i, x := range v {
			bits := math.Float32bits(x)
			if x == x {
				bits += 0x7FFF + (bits>>16)&1
			}
			out[i] = float64(math.Float32frombits(bits &^ 0xFFFF))
		}
		return out
	}
	bf := roundBF(va)
	for _, eps := range []float64{0, 1e-4} {
		for _, src := range []safetensors.Source{open(t, a), ra} {
			for _, opts := range [][]diff.Option{nil, {diff.WithWorkers(3), diff.WithChunkSize(64 << 10)}} {
				opts = append(opts, diff.WithEpsilon(eps))
				r, err := diff.Compare(context.Background(), src, open(t, b), opts...)
				if err != nil {
					t.Fatal(err)
				}
				if !slices.Equal(r.OnlyA, []string{"onlyA"}) || !slices.Equal(r.OnlyB, []string{"onlyB"}) {
					t.Errorf("only: %v %v", r.OnlyA, r.OnlyB)
				}
				if len(r.Meta.OnlyB) != 1 || r.Meta.Changed["x"] != [2]string{"1", "2"} || len(r.Meta.OnlyA) != 0 {
					t.Errorf("meta: %+v", r.Meta)
				}
				got := map[string]diff.Tensor{}
				for _, x := range r.Tensors {
					got[x.Name] = x
				}
				if s := got["same"]; !s.Identical || !s.Equal() || s.Count != int64(n) || s.Differing != 0 {
					t.Errorf("same: %+v", s)
				}
				if s := got["shape"]; s.Compared || !s.ShapeDiffers() || s.Equal() {
					t.Errorf("shape: %+v", s)
				}
				check := func(name string, x, y []float64) {
					s := got[name]
					d, ma, mr := expected(x, y, eps)
					if !s.Compared || s.Identical || s.Differing != d || s.MaxAbs != ma || s.MaxRel != mr || s.Count != int64(n) {
						t.Errorf("%s eps %v: %+v, want differing %d maxabs %v maxrel %v", name, eps, s, d, ma, mr)
					}
				}
				check("changed", f64(na), f64(vb))
				check("cast", f64(va), bf)
				// Same dtype, decoded run by run where the bytes differ.
				check("changedh", roundBF(na), roundBF(vb))
				if c := got["cast"]; !c.DTypeDiffers() || c.Equal() {
					t.Errorf("cast: %+v", c)
				}
				if r.Equal() || r.TensorsEqual() {
					t.Error("different sources reported equal")
				}
			}
		}
	}
	// A file against itself is equal; with names only nothing is read.
	r, err := diff.Compare(context.Background(), open(t, a), open(t, a))
	if err != nil || !r.Equal() {
		t.Errorf("self: %+v %v", r, err)
	}
	short, _ := safetensors.NewReader(bytes.NewReader(raw[:len(raw)-50]), int64(len(raw)))
	r, err = diff.Compare(context.Background(), short, open(t, a), diff.WithNamesOnly())
	if err != nil || !r.Equal() || r.Tensors[0].Compared {
		t.Errorf("names only: %+v %v", r, err)
	}
	_, err = diff.Compare(context.Background(), short, open(t, a))
	var fe *safetensors.FormatError
	if err == nil || errors.As(err, &fe) {
		t.Errorf("truncated: %v, want an I/O error", err)
	}
}

func TestEpsilonMakesEqual(t *testing.T) {
	a := save(t, nil, must(safetensors.FromSlice("w", []int64{3}, []float64{1, 2, 3})))
	b := save(t, nil, must(safetensors.FromSlice("w", []int64{3}, []float64{1, 2.0005, 3})))
	r, _ := diff.Compare(context.Background(), open(t, a), open(t, b))
	if r.Equal() || r.Tensors[0].Differing != 1 {
		t.Errorf("eps 0: %+v", r.Tensors[0])
	}
	r, _ = diff.Compare(context.Background(), open(t, a), open(t, b), diff.WithEpsilon(1e-3))
	if !r.Equal() || r.Tensors[0].Identical || math.Abs(r.Tensors[0].MaxAbs-0.0005) > 1e-12 {
		t.Errorf("eps 1e-3: %+v", r.Tensors[0])
	}
}

func TestEveryDTypeAgainstItself(t *testing.T) {
	// Same dtype, one byte changed: compared by value where decodable, by
	// bytes for F6; the count of differing elements is 1.
	rng := rand.New(rand.NewPCG(3, 3))
	for _, dt := range safetensors.DTypes() {
		nbytes := 3 * 8 * 100
		data := make([]byte, nbytes)
		for i := range data {
			data[i] = byte(rng.Uint32()) & 0x3F // small values: no NaN patterns
		}
		if dt == safetensors.BOOL {
			for i := range data {
				data[i] &= 1
			}
		}
		other := slices.Clone(data)
		other[nbytes/2] ^= 0x01
		if dt == safetensors.I64 || dt == safetensors.U64 {
			// A difference of one in values beyond 2^53.
			for i := 7; i < nbytes; i += 8 {
				data[i], other[i] = 0x3F, 0x3F
			}
		}
		n := int64(nbytes * 8 / dt.Bits())
		mk := func(b []byte) string {
			info := safetensors.TensorInfo{Name: "t", DType: dt, Shape: []int64{n}, DataOffsets: [2]int64{0, int64(nbytes)}}
			return save(t, nil, safetensors.NewTensorBytes(info, b, ""))
		}
		r, err := diff.Compare(context.Background(), open(t, mk(data)), open(t, mk(other)))
		if err != nil {
			t.Fatalf("%s: %v", dt, err)
		}
		x := r.Tensors[0]
		if !x.Compared || x.Identical || x.Differing != 1 {
			t.Errorf("%s: %+v", dt, x)
		}
	}
}

func TestOptions(t *testing.T) {
	for _, o := range []diff.Option{diff.WithEpsilon(-1), diff.WithEpsilon(math.NaN()), diff.WithEpsilon(math.Inf(1)),
		diff.WithWorkers(0), diff.WithChunkSize(1), diff.WithProgress(nil)} {
		a := save(t, nil)
		if _, err := diff.Compare(context.Background(), open(t, a), open(t, a), o); !errors.Is(err, diff.ErrOption) {
			t.Errorf("bad option accepted: %v", err)
		}
	}
}
