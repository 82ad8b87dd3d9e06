package main

import (
	"strings"

	"github.com/gosafetensors/safetensors"
	"github.com/gosafetensors/safetensors/inspect"
)

// writeTree writes the library's tensor tree (inspect.Tree): tensors
// grouped by dotted prefix with parameters per group, numbered layers of
// the same structure shown once with a count.
func writeTree(b *strings.Builder, tensors []safetensors.TensorInfo) {
	rows := [][]string{}
	for _, r := range inspect.Tree(tensors) {
		indent := strings.Repeat("  ", r.Depth)
		switch {
		case r.Tensor != nil:
			rows = append(rows, []string{indent + display(r.Label), r.Tensor.DType.String() + " " + formatShape(r.Tensor.Shape), humanCount(r.Parameters), humanBytes(r.Bytes)})
		case r.Repeat > 0:
			rows = append(rows, []string{indent + r.Label, "each " + plural(int64(r.Tensors), "tensor"), humanCount(r.Parameters), humanBytes(r.Bytes)})
		default:
			rows = append(rows, []string{indent + display(r.Label), plural(int64(r.Tensors), "tensor"), humanCount(r.Parameters), humanBytes(r.Bytes)})
		}
	}
	writeColumns(b, "", rows, []bool{false, false, true, true})
}
