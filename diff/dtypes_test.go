package diff_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"math/big"
	"math/cmplx"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/gosafetensors/safetensors"
	"github.com/gosafetensors/safetensors/diff"
)

// putSpecial writes a special value (zero, -0, ±Inf, NaN, subnormal,
// largest, one) as element i of a float dtype; other dtypes are left as
// they are (every bit pattern of them comes from random bytes anyway).
func putSpecial(rng *rand.Rand, dt safetensors.DType, b []byte, i int) {
	v := []float64{0, math.Copysign(0, -1), math.Inf(1), math.Inf(-1), math.NaN(), -math.NaN(),
		math.SmallestNonzeroFloat64, math.SmallestNonzeroFloat32, 0x1p-20, math.MaxFloat32, math.MaxFloat64, 1, -1}[rng.IntN(13)]
	le := binary.LittleEndian
	switch dt {
	case safetensors.F64:
		le.PutUint64(b[8*i:], math.Float64bits(v))
	case safetensors.F32, safetensors.C64:
		le.PutUint32(b[4*i:], math.Float32bits(float32(v)))
	case safetensors.F16:
		le.PutUint16(b[2*i:], safetensors.Float32ToF16(float32(v)))
	case safetensors.BF16:
		le.PutUint16(b[2*i:], safetensors.Float32ToBF16(float32(v)))
	}
}

// pairBytes returns the bytes of two tensors of nbytes each: random
// bytes with special values, and the same changed in runs of random length
// (equal runs, random bytes, the lowest bit of each element flipped,
// special values).
func pairBytes(rng *rand.Rand, dt safetensors.DType, nbytes int) ([]byte, []byte) {
	a := make([]byte, nbytes)
	for i := range a {
		a[i] = byte(rng.Uint32())
	}
	size := max(1, dt.Bits()/8)
	n := nbytes / size
	for range n / 50 {
		putSpecial(rng, dt, a, rng.IntN(n))
	}
	b := slices.Clone(a)
	for i := 0; i < n; {
		j := min(n, i+1+rng.IntN(300))
		switch rng.IntN(4) {
		case 1:
			for k := i * size; k < j*size; k++ {
				b[k] = byte(rng.Uint32())
			}
		case 2:
			for k := i; k < j; k++ {
				b[k*size] ^= 1
			}
		case 3:
			for k := i; k < j; k++ {
				putSpecial(rng, dt, b, k)
			}
		}
		i = j
	}
	b[nbytes/2] ^= 0x10 // at least one byte differs
	return a, b
}

// want computes the expected comparison of one tensor from its bytes, the
// simple way: every element decoded, then one reference loop.
func want(t *testing.T, dta, dtb safetensors.DType, a, b []byte, eps float64) diff.Tensor {
	n := int64(len(a)) * 8 / int64(dta.Bits())
	w := diff.Tensor{Compared: true, Identical: dta == dtb && bytes.Equal(a, b), Count: n}
	switch {
	case dta == dtb && (dta == safetensors.F6_E2M3 || dta == safetensors.F6_E3M2):
		for i := range a {
			if a[i] != b[i] {
				w.Differing++
			}
		}
	case dta == dtb && (dta == safetensors.I64 || dta == safetensors.U64):
		for i := range n {
			x, y := binary.LittleEndian.Uint64(a[8*i:]), binary.LittleEndian.Uint64(b[8*i:])
			if x == y {
				continue
			}
			bx, by := new(big.Int).SetUint64(x), new(big.Int).SetUint64(y)
			fx, fy := float64(x), float64(y)
			if dta == safetensors.I64 {
				bx, by = big.NewInt(int64(x)), big.NewInt(int64(y))
				fx, fy = float64(int64(x)), float64(int64(y))
			}
			d, _ := new(big.Float).SetInt(new(big.Int).Abs(new(big.Int).Sub(bx, by))).Float64()
			w.MaxAbs = max(w.MaxAbs, d)
			w.MaxRel = max(w.MaxRel, d/max(math.Abs(fx), math.Abs(fy)))
			if d > eps {
				w.Differing++
			}
		}
	case dta == safetensors.C64: // complex elements, as numpy compares them
		va, vb := make([]float64, 2*n), make([]float64, 2*n)
		safetensors.DecodeFloat64(va, a, safetensors.F32)
		safetensors.DecodeFloat64(vb, b, safetensors.F32)
		nan := func(z complex128) bool { return real(z) != real(z) || imag(z) != imag(z) }
		for i := range n {
			x, y := complex(va[2*i], va[2*i+1]), complex(vb[2*i], vb[2*i+1])
			if x == y {
				continue
			}
			if nan(x) || nan(y) {
				if nan(x) != nan(y) {
					w.Differing++
				}
				continue
			}
			var dz complex128 // a part equal on both sides contributes 0
			if real(x) != real(y) {
				dz += complex(real(x)-real(y), 0)
			}
			if imag(x) != imag(y) {
				dz += complex(0, imag(x)-imag(y))
			}
			d := cmplx.Abs(dz)
			w.MaxAbs = max(w.MaxAbs, d)
			if math.IsInf(d, 1) {
				w.MaxRel = math.Inf(1)
			} else {
				w.MaxRel = max(w.MaxRel, d/max(cmplx.Abs(x), cmplx.Abs(y)))
			}
			if d > eps {
				w.Differing++
			}
		}
	default:
		va, vb := make([]float64, w.Count), make([]float64, w.Count)
		if err := safetensors.DecodeFloat64(va, a, dta); err != nil {
			t.Fatal(err)
		}
		if err := safetensors.DecodeFloat64(vb, b, dtb); err != nil {
			t.Fatal(err)
		}
		w.Differing, w.MaxAbs, w.MaxRel = expected(va, vb, eps)
	}
	return w
}

