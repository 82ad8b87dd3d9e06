package safetensors_test

import (
	"bytes"
	"errors"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/gosafetensors/safetensors"
	"github.com/x448/float16"
)

func roundTrip[T safetensors.Number](t *testing.T, dt safetensors.DType, data []T) {
	t.Helper()
	x, err := safetensors.FromSlice("x", []int64{int64(len(data)), 1}, data)
	if err != nil {
		t.Fatal(err)
	}
	if x.DType != dt {
		t.Fatalf("%T stored as %s, want %s", data[0], x.DType, dt)
	}
	orig := slices.Clone(data)
	data[0] = data[1] // the tensor owns a copy
	path := filepath.Join(t.TempDir(), "m.safetensors")
	if err := safetensors.SaveFile(path, map[string]*safetensors.Tensor{"renamed": x}, nil); err != nil {
		t.Fatal(err)
	}
	m, meta, err := safetensors.LoadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if meta == nil || len(m) != 1 || m["renamed"] == nil {
		t.Fatalf("loaded %v, meta %v: want one tensor named by its map key", m, meta)
	}
	got, err := safetensors.As[T](m["renamed"])
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, orig) {
		t.Fatalf("%s: %v came back as %v", dt, orig, got)
	}
}

func TestFromSliceEveryNativeType(t *testing.T) {
	roundTrip(t, safetensors.I8, []int8{-128, 127, 3})
	roundTrip(t, safetensors.U8, []uint8{0, 255, 3})
	roundTrip(t, safetensors.I16, []int16{-32768, 32767, 3})
	roundTrip(t, safetensors.U16, []uint16{0, 65535, 3})
	roundTrip(t, safetensors.I32, []int32{math.MinInt32, math.MaxInt32, 3})
	roundTrip(t, safetensors.U32, []uint32{0, math.MaxUint32, 3})
	roundTrip(t, safetensors.I64, []int64{math.MinInt64, math.MaxInt64, 3})
	roundTrip(t, safetensors.U64, []uint64{0, math.MaxUint64, 3})
	roundTrip(t, safetensors.F32, []float32{-1.5, float32(math.Inf(1)), 3})
	roundTrip(t, safetensors.F64, []float64{-1.5, math.MaxFloat64, 3})
	roundTrip(t, safetensors.C64, []complex64{1 + 2i, -3i, 3})
}

func TestFromFloat32Rounding(t *testing.T) {
	in := []float32{1, 1.00390625 /* BF16 tie, rounds to even 1 */, 1.01171875 /* tie, rounds up */, 70000, -1e-8, float32(math.NaN())}
	for _, dt := range []safetensors.DType{safetensors.F16, safetensors.BF16, safetensors.F32, safetensors.F64} {
		x, err := safetensors.FromFloat32("w", []int64{2, 3}, in, dt)
		if err != nil {
			t.Fatal(err)
		}
		if x.DType != dt || !slices.Equal(x.Shape, []int64{2, 3}) {
			t.Fatalf("got %s %v", x.DType, x.Shape)
		}
		got, err := safetensors.ToFloat32(x)
		if err != nil {
			t.Fatal(err)
		}
		for i, f := range in {
			var want float32
			switch dt {
			case safetensors.F16:
				want = float16.Fromfloat32(f).Float32()
			case safetensors.BF16:
				want = safetensors.BF16ToFloat32(bf16Oracle(f))
			default:
				want = f
			}
			if !sameFloat(float64(got[i]), float64(want)) {
				t.Errorf("%s: %v stored as %v, want %v", dt, f, got[i], want)
			}
		}
	}
	// Spot values from the definition of rounding, not from a library.
	x, _ := safetensors.FromFloat32("w", []int64{3}, []float32{1.00390625, 1.01171875, 70000}, safetensors.BF16)
	b, _ := x.Bytes()
	if !bytes.Equal(b, []byte{0x80, 0x3f, 0x82, 0x3f, 0x89, 0x47}) {
		t.Errorf("BF16 bytes % x", b)
	}
	x, _ = safetensors.FromFloat32("h", []int64{2}, []float32{70000, 65519}, safetensors.F16)
	b, _ = x.Bytes()
	if !bytes.Equal(b, []byte{0x00, 0x7c, 0xff, 0x7b}) {
		t.Errorf("F16 70000, 65519 = % x, want Inf, 65504", b)
	}
}

