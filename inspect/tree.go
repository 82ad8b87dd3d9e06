package inspect

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/gosafetensors/safetensors"
)

// TreeRow is one line of a model's tensor tree: a group of tensors
// sharing a dotted prefix, a run of numbered layers with the same
// structure, or one tensor.
type TreeRow struct {
	Depth int    // nesting level, 0 at the top
	Label string // the name part(s) ("model.layers", "weight"), or "[0-31] x32" for a run
	// Tensor is the tensor of a leaf row, nil for groups and runs.
	Tensor *safetensors.TensorInfo
	// Repeat is the number of layers of a run (0 for other rows); Tensors
	// is then the count of each layer, Parameters and Bytes cover all of
	// them, and the rows under it describe one layer.
	Repeat     int
	Tensors    int   // tensors under the row (one for a leaf)
	Parameters int64 // parameters under the row (all layers of a run)
	Bytes      int64 // bytes under the row (all layers of a run)
}

// treeNode is a dotted-name prefix and everything under it.
type treeNode struct {
	name     string
	children []*treeNode
	index    map[string]*treeNode
	tensor   *safetensors.TensorInfo
	params   int64
	bytes    int64
	count    int
}

func (n *treeNode) child(name string) *treeNode {
	if c, ok := n.index[name]; ok {
		return c
	}
	c := &treeNode{name: name, index: map[string]*treeNode{}}
	n.index[name] = c
	n.children = append(n.children, c)
	return c
}

// signature describes a subtree's shape: names, dtypes and shapes, so that
// the numbered layers of a model are recognised as copies of one another.
// Children are taken in name order, not in the order they came: a layer
// whose tensors lie in two shards (or in another order in its file) is the
// same layer.
func (n *treeNode) signature(b *strings.Builder) {
	if n.tensor != nil {
		fmt.Fprintf(b, "%s%v;", n.tensor.DType, n.tensor.Shape)
	}
	children := slices.Clone(n.children)
	slices.SortFunc(children, func(x, y *treeNode) int { return CompareNames(x.name, y.name) })
	for _, c := range children {
		b.WriteString(c.name)
		b.WriteByte('{')
		c.signature(b)
		b.WriteByte('}')
	}
}

// orderNumbered puts the numbered children in numeric order, in the
// places numbered children held: layers.10 after layers.9 whatever order
// the tensors came in (a safetensors file sorts names bytewise), other
// children where they first came.
func (n *treeNode) orderNumbered() {
	var slots []int
	var numbered []*treeNode
	for i, c := range n.children {
		if isNumber(c.name) {
			slots = append(slots, i)
			numbered = append(numbered, c)
		}
	}
	slices.SortStableFunc(numbered, func(x, y *treeNode) int { return CompareNames(x.name, y.name) })
	for k, i := range slots {
		n.children[i] = numbered[k]
	}
	for _, c := range n.children {
		c.orderNumbered()
	}
}

// Tree groups tensors by dotted prefix with parameters per group; runs of
// numbered siblings with the same structure (layers.0 … layers.31) are
// given once with a count, and single-child chains are joined
// (model.decoder). Numbered siblings come in numeric order, other names in
// the order the tensors came; a layer counts as a copy of the others
// whatever order its tensors came in, so layers split across shards are
// grouped too. Rows come in display order.
func Tree(tensors []safetensors.TensorInfo) []TreeRow {
	root := &treeNode{index: map[string]*treeNode{}}
	for i := range tensors {
		t := &tensors[i]
		n := root
		n.params += t.NumElements()
		n.bytes += t.Size()
		n.count++
		for _, part := range strings.Split(t.Name, ".") {
			n = n.child(part)
			n.params += t.NumElements()
			n.bytes += t.Size()
			n.count++
		}
		n.tensor = t
	}
	root.orderNumbered()
	var rows []TreeRow
	var walk func(n *treeNode, label string, depth int)
	walk = func(n *treeNode, label string, depth int) {
		// join single-child chains that hold no tensor themselves
		for n.tensor == nil && len(n.children) == 1 && !isNumber(n.children[0].name) {
			n = n.children[0]
			label += "." + n.name
		}
		if n.tensor != nil && len(n.children) == 0 {
			rows = append(rows, TreeRow{Depth: depth, Label: label, Tensor: n.tensor, Tensors: 1, Parameters: n.params, Bytes: n.bytes})
			return
		}
		rows = append(rows, TreeRow{Depth: depth, Label: label, Tensors: n.count, Parameters: n.params, Bytes: n.bytes})
		for _, group := range numberedRuns(n.children) {
			if len(group) == 1 {
				walk(group[0], group[0].name, depth+1)
				continue
			}
			first, last := group[0], group[len(group)-1]
			var total int64
			for _, g := range group {
				total += g.params
			}
			rows = append(rows, TreeRow{Depth: depth + 1, Label: fmt.Sprintf("[%s-%s] x%d", first.name, last.name, len(group)),
				Repeat: len(group), Tensors: first.count, Parameters: total, Bytes: first.bytes * int64(len(group))})
			for _, c := range first.children {
				walk(c, c.name, depth+2)
			}
		}
	}
	for _, c := range root.children {
		walk(c, c.name, 0)
	}
	return rows
}

// numberedRuns groups consecutive numbered siblings with identical
// structure; every other child is a group of one.
func numberedRuns(children []*treeNode) [][]*treeNode {
	var out [][]*treeNode
	var sig string
	for _, c := range children {
		var sb strings.Builder
		c.signature(&sb)
		s := sb.String()
		if k := len(out); k > 0 && isNumber(c.name) && isNumber(out[k-1][0].name) && s == sig {
			prev := out[k-1][len(out[k-1])-1]
			if a, _ := strconv.Atoi(prev.name); strconv.Itoa(a+1) == c.name {
				out[k-1] = append(out[k-1], c)
				continue
			}
		}
		out = append(out, []*treeNode{c})
		sig = s
	}
	return slices.Clip(out)
}

func isNumber(s string) bool {
	if s == "" || len(s) > 9 {
		return false
	}
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}
