package remote

import (
	"bytes"
	"context"
	"testing"

	safetensors "github.com/gosafetensors/safetensors"
)

// TestTensorSliceOverHTTP: a slice through the root package's Reader over a
// File equals the same slice of the local bytes.
func TestTensorSliceOverHTTP(t *testing.T) {
	const rows, cols = 64, 96
	w := randomBytes(rows*cols*4, 50)
	data, err := safetensors.Marshal([]safetensors.TensorData{
		{Name: "w", DType: safetensors.F32, Shape: []int64{rows, cols}, Data: w},
		{Name: "b", DType: safetensors.F32, Shape: []int64{cols}, Data: w[:cols*4]},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	srv := newRangeServer(t, data)
	f, err := Open(context.Background(), srv.URL+"/m", WithPrefetch(200))
	if err != nil {
		t.Fatal(err)
	}
	rr, err := safetensors.NewReader(f, f.Size())
	if err != nil {
		t.Fatal(err)
	}
	lr, err := safetensors.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	for _, spec := range []string{"0:8, :", ":, 10:22", "5, ::3", "-4:, -1"} {
		idx, err := safetensors.ParseSlice(spec)
		if err != nil {
			t.Fatal(err)
		}
		get := func(r *safetensors.Reader) []byte {
			tn, err := r.Tensor("w")
			if err != nil {
				t.Fatal(err)
			}
			s, err := tn.Slice(idx...)
			if err != nil {
				t.Fatalf("%s: %v", spec, err)
			}
			b, err := s.Copy()
			if err != nil {
				t.Fatalf("%s: %v", spec, err)
			}
			return b
		}
		before := srv.requests.Load()
		if !bytes.Equal(get(rr), get(lr)) {
			t.Errorf("slice %s differs", spec)
		}
		// 64 rows: at most one multi-range request of 64 ranges.
		if n := srv.requests.Load() - before; n != 1 {
			t.Errorf("slice %s: %d requests", spec, n)
		}
	}
}