func TestConstructorErrors(t *testing.T) {
	for _, shape := range [][]int64{{2}, {-1, -3}, {1 << 62, 1 << 62}, {}} {
		if _, err := safetensors.FromSlice("x", shape, []int16{1, 2, 3}); !errors.Is(err, safetensors.ErrWrite) {
			t.Errorf("shape %v for 3 elements: %v, want ErrWrite", shape, err)
		}
		if _, err := safetensors.FromFloat32("x", shape, []float32{1, 2, 3}, safetensors.BF16); !errors.Is(err, safetensors.ErrWrite) {
			t.Errorf("FromFloat32 shape %v: %v, want ErrWrite", shape, err)
		}
	}
	if _, err := safetensors.FromFloat32("x", []int64{1}, []float32{1}, safetensors.I32); !errors.Is(err, safetensors.ErrDTypeMismatch) {
		t.Errorf("FromFloat32 to I32: %v", err)
	}
	s, err := safetensors.FromSlice("s", nil, []float64{2.5})
	if err != nil || s.NumElements() != 1 || s.Shape == nil {
		t.Errorf("scalar: %v %v", s, err)
	}
}

func TestSaveFileAtomicOnError(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "m.safetensors")
	if err := os.WriteFile(path, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	good, _ := safetensors.FromSlice("a", []int64{2}, []float32{1, 2})
	// A tensor whose bytes do not match its dtype and shape.
	bad := safetensors.NewTensorBytes(safetensors.TensorInfo{Name: "b", DType: safetensors.F32, Shape: []int64{3}, DataOffsets: [2]int64{0, 12}}, []byte{1, 2, 3, 4}, "")
	for _, m := range []map[string]*safetensors.Tensor{
		{"a": good, "b": bad},
		{"a": good, "z": nil},
		{"a": good, "__metadata__": good},
	} {
		if err := safetensors.SaveFile(path, m, nil); err == nil {
			t.Errorf("SaveFile(%v) succeeded", slices.Sorted(mapsKeys(m)))
		}
		if b, _ := os.ReadFile(path); string(b) != "old" {
			t.Fatalf("destination changed to %q", b)
		}
		if ents, _ := os.ReadDir(dir); len(ents) != 1 {
			t.Fatalf("left behind: %v", ents)
		}
	}
}

func mapsKeys(m map[string]*safetensors.Tensor) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

func TestSaveFileMatchesWriteFile(t *testing.T) {
	dir := t.TempDir()
	a, _ := safetensors.FromSlice("a", []int64{2, 2}, []float32{1, 2, 3, 4})
	b, _ := safetensors.FromSlice("b", []int64{3}, []int8{-1, 0, 1})
	meta := map[string]string{"format": "pt"}
	p1, p2 := filepath.Join(dir, "1"), filepath.Join(dir, "2")
	if err := safetensors.SaveFile(p1, map[string]*safetensors.Tensor{"b": b, "a": a}, meta); err != nil {
		t.Fatal(err)
	}
	ab, _ := a.Bytes()
	bb, _ := b.Bytes()
	if err := safetensors.WriteFile(p2, []safetensors.TensorData{{Name: "a", DType: safetensors.F32, Shape: []int64{2, 2}, Data: ab}, {Name: "b", DType: safetensors.I8, Shape: []int64{3}, Data: bb}}, meta); err != nil {
		t.Fatal(err)
	}
	x, _ := os.ReadFile(p1)
	y, _ := os.ReadFile(p2)
	if !bytes.Equal(x, y) {
		t.Errorf("SaveFile and WriteFile differ:\n%q\n%q", x, y)
	}
	m, meta2, err := safetensors.LoadFile(p1)
	if err != nil || meta2["format"] != "pt" || len(m) != 2 {
		t.Fatalf("LoadFile: %v %v %v", m, meta2, err)
	}
	// A loaded file's tensors can be saved again straight from the map.
	if err := safetensors.SaveFile(p2, m, meta2); err != nil {
		t.Fatal(err)
	}
	z, _ := os.ReadFile(p2)
	if !bytes.Equal(x, z) {
		t.Error("load then save changed the file")
	}
}

func TestLoadFileErrors(t *testing.T) {
	_, _, err := safetensors.LoadFile(filepath.Join(t.TempDir(), "missing"))
	var fe *safetensors.FormatError
	if !errors.Is(err, fs.ErrNotExist) || errors.As(err, &fe) {
		t.Errorf("missing file: %v", err)
	}
	p := filepath.Join(t.TempDir(), "bad")
	os.WriteFile(p, []byte("\x04\x00\x00\x00\x00\x00\x00\x00{}  x"), 0o644)
	if _, _, err := safetensors.LoadFile(p); !errors.As(err, &fe) {
		t.Errorf("bad file: %v, want *FormatError", err)
	}
}
