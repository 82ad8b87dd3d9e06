package convert_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

	"github.com/gosafetensors/safetensors/convert"
	"github.com/gosafetensors/safetensors/torch"
)

// TestConvertAllow (16.3): a checkpoint whose pickle holds
// argparse.Namespace converts only when the caller allows it; the
// Namespace is skipped, never written as a tensor.
func TestConvertAllow(t *testing.T) {
	in := "../testdata/oracle/argparse_namespace.pt"
	out := filepath.Join(t.TempDir(), "out.safetensors")
	if _, err := convert.File(context.Background(), in, out); !errors.Is(err, torch.ErrNotAllowed) {
		t.Fatalf("without WithAllow: %v, want ErrNotAllowed", err)
	}
	rep, err := convert.File(context.Background(), in, out, convert.WithAllow("argparse.Namespace"))
	if err != nil {
		t.Fatal(err)
	}
	if rep.Unwrapped != "state_dict" || len(rep.Tensors) != 4 {
		t.Errorf("unwrapped %q, %d tensors", rep.Unwrapped, len(rep.Tensors))
	}
	found := false
	for _, s := range rep.Skipped {
		if s.Name == "hparams" {
			found = s.Kind == "object"
		}
	}
	if !found {
		t.Errorf("hparams not skipped as an object: %+v", rep.Skipped)
	}
	if _, err := convert.File(context.Background(), in, out, convert.WithAllow("posix.system")); !errors.Is(err, convert.ErrOption) {
		t.Errorf("WithAllow(posix.system): %v, want ErrOption", err)
	}
	// values torch.save writes with inert globals convert without WithAllow
	for _, f := range []string{"set_p2.pt", "device_value.pt", "dtype_value.pt", "set_frozenset_p4.pt", "bytearray_p5.pt", "tuple_key.pt"} {
		rep, err := convert.PlanFile(context.Background(), "../testdata/oracle/"+f)
		if err != nil || len(rep.Tensors) != 1 || rep.Tensors[0].Name != "w" {
			t.Errorf("%s: %v %+v", f, err, rep)
		}
	}
}
