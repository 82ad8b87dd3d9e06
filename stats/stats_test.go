package stats_test

import (
	"bytes"
	"context"
	"errors"
	"math"
	"math/big"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/gosafetensors/safetensors"
	"github.com/gosafetensors/safetensors/stats"
	"github.com/x448/float16"
)

// naive computes the expected statistics the obvious way: filter, then
// two passes over a []float64.
func naive(v []float64) (want stats.Stats) {
	var fin []float64
	for _, x := range v {
		switch {
		case math.IsNaN(x):
			want.NaN++
		case math.IsInf(x, 1):
			want.PosInf++
		case math.IsInf(x, -1):
			want.NegInf++
		default:
			fin = append(fin, x)
			if x == 0 {
				want.Zeros++
			}
		}
	}
	want.Count, want.Finite = int64(len(v)), int64(len(fin))
	want.Min, want.Max, want.Mean, want.Std = math.NaN(), math.NaN(), math.NaN(), math.NaN()
	if len(fin) == 0 {
		return want
	}
	// Sums in 300-bit floats: exact enough to be the truth.
	want.Min, want.Max = math.Inf(1), math.Inf(-1)
	sum := new(big.Float).SetPrec(300)
	for _, x := range fin {
		sum.Add(sum, big.NewFloat(x))
		want.Min = math.Min(want.Min, x)
		want.Max = math.Max(want.Max, x)
	}
	n := new(big.Float).SetPrec(300).SetInt64(int64(len(fin)))
	mean := new(big.Float).SetPrec(300).Quo(sum, n)
	want.Mean, _ = mean.Float64()
	q := new(big.Float).SetPrec(300)
	d := new(big.Float).SetPrec(300)
	for _, x := range fin {
		d.Sub(big.NewFloat(x), mean)
		q.Add(q, d.Mul(d, d))
	}
	want.Std, _ = q.Quo(q, n).Sqrt(q).Float64()
	return want
}

func near(a, b, tol float64) bool {
	if math.IsNaN(a) || math.IsNaN(b) {
		return math.IsNaN(a) && math.IsNaN(b)
	}
	return a == b || math.Abs(a-b) <= tol*math.Max(math.Abs(a), math.Abs(b))
}

func check(t *testing.T, got, want stats.Stats) {
	t.Helper()
	if got.Count != want.Count || got.Finite != want.Finite || got.Zeros != want.Zeros || got.NonFinite != want.NonFinite {
		t.Errorf("%s: counts %+v, want %+v", got.Name, got, want)
	}
	if !near(got.Min, want.Min, 0) || !near(got.Max, want.Max, 0) || !near(got.Mean, want.Mean, 1e-9) || !near(got.Std, want.Std, 1e-9) {
		t.Errorf("%s: min %v max %v mean %v std %v, want %v %v %v %v", got.Name, got.Min, got.Max, got.Mean, got.Std, want.Min, want.Max, want.Mean, want.Std)
	}
}

// testValues returns n normal values with zeros, NaN and infinities
// sprinkled in.
func testValues(n int, seed uint64) []float32 {
	rng := rand.New(rand.NewPCG(seed, 9))
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(rng.NormFloat64()*3 + 1)
		switch rng.IntN(500) {
		case 0:
			v[i] = 0
		case 1:
			v[i] = float32(math.NaN())
		case 2:
			v[i] = float32(math.Inf(1))
		case 3:
			v[i] = float32(math.Inf(-1))
		}
	}
	return v
}