func check(t *testing.T, what string, got, w diff.Tensor) {
	t.Helper()
	if got.Compared != w.Compared || got.Identical != w.Identical || got.Count != w.Count || got.Differing != w.Differing ||
		math.Float64bits(got.MaxAbs) != math.Float64bits(w.MaxAbs) || math.Float64bits(got.MaxRel) != math.Float64bits(w.MaxRel) {
		t.Errorf("%s: got compared %v identical %v count %d differing %d max abs %v max rel %v\n"+
			"want compared %v identical %v count %d differing %d max abs %v max rel %v", what,
			got.Compared, got.Identical, got.Count, got.Differing, got.MaxAbs, got.MaxRel,
			w.Compared, w.Identical, w.Count, w.Differing, w.MaxAbs, w.MaxRel)
	}
}

func fileOf(t *testing.T, dt safetensors.DType, data []byte) string {
	t.Helper()
	n := int64(len(data)) * 8 / int64(dt.Bits())
	info := safetensors.TensorInfo{Name: "t", DType: dt, Shape: []int64{n}, DataOffsets: [2]int64{0, int64(len(data))}}
	return save(t, nil, safetensors.NewTensorBytes(info, data, ""))
}

func readerOf(t *testing.T, path string) safetensors.Source {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	r, err := safetensors.NewReader(bytes.NewReader(raw), int64(len(raw)))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// compareAll compares the files at pa and pb mapped and through readers,
// with the default options and with small chunks on three workers, and
// checks every result against w.
func compareAll(t *testing.T, what, pa, pb string, eps float64, w diff.Tensor) {
	t.Helper()
	for _, src := range []string{"mapped", "reader"} {
		a, b := open(t, pa), open(t, pb)
		if src == "reader" {
			a, b = readerOf(t, pa), readerOf(t, pb)
		}
		for _, opts := range [][]diff.Option{nil, {diff.WithWorkers(3), diff.WithChunkSize(64 << 10)}} {
			r, err := diff.Compare(context.Background(), a, b, append(opts, diff.WithEpsilon(eps))...)
			if err != nil {
				t.Fatalf("%s: %v", what, err)
			}
			check(t, fmt.Sprintf("%s %s eps %v %d options", what, src, eps, len(opts)), r.Tensors[0], w)
		}
	}
}

// TestEveryDTypeAgainstReference compares, for every dtype, two tensors
// of a few chunks with random values (NaN, Inf, -0 and subnormals among
// them) changed in runs, against a plain loop over the decoded values;
// with the assembly kernels where the CPU has them, and without.
func TestEveryDTypeAgainstReference(t *testing.T) {
	t.Run("kernels", testEveryDType)
	restore := diff.WithoutKernels()
	defer restore()
	t.Run("Go", testEveryDType)
}

func testEveryDType(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 11))
	const nbytes = 3 * 8 * 12345 // whole elements of every dtype, F6 included
	for _, dt := range safetensors.DTypes() {
		a, b := pairBytes(rng, dt, nbytes)
		pa, pb := fileOf(t, dt, a), fileOf(t, dt, b)
		for _, eps := range []float64{0, 1e-2, 1} { // 1: integers one apart are equal
			compareAll(t, dt.String(), pa, pb, eps, want(t, dt, dt, a, b, eps))
		}
		// Identical bytes.
		w := want(t, dt, dt, a, a, 0)
		if !w.Identical || w.Differing != 0 {
			t.Fatalf("%s: reference %+v for identical bytes", dt, w)
		}
		compareAll(t, dt.String()+" identical", pa, pa, 0, w)
	}
}

