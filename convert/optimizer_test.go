package convert_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/gosafetensors/safetensors/convert"
)

// TestOptimizerStateByStructure (14.5): optimizer state is recognised by
// its shape (state keyed by ints, param_groups listing params) wherever it
// sits, for skipping and for unwrapping; model_state_dict and DeepSpeed's
// module are unwrapped. The files are torch.save output (testdata/oracle,
// make_checkpoints.py).
func TestOptimizerStateByStructure(t *testing.T) {
	for _, c := range []struct {
		file, unwrapped, optimizer string
		weights                    []string
	}{
		{"general_checkpoint.pt", "model_state_dict", "optimizer_state_dict", []string{"0.weight", "0.bias", "2.weight", "2.bias"}},
		{"fairseq_style.pt", "model", "last_optimizer_state", []string{"0.weight", "0.bias", "2.weight", "2.bias"}},
		{"model_and_optimizer_state_dict.pt", "model", "optimizer_state_dict", []string{"0.weight", "0.bias", "2.weight", "2.bias"}},
		{"deepspeed_module.pt", "module", "", []string{"0.weight", "0.bias", "2.weight", "2.bias"}},
		{"optimizer_odd_name.pt", "", "opt", []string{"w"}},
		{"fresh_sgd_beside_model.pt", "model", "", []string{"0.weight", "0.bias", "2.weight", "2.bias"}},
	} {
		rep, err := convert.PlanFile(context.Background(), "../testdata/oracle/"+c.file)
		if err != nil {
			t.Errorf("%s: %v", c.file, err)
			continue
		}
		var names []string
		for _, tr := range rep.Tensors {
			names = append(names, tr.Name)
		}
		slices.Sort(names)
		slices.Sort(c.weights)
		if rep.Unwrapped != c.unwrapped || strings.Join(names, ",") != strings.Join(c.weights, ",") {
			t.Errorf("%s: unwrapped %q, tensors %v; want %q, %v", c.file, rep.Unwrapped, names, c.unwrapped, c.weights)
		}
		skipped := 0
		for _, s := range rep.Skipped {
			if s.Kind == "tensor" && c.optimizer != "" && strings.HasPrefix(s.Name, c.optimizer+".") {
				skipped++
				if s.Reason != "optimizer state" {
					t.Errorf("%s: %s skipped as %q, want optimizer state", c.file, s.Name, s.Reason)
				}
			}
		}
		if c.optimizer != "" && skipped == 0 {
			t.Errorf("%s: no tensor of %s reported as skipped optimizer state: %+v", c.file, c.optimizer, rep.Skipped)
		}
	}
}

// TestNoModelTensors (14.5): a checkpoint that holds only optimizer state
// is an error, not an empty file.
func TestNoModelTensors(t *testing.T) {
	_, err := convert.PlanFile(context.Background(), "../testdata/oracle/bare_optimizer.pt")
	if !errors.Is(err, convert.ErrInput) || !strings.Contains(err.Error(), "no model tensors") {
		t.Fatalf("bare optimizer state: %v, want ErrInput saying no model tensors", err)
	}
	// an explicit WithKey still converts the optimizer's tensors
	rep, err := convert.PlanFile(context.Background(), "../testdata/oracle/bare_optimizer.pt", convert.WithKey("state"))
	if err != nil || len(rep.Tensors) == 0 {
		t.Fatalf("WithKey(state): %v %+v", err, rep)
	}
	// an empty state dict is still an (empty) model
	if _, err := convert.PlanFile(context.Background(), "../testdata/torch/empty_state_dict.pt"); err != nil {
		t.Fatalf("empty state dict: %v", err)
	}
}

// TestBareTensorName (14.5): a checkpoint whose root is one tensor writes
// it under the name "tensor", not "".
func TestBareTensorName(t *testing.T) {
	for _, f := range []string{"../testdata/oracle/bare_tensor_root.pt", "../testdata/torch/bare_tensor.pt"} {
		rep, err := convert.PlanFile(context.Background(), f)
		if err != nil {
			t.Fatal(err)
		}
		if len(rep.Tensors) != 1 || rep.Tensors[0].Name != "tensor" || rep.Tensors[0].Source != "" {
			t.Errorf("%s: %+v, want one tensor named \"tensor\" from the root", f, rep.Tensors)
		}
	}
}
