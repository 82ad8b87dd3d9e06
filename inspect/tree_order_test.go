package inspect

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/gosafetensors/safetensors"
)

// layers returns the tensors of n numbered layers, each a ln [8] F32 and
// an attn [8, 8] BF16, in the order a sorted list of names gives them
// (layers.10 before layers.2), with the tensors of layer split swapped, as
// when a layer lies across two shards.
func layers(n, split int) []safetensors.TensorInfo {
	var out []safetensors.TensorInfo
	for i := range n {
		ln := safetensors.TensorInfo{Name: fmt.Sprintf("h.%d.ln.weight", i), DType: safetensors.F32, Shape: []int64{8}}
		attn := safetensors.TensorInfo{Name: fmt.Sprintf("h.%d.attn.weight", i), DType: safetensors.BF16, Shape: []int64{8, 8}}
		if i == split {
			out = append(out, ln, attn)
		} else {
			out = append(out, attn, ln)
		}
	}
	slices.SortStableFunc(out, func(a, b safetensors.TensorInfo) int {
		// bytewise, as a safetensors file orders names, but keep each
		// layer's own order
		la, _, _ := strings.Cut(strings.TrimPrefix(a.Name, "h."), ".")
		lb, _, _ := strings.Cut(strings.TrimPrefix(b.Name, "h."), ".")
		return strings.Compare(la, lb)
	})
	return out
}

// Numbered layers are one run in numeric order, whatever order the
// tensors come in and even when one layer's tensors come in another
// order (split across shards).
func TestTreeNumericAcrossShards(t *testing.T) {
	rows := Tree(layers(12, 4))
	var labels []string
	for _, r := range rows {
		labels = append(labels, strings.Repeat(" ", r.Depth)+r.Label)
	}
	want := []string{"h", " [0-11] x12"}
	if len(labels) < 2 || !slices.Equal(labels[:2], want) || rows[1].Repeat != 12 || rows[1].Parameters != 12*72 {
		t.Fatalf("tree rows:\n%s", strings.Join(labels, "\n"))
	}
	// A different layer is not merged: runs stop around it, in order.
	ts := layers(12, -1)
	for i := range ts {
		if ts[i].Name == "h.5.ln.weight" {
			ts[i].Shape = []int64{16}
		}
	}
	labels = labels[:0]
	for _, r := range Tree(ts) {
		if r.Depth == 1 {
			labels = append(labels, r.Label)
		}
	}
	if want := []string{"[0-4] x5", "5", "[6-11] x6"}; !slices.Equal(labels, want) {
		t.Fatalf("runs %q, want %q", labels, want)
	}
}