func writeModel(t *testing.T, n int) (path string, want map[string]stats.Stats) {
	t.Helper()
	v := testValues(n, 1)
	want = map[string]stats.Stats{}
	var tensors []*safetensors.Tensor
	add := func(x *safetensors.Tensor, err error, vals []float64) {
		if err != nil {
			t.Fatal(err)
		}
		tensors = append(tensors, x)
		want[x.Name] = naive(vals)
	}
	f64 := make([]float64, n)
	h := make([]float64, n)
	ints := make([]int32, n)
	i64 := make([]float64, n)
	for i, x := range v {
		f64[i] = float64(x)
		h[i] = float64(float16.Fromfloat32(x).Float32())
		ints[i] = int32(i%1000) - 500
		i64[i] = float64(ints[i])
	}
	x, err := safetensors.FromFloat32("f32", []int64{int64(n)}, v, safetensors.F32)
	add(x, err, f64)
	x, err = safetensors.FromFloat32("f16", []int64{int64(n)}, v, safetensors.F16)
	add(x, err, h)
	x, err = safetensors.FromSlice("i32", []int64{int64(n)}, ints)
	add(x, err, i64)
	x, err = safetensors.FromSlice("empty", []int64{0, 3}, []float32{})
	add(x, err, nil)
	m := map[string]*safetensors.Tensor{}
	for _, x := range tensors {
		m[x.Name] = x
	}
	path = filepath.Join(t.TempDir(), "m.safetensors")
	if err := safetensors.SaveFile(path, m, nil); err != nil {
		t.Fatal(err)
	}
	return path, want
}

func TestComputeAgainstNaive(t *testing.T) {
	path, want := writeModel(t, 300_001)
	f, err := safetensors.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	raw, _ := os.ReadFile(path)
	r, err := safetensors.NewReader(bytes.NewReader(raw), int64(len(raw)))
	if err != nil {
		t.Fatal(err)
	}
	for _, src := range []safetensors.Source{f, r} {
		for _, opts := range [][]stats.Option{nil, {stats.WithWorkers(3), stats.WithChunkSize(64 << 10)}, {stats.WithWorkers(1)}} {
			var last, total int64
			opts = append(opts, stats.WithProgress(func(d, tot int64) { last, total = d, tot }))
			got, err := stats.Compute(context.Background(), src, nil, opts...)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(want) {
				t.Fatalf("%d results, want %d", len(got), len(want))
			}
			for _, g := range got {
				w := want[g.Name]
				if !g.Decoded {
					t.Errorf("%s not decoded", g.Name)
				}
				check(t, g, w)
			}
			if last != total || total != r.DataSize() {
				t.Errorf("progress ended at %d of %d", last, total)
			}
		}
	}
}

func TestNumericallySound(t *testing.T) {
	// A large offset with a small spread: the naive sum-of-squares formula
	// loses every digit here; the two-pass blocks must not.
	n := 100_000
	v := make([]float64, n)
	rng := rand.New(rand.NewPCG(4, 4))
	for i := range v {
		v[i] = 1e9 + rng.Float64()
	}
	x, _ := safetensors.FromSlice("x", []int64{int64(n)}, v)
	got, err := stats.Tensor(context.Background(), x)
	if err != nil {
		t.Fatal(err)
	}
	want := naive(v)
	if !near(got.Std, want.Std, 1e-6) || !near(got.Mean, want.Mean, 1e-15) {
		t.Errorf("std %v mean %v, want %v %v", got.Std, got.Mean, want.Std, want.Mean)
	}
	// Values so large their sum overflows float64 are still finite.
	big := []float64{math.MaxFloat64, math.MaxFloat64, -math.MaxFloat64 / 2}
	x, _ = safetensors.FromSlice("big", []int64{3}, big)
	got, _ = stats.Tensor(context.Background(), x)
	want = naive(big)
	if got.Finite != 3 || got.Max != math.MaxFloat64 || !near(got.Mean, want.Mean, 1e-15) || !near(got.Std, want.Std, 1e-15) || math.IsInf(got.Std, 0) {
		t.Errorf("huge values: %+v, want mean %v std %v", got, want.Mean, want.Std)
	}
}

