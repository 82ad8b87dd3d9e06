package torch

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/gosafetensors/safetensors/torch/torchtest"
)

// rewrite describes the tensors of c as torchtest input, sharing storages
// and memo references exactly like the original.
func rewrite(t testing.TB, c *Checkpoint) []torchtest.Tensor {
	t.Helper()
	var out []torchtest.Tensor
	seen := map[*Storage]bool{}
	for _, e := range c.Entries {
		if e.Tensor == nil {
			t.Skipf("non-tensor entry %q", e.Name)
		}
		if e.Name == "" || c.Root != "dict" && c.Root != "OrderedDict" {
			t.Skipf("root is not a dict")
		}
		tn := e.Tensor
		tt := torchtest.Tensor{
			Name: e.Name, DType: tn.DType.String(), Shape: tn.Shape, Stride: tn.Stride, Offset: tn.Offset,
			RequiresGrad: tn.RequiresGrad, Parameter: tn.IsParameter, SameAs: e.SameAs,
			Storage: tn.Storage.Key, Location: tn.Storage.Location,
		}
		if e.SameAs == "" && !seen[tn.Storage] {
			seen[tn.Storage] = true
			b, err := io.ReadAll(tn.Storage.Section())
			if err != nil {
				t.Fatal(err)
			}
			if b == nil {
				b = []byte{}
			}
			tt.Data = b
		}
		out = append(out, tt)
	}
	return out
}

func zipMember(t testing.TB, data []byte, suffix string) []byte {
	t.Helper()
	z, err := readZip(bytes.NewReader(data), int64(len(data)), &Limits{MaxZipEntries: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range z.Entries {
		if len(e.Name) >= len(suffix) && e.Name[len(e.Name)-len(suffix):] == suffix {
			b, err := z.readSmall(e, 1<<30)
			if err != nil {
				t.Fatal(err)
			}
			return b
		}
	}
	t.Fatalf("no member %s", suffix)
	return nil
}

// byteIdentical lists fixtures torchtest reproduces byte for byte.
var byteIdentical = map[string]bool{
	"dtypes.pt": true, "shared_views.pt": true, "overlapping_views.pt": true, "noncontiguous.pt": true,
	"many_tensors.pt": true, "large_dims.pt": true, "location_cuda.pt": true, "empty_state_dict.pt": true,
}

// TestWriterMatchesTorch rewrites real torch checkpoints with torchtest and
// checks that our reader sees the same tensors in both, and that the bytes
// torchtest writes are the bytes torch wrote.
func TestWriterMatchesTorch(t *testing.T) {
	for _, ie := range readIndex(t, "torch") {
		path := filepath.Join(testdata, "torch", ie.File)
		sc := readSidecar(t, path+".json")
		if sc.Format != "zip" || ie.Expect != "convert" {
			continue
		}
		t.Run(ie.File, func(t *testing.T) {
			orig, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			c, err := NewReader(bytes.NewReader(orig), int64(len(orig)), path)
			if err != nil {
				t.Fatal(err)
			}
			tensors := rewrite(t, c)
			var buf bytes.Buffer
			if err := torchtest.WriteZip(&buf, tensors, torchtest.Options{Prefix: c.Prefix, PlainDict: c.Root == "dict"}); err != nil {
				t.Fatal(err)
			}
			c2, err := NewReader(bytes.NewReader(buf.Bytes()), int64(buf.Len()), "rewritten")
			if err != nil {
				t.Fatal(err)
			}
			checkTensors(t, c2, sc.Tensors, true)
			samePkl := bytes.Equal(zipMember(t, orig, "/data.pkl"), zipMember(t, buf.Bytes(), "/data.pkl"))
			sameFile := bytes.Equal(orig, buf.Bytes())
			t.Logf("data.pkl identical: %v, whole file identical: %v", samePkl, sameFile)
			if byteIdentical[ie.File] && !sameFile {
				t.Errorf("torchtest output differs from torch's file")
			}
			if ie.File == "shapes.pt" && !samePkl {
				t.Errorf("torchtest data.pkl differs from torch's")
			}
		})
	}
}
