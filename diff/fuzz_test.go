package diff_test

import (
	"bytes"
	"context"
	"math"
	"testing"

	"github.com/gosafetensors/safetensors"
	"github.com/gosafetensors/safetensors/diff"
)

// FuzzCompare compares arbitrary bytes as two tensors of one dtype: never a
// panic, and the counts match a direct comparison of the decoded values.
func FuzzCompare(f *testing.F) {
	f.Add([]byte{0, 0, 0x80, 0x3F, 0, 0, 0xC0, 0x7F}, []byte{0, 0, 0x80, 0x3F, 0, 0, 0x80, 0x7F}, uint8(safetensors.F32))
	f.Add([]byte{1, 2, 3, 4}, []byte{1, 2, 3, 5}, uint8(safetensors.I16))
	f.Add([]byte{0, 0, 0x80, 0x3F, 0, 0, 0x80, 0x40, 0, 0, 0x80, 0x7F, 0, 0, 0, 0}, []byte{0, 0, 0x80, 0x3F, 0, 0, 0, 0, 0, 0, 0x80, 0x7F, 0, 0, 0x80, 0x3F}, uint8(safetensors.C64))
	f.Fuzz(func(t *testing.T, a, b []byte, d uint8) {
		dt := safetensors.DType(d % uint8(len(safetensors.DTypes())))
		n := min(len(a), len(b))
		a, b = a[:n], b[:n]
		if n == 0 || int64(n)*8%int64(dt.Bits()) != 0 {
			return
		}
		mk := func(x []byte) safetensors.Source {
			info := safetensors.TensorInfo{Name: "t", DType: dt, Shape: []int64{int64(n) * 8 / int64(dt.Bits())}}
			file, err := safetensors.Marshal([]safetensors.TensorData{{Name: "t", DType: dt, Shape: info.Shape, Data: x}}, nil)
			if err != nil {
				t.Fatal(err)
			}
			r, err := safetensors.NewReader(bytesReader(file), int64(len(file)))
			if err != nil {
				t.Fatal(err)
			}
			return r
		}
		r, err := diff.Compare(context.Background(), mk(a), mk(b))
		if err != nil {
			t.Fatal(err)
		}
		got := r.Tensors[0]
		if got.Identical != (string(a) == string(b)) {
			t.Fatalf("identical %v for %x %x", got.Identical, a, b)
		}
		if dt == safetensors.C64 { // complex elements: the reference of the dtype tests
			w := want(t, dt, dt, a, b, 0)
			if got.Count != w.Count || got.Differing != w.Differing || math.Float64bits(got.MaxAbs) != math.Float64bits(w.MaxAbs) ||
				math.Float64bits(got.MaxRel) != math.Float64bits(w.MaxRel) {
				t.Fatalf("C64: %+v, want %+v", got, w)
			}
			return
		}
		dec := dt
		if !safetensors.CanDecode(dec) || dt == safetensors.I64 || dt == safetensors.U64 {
			return
		}
		k, _ := safetensors.ElementCount(dec, n)
		va, vb := make([]float64, k), make([]float64, k)
		safetensors.DecodeFloat64(va, a, dec)
		safetensors.DecodeFloat64(vb, b, dec)
		d2, ma, mr := expected(va, vb, 0)
		if got.Differing != d2 || got.MaxAbs != ma || got.MaxRel != mr && !(mr != mr) {
			t.Fatalf("%s: %+v, want differing %d max abs %v max rel %v", dt, got, d2, ma, mr)
		}
	})
}

func bytesReader(b []byte) *bytes.Reader { return bytes.NewReader(b) }
