package convert

import (
	"bytes"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gosafetensors/safetensors"
	"github.com/gosafetensors/safetensors/torch"
)

// Every real checkpoint with a reference conversion (made by Hugging Face's
// converter, or .materialized with every view kept) reads through Source as
// that file: names, dtypes, shapes, metadata, bytes, and slices.
func TestSourceMatchesReferenceFiles(t *testing.T) {
	refs, _ := filepath.Glob("../testdata/torch/*.safetensors")
	tested := 0
	for _, ref := range refs {
		stem := strings.TrimSuffix(filepath.Base(ref), ".safetensors")
		keepAliases := false
		if s, ok := strings.CutSuffix(stem, ".materialized"); ok {
			stem, keepAliases = s, true
		}
		var ckpt string
		for _, ext := range []string{".pt", ".bin", ".pth", ".ckpt"} {
			if _, err := os.Stat("../testdata/torch/" + stem + ext); err == nil {
				ckpt = "../testdata/torch/" + stem + ext
			}
		}
		if ckpt == "" {
			continue
		}
		t.Run(filepath.Base(ref), func(t *testing.T) {
			c, err := torch.Open(ckpt)
			if err != nil {
				t.Fatal(err)
			}
			src, err := NewSource(c, ckpt, WithKeepAliases(keepAliases))
			if err != nil {
				t.Skipf("not convertible with these options: %v", err)
			}
			defer src.Close()
			want, err := safetensors.Open(ref)
			if err != nil {
				t.Fatal(err)
			}
			defer want.Close()
			if !slices.Equal(src.Names(), want.Names()) {
				if keepAliases || len(want.Meta()) > 2 {
					// documented differences (README): we keep views HF drops
					t.Skipf("names differ by design: %v vs %v", src.Names(), want.Names())
				}
				t.Fatalf("names %v, want %v", src.Names(), want.Names())
			}
			if !keepAliases && !maps.Equal(src.Meta(), want.Meta()) {
				t.Errorf("metadata %v, want %v", src.Meta(), want.Meta())
			}
			for _, name := range want.Names() {
				wi, _ := want.Info(name)
				si, ok := src.Info(name)
				if !ok || si.DType != wi.DType || !slices.Equal(si.Shape, wi.Shape) || si.Size() != wi.Size() {
					t.Fatalf("%s: info %+v, want %+v", name, si, wi)
				}
				st, err := src.Tensor(name)
				if err != nil {
					t.Fatal(err)
				}
				wt, _ := want.Tensor(name)
				got, err := st.Copy()
				if err != nil {
					t.Fatal(err)
				}
				wb, _ := wt.Bytes()
				if !bytes.Equal(got, wb) {
					t.Fatalf("%s: bytes differ", name)
				}
				if len(wi.Shape) >= 2 && wi.Shape[0] > 1 && wi.Shape[1] > 0 && wi.DType.Bits() >= 8 {
					idx := []safetensors.Selector{safetensors.Range(1, wi.Shape[0]), safetensors.Range(0, 1)}
					ss, err := st.Slice(idx...)
					if err != nil {
						t.Fatal(err)
					}
					ws, _ := wt.Slice(idx...)
					a, _ := ss.Bytes()
					b, _ := ws.Bytes()
					if !bytes.Equal(a, b) {
						t.Fatalf("%s: slice differs", name)
					}
				}
			}
			tested++
		})
	}
	if tested < 10 {
		t.Fatalf("only %d reference files compared", tested)
	}
	c, err := torch.Open("../testdata/torch/tied_weights.pt")
	if err != nil {
		t.Fatal(err)
	}
	src, err := NewSource(c, "tied")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := src.Tensor("nope"); !errors.Is(err, safetensors.ErrTensorNotFound) {
		t.Fatalf("missing tensor: %v", err)
	}
	src.Close()
}
