package safetensors

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// FuzzHeader feeds arbitrary files to the reader: it must never panic, every
// error must be a *FormatError with a variant, and an accepted file must
// survive a round trip through the writer.
func FuzzHeader(f *testing.F) {
	for _, dir := range []string{"testdata/safetensors/files", "testdata/torch"} {
		paths, _ := filepath.Glob(filepath.Join(dir, "*.safetensors"))
		for _, p := range paths {
			if b, err := os.ReadFile(p); err == nil && len(b) < 1<<16 {
				f.Add(b)
			}
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := NewReader(bytes.NewReader(b), int64(len(b)))
		if err != nil {
			var fe *FormatError
			if !errors.As(err, &fe) || fe.Variant() == "" {
				t.Fatalf("error without variant: %v", err)
			}
			return
		}
		if r.FileSize() != int64(len(b)) {
			t.Fatalf("accepted file of %d bytes, header describes %d", len(b), r.FileSize())
		}
		var tensors []TensorData
		for x, err := range r.All() {
			if err != nil {
				t.Fatal(err)
			}
			data, err := x.Bytes()
			if err != nil {
				t.Fatal(err)
			}
			if _, err := x.Slice(); err != nil {
				t.Fatalf("whole-tensor slice of %q: %v", x.Name, err)
			}
			tensors = append(tensors, TensorData{Name: x.Name, DType: x.DType, Shape: x.Shape, Data: data})
		}
		out, err := Marshal(tensors, r.Metadata)
		if err != nil {
			t.Fatalf("cannot re-serialize an accepted file: %v", err)
		}
		r2, err := NewReader(bytes.NewReader(out), int64(len(out)))
		if err != nil {
			t.Fatalf("re-serialized file rejected: %v", err)
		}
		if r2.Len() != r.Len() {
			t.Fatal("round trip changed the tensor count")
		}
		for _, td := range tensors {
			x, err := r2.Tensor(td.Name)
			if err != nil {
				t.Fatal(err)
			}
			got, _ := x.Bytes()
			if !bytes.Equal(got, td.Data) || x.DType != td.DType {
				t.Fatalf("round trip changed tensor %q", td.Name)
			}
		}
	})
}

// FuzzSlice parses arbitrary slice specs and applies them to a small tensor:
// no panics, and any result has as many bytes as its shape needs.
func FuzzSlice(f *testing.F) {
	for _, s := range []string{"", "0", "-1", "0:2,:,-1", "::2", "1:3:2,0", ":,:,:", "5", "2:1", "a", "::-1", "-9223372036854775808:", "9223372036854775807", ":,::9223372036854775807"} {
		f.Add(s, uint8(0))
	}
	f.Fuzz(func(t *testing.T, spec string, dt uint8) {
		dtype := DType(dt % uint8(numDTypes))
		shape := []int64{3, 4, 8}
		size, _ := byteSize(dtype, shape)
		data := make([]byte, size)
		for i := range data {
			data[i] = byte(i % 251)
		}
		b, err := Marshal([]TensorData{{Name: "x", DType: dtype, Shape: shape, Data: data}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		r, err := NewReader(bytes.NewReader(b), int64(len(b)))
		if err != nil {
			t.Fatal(err)
		}
		x, _ := r.Tensor("x")
		idx, err := ParseSlice(spec)
		if err != nil {
			return
		}
		s, err := x.Slice(idx...)
		if err != nil {
			return
		}
		got, _ := s.Bytes()
		want, err := byteSize(dtype, s.Shape)
		if err != nil || int64(len(got)) != want {
			t.Fatalf("slice %q: %d bytes for shape %v of %s", spec, len(got), s.Shape, dtype)
		}
		if dtype == U8 {
			if oracle := naiveSlice(shape, idx); !bytes.Equal(got, oracle) {
				t.Fatalf("slice %q: got %v, element-by-element reference %v", spec, got, oracle)
			}
		}
	})
}

// naiveSlice selects from a U8 tensor whose element i holds byte i%251 by
// enumerating positions one by one, the way Python does, as an independent
// reference for the run planner.
func naiveSlice(shape []int64, idx []Selector) []byte {
	positions := make([][]int64, len(shape))
	for d, n := range shape {
		x := All()
		if d < len(idx) {
			x = idx[d]
		}
		norm := func(v int64) int64 {
			if v < 0 {
				return v + n
			}
			return v
		}
		if x.Single {
			positions[d] = []int64{norm(x.Start)}
			continue
		}
		start, stop, step := int64(0), n, x.Step
		if step == 0 {
			step = 1
		}
		if x.HasStart {
			start = norm(x.Start)
		}
		if x.HasStop {
			stop = norm(x.Stop)
		}
		for p := start; p < stop; {
			positions[d] = append(positions[d], p)
			if step > stop-p {
				break
			}
			p += step
		}
	}
	var out []byte
	var walk func(d int, off int64)
	walk = func(d int, off int64) {
		if d == len(shape) {
			out = append(out, byte(off%251))
			return
		}
		for _, p := range positions[d] {
			walk(d+1, off*shape[d]+p)
		}
	}
	walk(0, 0)
	return out
}
