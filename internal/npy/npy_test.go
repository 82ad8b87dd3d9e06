package npy

import (
	"bytes"
	"encoding/binary"
	"slices"
	"strings"
	"testing"

	"github.com/gosafetensors/safetensors"
)

func TestWriteHeaderRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		descr string
		shape []int64
		dict  string
	}{
		{"<f4", []int64{2, 3}, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }"},
		{"<i8", []int64{5}, "{'descr': '<i8', 'fortran_order': False, 'shape': (5,), }"},
		{"|b1", []int64{}, "{'descr': '|b1', 'fortran_order': False, 'shape': (), }"},
		{"<c8", []int64{0, 4, 1}, "{'descr': '<c8', 'fortran_order': False, 'shape': (0, 4, 1), }"},
	} {
		var b bytes.Buffer
		if err := WriteHeader(&b, tc.descr, tc.shape); err != nil {
			t.Fatal(err)
		}
		raw := b.Bytes()
		if len(raw)%64 != 0 || raw[len(raw)-1] != '\n' {
			t.Errorf("%v: header of %d bytes, last %q", tc.shape, len(raw), raw[len(raw)-1])
		}
		if !bytes.HasPrefix(raw, []byte(Magic+"\x01\x00")) {
			t.Errorf("%v: not version 1.0: %q", tc.shape, raw[:8])
		}
		if n := binary.LittleEndian.Uint16(raw[8:]); int(n) != len(raw)-10 {
			t.Errorf("%v: header length %d, want %d", tc.shape, n, len(raw)-10)
		}
		if got := strings.TrimRight(string(raw[10:]), " \n"); got != tc.dict {
			t.Errorf("dict %q, want %q", got, tc.dict)
		}
		h, err := ReadHeader(bytes.NewReader(append(raw, 1, 2, 3)))
		if err != nil {
			t.Fatal(err)
		}
		if h.Descr != tc.descr || h.FortranOrder || !slices.Equal(h.Shape, tc.shape) || h.DataOffset != int64(len(raw)) || h.Major != 1 {
			t.Errorf("read back %+v", h)
		}
	}
}

func TestWriteHeaderVersion2(t *testing.T) {
	shape := make([]int64, 30000) // ", 1" each: too long for a 16-bit length
	for i := range shape {
		shape[i] = 1
	}
	var b bytes.Buffer
	if err := WriteHeader(&b, "<f4", shape); err != nil {
		t.Fatal(err)
	}
	raw := b.Bytes()
	if raw[6] != 2 || len(raw)%64 != 0 {
		t.Fatalf("version %d, %d bytes", raw[6], len(raw))
	}
	if n := binary.LittleEndian.Uint32(raw[8:]); int(n) != len(raw)-12 {
		t.Errorf("header length %d, want %d", n, len(raw)-12)
	}
	h, err := ReadHeader(&b)
	if err != nil {
		t.Fatal(err)
	}
	if h.Major != 2 || len(h.Shape) != len(shape) || h.DataOffset != int64(len(raw)) {
		t.Errorf("read back version %d, %d dims", h.Major, len(h.Shape))
	}
}

func TestWriteHeaderRejects(t *testing.T) {
	var b bytes.Buffer
	if err := WriteHeader(&b, "<f4", []int64{-1}); err == nil {
		t.Error("negative dimension accepted")
	}
	if err := WriteHeader(&b, "<f4'", []int64{1}); err == nil {
		t.Error("quote in descr accepted")
	}
}

func TestReadHeaderNumpyOutput(t *testing.T) {
	// Written by numpy 1.26: np.save(f, np.zeros((2, 3), dtype='>f8'), fortran order.
	dict := "{'descr': '>f8', 'fortran_order': True, 'shape': (2, 3), }"
	hdr := dict + strings.Repeat(" ", 128-10-len(dict)-1) + "\n"
	raw := append([]byte(Magic+"\x01\x00"), byte(len(hdr)), 0)
	raw = append(raw, hdr...)
	h, err := ReadHeader(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	if h.Descr != ">f8" || !h.FortranOrder || !slices.Equal(h.Shape, []int64{2, 3}) {
		t.Errorf("%+v", h)
	}
	for _, bad := range []string{"", "\x93NUMPX\x01\x00\x00\x00", Magic + "\x01\x00\x05\x00{'a'}"} {
		if _, err := ReadHeader(strings.NewReader(bad)); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestDescr(t *testing.T) {
	want := map[safetensors.DType]string{
		safetensors.BOOL: "|b1", safetensors.U8: "|u1", safetensors.I8: "|i1", safetensors.I16: "<i2",
		safetensors.U16: "<u2", safetensors.F16: "<f2", safetensors.I32: "<i4", safetensors.U32: "<u4",
		safetensors.F32: "<f4", safetensors.I64: "<i8", safetensors.U64: "<u8", safetensors.F64: "<f8",
		safetensors.C64: "<c8",
	}
	for _, d := range safetensors.DTypes() {
		got, ok := Descr(d)
		if w, has := want[d]; got != w || ok != has {
			t.Errorf("Descr(%s) = %q, %v; want %q", d, got, ok, w)
		}
	}
}
