package safetensors

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// sample builds a small file with several dtypes, in memory and on disk.
func sample(t *testing.T) (string, []byte) {
	t.Helper()
	f64 := make([]byte, 16)
	copy(f64, []byte{0, 0, 0, 0, 0, 0, 0xf0, 0x3f}) // 1.0
	b, err := Marshal([]TensorData{
		{Name: "i16", DType: I16, Shape: []int64{2}, Data: []byte{0xff, 0xff, 2, 0}},
		{Name: "u32", DType: U32, Shape: []int64{1}, Data: []byte{1, 0, 0, 0}},
		{Name: "f64", DType: F64, Shape: []int64{2}, Data: f64},
		{Name: "i64", DType: I64, Shape: []int64{1}, Data: []byte{0xfe, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}},
		{Name: "u8", DType: U8, Shape: []int64{3}, Data: []byte{7, 8, 9}},
	}, map[string]string{"k": "v"})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "s.safetensors")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return path, b
}

func TestAccessors(t *testing.T) {
	path, b := sample(t)
	f, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	lazy, err := NewReader(bytes.NewReader(b), int64(len(b)), WithName("lazy"))
	if err != nil {
		t.Fatal(err)
	}
	if !f.Mapped() || f.Name() != path || lazy.Name() != "lazy" {
		t.Errorf("Mapped %v, names %q %q", f.Mapped(), f.Name(), lazy.Name())
	}
	info, ok := f.Info("u8")
	if !ok || info.NumElements() != 3 || info.Size() != 3 {
		t.Fatalf("Info: %+v %v", info, ok)
	}
	if _, ok := f.Info("nope"); ok {
		t.Error("Info found a missing tensor")
	}
	var order []string
	for name := range f.Header.All() {
		order = append(order, name)
	}
	if !slices.Equal(order, []string{"i64", "f64", "u32", "i16", "u8"}) {
		t.Errorf("file order %v", order)
	}
	if _, err := f.Tensor("nope"); !errors.Is(err, ErrTensorNotFound) || !strings.Contains(err.Error(), path) {
		t.Errorf("missing tensor: %v", err)
	}
	for _, r := range []*Reader{&f.Reader, lazy} {
		u8, err := r.Tensor("u8")
		if err != nil {
			t.Fatal(err)
		}
		if u8.Offset() != r.DataOffset()+info.DataOffsets[0] {
			t.Errorf("Offset %d", u8.Offset())
		}
		var w bytes.Buffer
		if n, err := u8.WriteTo(&w); err != nil || n != 3 || w.String() != "\x07\x08\x09" {
			t.Errorf("WriteTo: %d %v %q", n, err, w.String())
		}
		all, err := io.ReadAll(u8.Reader())
		if err != nil || string(all) != "\x07\x08\x09" {
			t.Errorf("Reader: %q %v", all, err)
		}
		p := make([]byte, 4)
		if n, err := u8.ReadAt(p, 1); n != 2 || err != io.EOF || p[0] != 8 {
			t.Errorf("ReadAt past the end: %d %v %v", n, err, p)
		}
		if _, err := u8.ReadAt(p, 4); err == nil {
			t.Error("ReadAt outside the tensor accepted")
		}
		c, err := u8.Copy()
		if err != nil || string(c) != "\x07\x08\x09" {
			t.Errorf("Copy: %q %v", c, err)
		}
		s, _ := u8.Slice(Range(1, 3))
		if s.Offset() != -1 {
			t.Error("a slice has no file offset")
		}
		if c, _ := s.Copy(); string(c) != "\x08\x09" {
			t.Errorf("Copy of a slice: %q", c)
		}
		check := func(name string, want []float32) {
			x, _ := r.Tensor(name)
			got, err := ToFloat32(x)
			if err != nil || !slices.Equal(got, want) {
				t.Errorf("ToFloat32(%s) = %v, %v; want %v", name, got, err, want)
			}
		}
		check("i16", []float32{-1, 2})
		check("u32", []float32{1})
		check("f64", []float32{1, 0})
		check("i64", []float32{-2})
		check("u8", []float32{7, 8, 9})
		i16, _ := r.Tensor("i16")
		if v, err := As[int16](i16); err != nil || !slices.Equal(v, []int16{-1, 2}) {
			t.Errorf("As[int16]: %v %v", v, err)
		}
		type celsius float64 // named types view like their underlying type
		f64, _ := r.Tensor("f64")
		if v, err := As[celsius](f64); err != nil || v[0] != 1 {
			t.Errorf("As[celsius]: %v %v", v, err)
		}
		i64, _ := r.Tensor("i64")
		if v, err := As[int64](i64); err != nil || v[0] != -2 {
			t.Errorf("As[int64]: %v %v", v, err)
		}
		if _, err := As[uint64](i64); !errors.Is(err, ErrDTypeMismatch) {
			t.Errorf("As[uint64] on I64: %v", err)
		}
	}
}