// TestDTypePairsAgainstReference compares tensors of two different dtypes
// (decoded to float64 a block at a time) against the reference: random
// bytes on both sides, and B converted from A's values for half of it.
func TestDTypePairsAgainstReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(12, 12))
	const n = 40_000
	pairs := [][2]safetensors.DType{{safetensors.F32, safetensors.BF16}, {safetensors.F16, safetensors.F32},
		{safetensors.F64, safetensors.F32}, {safetensors.BF16, safetensors.F16}, {safetensors.I32, safetensors.F64},
		{safetensors.U8, safetensors.F8_E4M3}, {safetensors.I64, safetensors.F32}, {safetensors.F4, safetensors.BF16},
		{safetensors.F8_E5M2, safetensors.F64}, {safetensors.U64, safetensors.I16}}
	for _, p := range pairs {
		dta, dtb := p[0], p[1]
		a, _ := pairBytes(rng, dta, n*dta.Bits()/8)
		b, _ := pairBytes(rng, dtb, n*dtb.Bits()/8)
		if _, err := safetensors.EncodedSize(dtb, 1); err == nil {
			v := make([]float32, n/2)
			if err := safetensors.DecodeFloat32(v, a[:n/2*dta.Bits()/8], dta); err != nil {
				t.Fatal(err)
			}
			if err := safetensors.EncodeFloat32(b[:n/2*dtb.Bits()/8], v, dtb); err != nil {
				t.Fatal(err)
			}
		}
		pa, pb := fileOf(t, dta, a), fileOf(t, dtb, b)
		for _, eps := range []float64{0, 1e-2} {
			compareAll(t, dta.String()+"/"+dtb.String(), pa, pb, eps, want(t, dta, dtb, a, b, eps))
		}
	}
}

// TestUnalignedF32: an F32 tensor at an odd offset in a mapped file cannot
// be viewed as []float32 and is decoded instead; same results.
func TestUnalignedF32(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 13))
	const n = 20_001
	a, b := pairBytes(rng, safetensors.F32, 4*n)
	mk := func(data []byte) string {
		hdr := fmt.Sprintf(`{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},"t":{"dtype":"F32","shape":[%d],"data_offsets":[1,%d]}}`, n, 1+4*n)
		for len(hdr)%8 != 0 {
			hdr += " "
		}
		file := binary.LittleEndian.AppendUint64(nil, uint64(len(hdr)))
		file = append(append(append(file, hdr...), 7), data...)
		p := filepath.Join(t.TempDir(), "u.safetensors")
		if err := os.WriteFile(p, file, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	pa, pb := mk(a), mk(b)
	f := open(t, pa).(*safetensors.File)
	tt, err := f.Tensor("t")
	if err != nil {
		t.Fatal(err)
	}
	raw, err := tt.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := safetensors.View[float32](raw); ok {
		t.Skip("the mapping allows an unaligned view here")
	}
	for _, eps := range []float64{0, 1e-2} {
		w := want(t, safetensors.F32, safetensors.F32, a, b, eps)
		for _, opts := range [][]diff.Option{nil, {diff.WithWorkers(3), diff.WithChunkSize(64 << 10)}} {
			r, err := diff.Compare(context.Background(), open(t, pa), open(t, pb), append(opts, diff.WithEpsilon(eps))...)
			if err != nil {
				t.Fatal(err)
			}
			if len(r.Tensors) != 2 || r.Tensors[1].Name != "t" {
				t.Fatalf("tensors %+v", r.Tensors)
			}
			check(t, fmt.Sprintf("unaligned eps %v", eps), r.Tensors[1], w)
		}
	}
}
