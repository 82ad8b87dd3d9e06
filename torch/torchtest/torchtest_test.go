package torchtest

import (
	"archive/zip"
	"bytes"
	"io"
	"testing"
)

// TestArchiveLayout checks the written archive with the standard library's
// zip reader, independent of package torch: one prefix, data.pkl, version,
// one record per storage holding the exact bytes, data 64-byte aligned.
func TestArchiveLayout(t *testing.T) {
	var buf bytes.Buffer
	w := []byte{1, 2, 3, 4, 5, 6, 7, 8}
	err := WriteZip(&buf, []Tensor{
		{Name: "w", DType: "F32", Shape: []int64{2}, Data: w},
		{Name: "b", DType: "I64", Shape: []int64{1}, Data: make([]byte, 8)},
	}, Options{Prefix: "model"})
	if err != nil {
		t.Fatal(err)
	}
	zr, err := zip.NewReader(bytes.NewReader(buf.Bytes()), int64(buf.Len()))
	if err != nil {
		t.Fatal(err)
	}
	names := map[string][]byte{}
	for _, f := range zr.File {
		if f.Method != zip.Store {
			t.Errorf("%s is not STORED", f.Name)
		}
		off, err := f.DataOffset()
		if err != nil || off%64 != 0 {
			t.Errorf("%s data at offset %d (%v), want a multiple of 64", f.Name, off, err)
		}
		rc, err := f.Open()
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(rc) // verifies the CRC
		if err != nil {
			t.Fatalf("%s: %v", f.Name, err)
		}
		names[f.Name] = b
	}
	for _, want := range []string{"model/data.pkl", "model/version", "model/data/0", "model/data/1"} {
		if _, ok := names[want]; !ok {
			t.Errorf("missing %s (have %v)", want, len(names))
		}
	}
	if !bytes.Equal(names["model/data/0"], w) {
		t.Errorf("storage 0 holds %v", names["model/data/0"])
	}
	if ItemSize("BF16") != 2 || ItemSize("F8_E4M3") != 1 || ItemSize("nope") != 0 {
		t.Error("ItemSize")
	}
}
