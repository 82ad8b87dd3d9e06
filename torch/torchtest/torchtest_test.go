package torchtest

import (
	"archive/zip"
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/gosafetensors/safetensors/internal/torchoracle"
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

// TestTorchLoadsWhatIsWritten: real torch (internal/torchoracle) loads
// what WriteZip and WriteLegacy write, with the tensors they were given.
func TestTorchLoadsWhatIsWritten(t *testing.T) {
	o := torchoracle.Require(t, torchoracle.Options{Allow: []string{"collections.OrderedDict", "torch._utils._rebuild_tensor_v2"}})
	i64 := binary.LittleEndian.AppendUint64(binary.LittleEndian.AppendUint64(nil, 1), 2)
	tensors := []Tensor{
		{Name: "a", DType: "F32", Shape: []int64{2, 3}, Data: make([]byte, 24)},
		{Name: "b", DType: "I64", Shape: []int64{2}, Data: i64},
		{Name: "c", DType: "BF16", Shape: []int64{}, Data: []byte{0x80, 0x3f}},
		{Name: "d", DType: "F32", Shape: []int64{1000}, DataSize: 4000, Fill: func(w io.Writer) error { _, err := w.Write(make([]byte, 4000)); return err }},
	}
	for _, write := range []func(io.Writer, []Tensor, Options) error{WriteZip, WriteLegacy} {
		var buf bytes.Buffer
		if err := write(&buf, tensors, Options{}); err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(t.TempDir(), "m.pt")
		if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		r, err := o.Load(path)
		if err != nil {
			t.Fatal(err)
		}
		if !r.Loaded || len(r.Tensors) != len(tensors) {
			t.Fatalf("torch.load: loaded %v, %d tensors, %s", r.Loaded, len(r.Tensors), r.Error)
		}
		for i, tn := range r.Tensors {
			data := tensors[i].Data
			if data == nil {
				data = make([]byte, tensors[i].DataSize)
			}
			if sum := sha256.Sum256(data); tn.Name != tensors[i].Name || tn.DType != tensors[i].DType || tn.SHA256 != hex.EncodeToString(sum[:]) {
				t.Errorf("tensor %d: torch gives %+v", i, tn)
			}
		}
	}
}