func TestCountNonFiniteEveryByte(t *testing.T) {
	all := make([]byte, 256)
	for i := range all {
		all[i] = byte(i)
	}
	for _, c := range []struct {
		dt              safetensors.DType
		nan, pinf, ninf int64
	}{
		{safetensors.F8_E4M3, 2, 0, 0},     // 0x7F, 0xFF; no infinities
		{safetensors.F8_E5M2, 6, 1, 1},     // 0x7D-0x7F, 0xFD-0xFF; 0x7C, 0xFC
		{safetensors.F8_E4M3FNUZ, 1, 0, 0}, // 0x80
		{safetensors.F8_E5M2FNUZ, 1, 0, 0},
		{safetensors.F8_E8M0, 1, 0, 0}, // 0xFF
		{safetensors.U8, 0, 0, 0},
		{safetensors.F4, 0, 0, 0},
		{safetensors.F16, 2 * 1023 / 2, 1, 0}, // 128 patterns: 0x7C00..0x7FFF as little-endian pairs below
	} {
		if c.dt == safetensors.F16 {
			continue
		}
		got, err := stats.CountNonFinite(c.dt, all)
		if err != nil {
			t.Fatal(err)
		}
		if got != (stats.NonFinite{NaN: c.nan, PosInf: c.pinf, NegInf: c.ninf}) {
			t.Errorf("%s: %+v, want %d NaN %d +Inf %d -Inf", c.dt, got, c.nan, c.pinf, c.ninf)
		}
		if c.dt == safetensors.F8_E5M2 {
			one, _ := stats.CountNonFinite(c.dt, []byte{0x7C, 0xFC, 0x7D, 0x7B})
			if one != (stats.NonFinite{NaN: 1, PosInf: 1, NegInf: 1}) {
				t.Errorf("E5M2 0x7C 0xFC 0x7D 0x7B: %+v", one)
			}
		}
	}
	// Every F16 and BF16 pattern once.
	b := make([]byte, 2<<16)
	for i := range 1 << 16 {
		b[2*i], b[2*i+1] = byte(i), byte(i>>8)
	}
	for _, c := range []struct {
		dt  safetensors.DType
		nan int64
	}{{safetensors.F16, 2 * 1023}, {safetensors.BF16, 2 * 127}} {
		got, _ := stats.CountNonFinite(c.dt, b)
		if got != (stats.NonFinite{NaN: c.nan, PosInf: 1, NegInf: 1}) {
			t.Errorf("%s: %+v", c.dt, got)
		}
	}
	if _, err := stats.CountNonFinite(safetensors.F32, make([]byte, 6)); !errors.Is(err, safetensors.ErrBufferSize) {
		t.Errorf("partial element: %v", err)
	}
}

func TestStatsEveryDTypeAgreesWithCount(t *testing.T) {
	rng := rand.New(rand.NewPCG(2, 2))
	for _, dt := range safetensors.DTypes() {
		size := dt.Size()
		n := 4096 * 3
		nbytes := n * size
		if size == 0 {
			nbytes = n * dt.Bits() / 8
		}
		data := make([]byte, nbytes)
		for i := range data {
			data[i] = byte(rng.Uint32())
		}
		shape := []int64{int64(n)}
		x := safetensors.NewTensorBytes(safetensors.TensorInfo{Name: dt.String(), DType: dt, Shape: shape, DataOffsets: [2]int64{0, int64(nbytes)}}, data, "")
		got, err := stats.Tensor(context.Background(), x, stats.WithChunkSize(64<<10))
		if err != nil {
			t.Fatalf("%s: %v", dt, err)
		}
		nf, _ := stats.CountNonFinite(dt, data)
		if got.NonFinite != nf {
			t.Errorf("%s: stats counted %+v, CountNonFinite %+v", dt, got.NonFinite, nf)
		}
		if got.Decoded != safetensors.CanDecode(dt) {
			t.Errorf("%s: Decoded %v", dt, got.Decoded)
		}
		if !got.Decoded {
			continue
		}
		v := make([]float64, n)
		if err := safetensors.DecodeFloat64(v, data, dt); err != nil {
			t.Fatal(err)
		}
		w := naive(v)
		w.Name = dt.String()
		check(t, got, w)
	}
}