func TestMaxHeaderSizeOption(t *testing.T) {
	_, b := sample(t)
	if _, err := NewReader(bytes.NewReader(b), int64(len(b)), WithMaxHeaderSize(16)); !errors.Is(err, ErrHeaderTooLarge) {
		t.Fatalf("got %v", err)
	}
	if _, err := ReadHeader(bytes.NewReader(b), WithMaxHeaderSize(16)); !errors.Is(err, ErrHeaderTooLarge) {
		t.Fatalf("ReadHeader: %v", err)
	}
}

func TestDTypeText(t *testing.T) {
	b, err := json.Marshal(map[string]DType{"a": BF16})
	if err != nil || string(b) != `{"a":"BF16"}` {
		t.Fatalf("%s %v", b, err)
	}
	var m map[string]DType
	if err := json.Unmarshal(b, &m); err != nil || m["a"] != BF16 {
		t.Fatalf("%v %v", m, err)
	}
	if err := json.Unmarshal([]byte(`{"a":"bf16"}`), &m); err == nil {
		t.Fatal("lower case accepted")
	}
	if _, err := DType(99).MarshalText(); err == nil || DType(99).Valid() || DType(99).String() != "DType(99)" {
		t.Fatal("invalid dtype")
	}
	if F4.Size() != 0 || F4.Bits() != 4 || C64.Size() != 8 || len(DTypes()) != 22 {
		t.Fatal("sizes")
	}
}

func TestSwapToHost(t *testing.T) {
	b := []byte{1, 2, 3, 4, 5, 6, 7, 8}
	swapToHost(b, 4)
	if !bytes.Equal(b, []byte{4, 3, 2, 1, 8, 7, 6, 5}) {
		t.Fatalf("%v", b)
	}
	if math.Float32frombits(0x3f800000) != 1 {
		t.Fatal()
	}
}

func TestWriteTensorFrom(t *testing.T) {
	infos := []TensorInfo{{Name: "a", DType: U8, Shape: []int64{4}}}
	for _, c := range []struct {
		src  string
		fail bool
	}{{"abcd", false}, {"abc", true}, {"abcde", true}} {
		var buf bytes.Buffer
		w, _ := NewWriter(&buf, infos, nil)
		err := w.WriteTensorFrom("a", strings.NewReader(c.src))
		if (err != nil) != c.fail {
			t.Errorf("%q: %v", c.src, err)
		}
		if !c.fail {
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			if w.Header().Len() != 1 {
				t.Fatal("Header")
			}
		}
	}
}

// TestUnknownFieldsAndEscapes takes the token-by-token path: escaped names,
// unknown fields with nested values (warned), and duplicate keys inside
// them (refused).
func TestUnknownFieldsAndEscapes(t *testing.T) {
	mk := func(hdr string, data int) []byte {
		for len(hdr)%8 != 0 {
			hdr += " "
		}
		b := make([]byte, 8, 8+len(hdr)+data)
		b[0] = byte(len(hdr))
		b[1] = byte(len(hdr) >> 8)
		b = append(b, hdr...)
		return append(b, make([]byte, data)...)
	}
	ok := mk(`{"a\u0062":{"dtype":"U8","shape":[1],"data_offsets":[0,1],"x":{"y":[1,{"z":null}],"w":"s"}}}`, 1)
	r, err := NewReader(bytes.NewReader(ok), int64(len(ok)))
	if err != nil {
		t.Fatal(err)
	}
	if _, found := r.Info("ab"); !found || len(r.Warnings) != 1 || !strings.Contains(r.Warnings[0], `"x"`) {
		t.Fatalf("names %v, warnings %v", r.Names(), r.Warnings)
	}
	dup := mk(`{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1],"x":{"y":1,"y":2}}}`, 1)
	if _, err := NewReader(bytes.NewReader(dup), int64(len(dup))); !errors.Is(err, ErrInvalidHeaderDeserialization) || !strings.Contains(err.Error(), "duplicate") {
		t.Fatalf("duplicate inside an unknown field: %v", err)
	}
	dupField := mk(`{"a":{"dtype":"U8","dtype":"U8","shape":[1],"data_offsets":[0,1]}}`, 1)
	if _, err := NewReader(bytes.NewReader(dupField), int64(len(dupField))); !errors.Is(err, ErrInvalidHeaderDeserialization) || !strings.Contains(err.Error(), "duplicate") {
		t.Fatalf("duplicate field: %v", err)
	}
	dupMeta := mk(`{"__metadata__":{"k":"1","k":"2"}}`, 0)
	if _, err := NewReader(bytes.NewReader(dupMeta), int64(len(dupMeta))); !errors.Is(err, ErrInvalidHeaderDeserialization) || !strings.Contains(err.Error(), "duplicate") {
		t.Fatalf("duplicate metadata key: %v", err)
	}
}
