package safetensors

import (
	"bytes"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// TestRoundTripReference re-serializes every file written by Hugging Face's
// serializer and compares: byte for byte where metadata order cannot differ
// (at most one key; the reference's key order is not deterministic), else
// header content and data.
func TestRoundTripReference(t *testing.T) {
	files, err := filepath.Glob("testdata/torch/*.safetensors")
	if err != nil || len(files) < 20 {
		t.Fatalf("found %d reference files (%v)", len(files), err)
	}
	for _, path := range files {
		t.Run(filepath.Base(path), func(t *testing.T) {
			orig, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			f, err := Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			var tensors []TensorData
			for tn, err := range f.All() {
				if err != nil {
					t.Fatal(err)
				}
				b, err := tn.Bytes()
				if err != nil {
					t.Fatal(err)
				}
				tensors = append(tensors, TensorData{Name: tn.Name, DType: tn.DType, Shape: tn.Shape, Data: b})
			}
			out, err := Marshal(tensors, f.Metadata)
			if err != nil {
				t.Fatal(err)
			}
			if len(f.Metadata) <= 1 {
				if !bytes.Equal(out, orig) {
					t.Fatalf("re-serialized file differs:\n got %q\nwant %q", head(out), head(orig))
				}
				return
			}
			r, err := NewReader(bytes.NewReader(out), int64(len(out)))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(r.Tensors, f.Tensors) || !maps.Equal(r.Metadata, f.Metadata) || r.Size != f.Size {
				t.Fatalf("headers differ")
			}
			if !bytes.Equal(out[r.DataOffset():], orig[f.DataOffset():]) {
				t.Fatalf("data differs")
			}
		})
	}
}

func head(b []byte) []byte {
	if len(b) < 8 {
		return b
	}
	n := int(b[0]) | int(b[1])<<8 | int(b[2])<<16
	if 8+n > len(b) {
		return b
	}
	return b[:8+n]
}