func TestComputeErrors(t *testing.T) {
	path, _ := writeModel(t, 1000)
	raw, _ := os.ReadFile(path)
	r, _ := safetensors.NewReader(bytes.NewReader(raw), int64(len(raw)))
	if _, err := stats.Compute(context.Background(), r, []string{"nosuch"}); !errors.Is(err, safetensors.ErrTensorNotFound) {
		t.Errorf("missing name: %v", err)
	}
	for _, o := range []stats.Option{stats.WithWorkers(0), stats.WithChunkSize(10), stats.WithChunkSize(1 << 40), stats.WithProgress(nil)} {
		if _, err := stats.Compute(context.Background(), r, nil, o); !errors.Is(err, stats.ErrOption) {
			t.Errorf("bad option: %v", err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := stats.Compute(ctx, r, nil); !errors.Is(err, context.Canceled) {
		t.Errorf("canceled: %v", err)
	}
	// Bytes missing under the header: an I/O error, not a format error.
	short, _ := safetensors.NewReader(bytes.NewReader(raw[:len(raw)-100]), int64(len(raw)))
	_, err := stats.Compute(context.Background(), short, nil)
	var fe *safetensors.FormatError
	if err == nil || errors.As(err, &fe) {
		t.Errorf("truncated: %v", err)
	}
}

func TestEstimate(t *testing.T) {
	infos := []safetensors.TensorInfo{
		{Name: "w", DType: safetensors.BF16, Shape: []int64{3, 5}, DataOffsets: [2]int64{0, 30}},
		{Name: "ids", DType: safetensors.I64, Shape: []int64{4}, DataOffsets: [2]int64{30, 62}},
		{Name: "s", DType: safetensors.F32, Shape: []int64{}, DataOffsets: [2]int64{62, 66}},
	}
	m := stats.EstimateInfos(infos)
	want := stats.Memory{
		Tensors: 3, Params: 15 + 4 + 1, FloatParams: 16, Stored: 66,
		F32: 16*4 + 32, F16: 16*2 + 32, INT8: 16 + 32, INT4: 8 + 1 + 32,
		Adam:    2*30 + 15*8 + 2*4 + 1*8 + 32,
		AdamF32: 16*16 + 32, AdamMixed: 16*16 + 32,
	}
	if m != want {
		t.Errorf("got  %+v\nwant %+v", m, want)
	}
	huge := stats.EstimateInfos([]safetensors.TensorInfo{{DType: safetensors.F32, Shape: []int64{1 << 62, 4}}})
	if huge.F32 != math.MaxInt64 || huge.AdamF32 != math.MaxInt64 {
		t.Errorf("overflow not saturated: %+v", huge)
	}
}

// TestExactIntegerExtremes: I64 and U64 extremes are kept exactly (float64
// rounds MaxInt64 up to 2^63), across chunks and workers.
func TestExactIntegerExtremes(t *testing.T) {
	i64 := make([]int64, 10000)
	u64 := make([]uint64, 10000)
	for i := range i64 {
		i64[i], u64[i] = int64(i), uint64(i)+5
	}
	i64[7777], i64[123] = math.MaxInt64, math.MinInt64+1
	u64[9999] = math.MaxUint64 - 1
	a, _ := safetensors.FromSlice("i", []int64{10000}, i64)
	b, _ := safetensors.FromSlice("u", []int64{10000}, u64)
	for _, tc := range []struct {
		x      *safetensors.Tensor
		lo, hi string
	}{{a, "-9223372036854775807", "9223372036854775807"}, {b, "5", "18446744073709551614"}} {
		s, err := stats.Tensor(context.Background(), tc.x, stats.WithChunkSize(64<<10), stats.WithWorkers(3))
		if err != nil {
			t.Fatal(err)
		}
		lo, ok1 := s.ExactMin()
		hi, ok2 := s.ExactMax()
		if !ok1 || !ok2 || lo != tc.lo || hi != tc.hi {
			t.Errorf("%s: exact %s %s, want %s %s", tc.x.Name, lo, hi, tc.lo, tc.hi)
		}
	}
}
