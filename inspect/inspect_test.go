package inspect_test

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"

	"github.com/gosafetensors/safetensors/inspect"
	"github.com/gosafetensors/safetensors/source"
)

func describe(t *testing.T, loc string) *inspect.Description {
	t.Helper()
	m, err := source.OpenModel(context.Background(), loc)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	return inspect.Describe(m)
}

func TestReportTotals(t *testing.T) {
	d := describe(t, "../testdata/torch/tiny_transformer.safetensors")
	r := d.Report("x", d.Tensors)
	if r.Format != "safetensors" || r.TensorCount != 35 || r.TotalParameters != 1600 || r.TotalBytes != 6464 || r.HeaderSize != 2640 {
		t.Fatalf("%+v", r)
	}
	var sum int64
	for _, v := range r.ParametersByDType {
		sum += v
	}
	if sum != r.TotalParameters || r.Metadata["format"] != "pt" || r.Tensors[0].DataOffsets == nil {
		t.Fatalf("by dtype %v, metadata %v", r.ParametersByDType, r.Metadata)
	}
	var buf bytes.Buffer
	if err := r.WriteJSON(&buf); err != nil {
		t.Fatal(err)
	}
	var back inspect.Report
	if err := json.Unmarshal(buf.Bytes(), &back); err != nil || back.TotalParameters != 1600 || !bytes.HasSuffix(buf.Bytes(), []byte("}\n")) {
		t.Fatalf("round trip: %v %+v", err, back)
	}
}

func TestReportCheckpoint(t *testing.T) {
	d := describe(t, "../testdata/torch/tied_weights.pt")
	r := d.Report("x", d.Tensors)
	if r.Format != "pytorch-zip" || d.Conversion == nil || len(r.Tensors) == 0 || r.Tensors[0].DataOffsets != nil {
		t.Fatalf("%+v", r)
	}
}

// The tree of a model with numbered layers shows each run of identical
// layers once, and its totals add up to the model's.
func TestTreeRuns(t *testing.T) {
	d := describe(t, "../testdata/torch/tiny_transformer.safetensors")
	rows := inspect.Tree(d.Tensors)
	var top, leaves int64
	runs := 0
	for _, r := range rows {
		if r.Depth == 0 {
			top += r.Parameters
		}
		if r.Repeat > 1 {
			runs++
		}
		if r.Tensor != nil {
			leaves++
		}
	}
	if top != 1600 || runs == 0 || leaves == 0 || leaves >= 35 {
		t.Fatalf("top-level params %d, %d runs, %d leaves: %+v", top, runs, leaves, rows)
	}
}
