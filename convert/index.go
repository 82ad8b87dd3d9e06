package convert

import (
	"fmt"
	"slices"

	"github.com/gosafetensors/safetensors"
	"github.com/gosafetensors/safetensors/sharded"
)

// IndexFor returns the safetensors index of a sharded checkpoint once
// converted: src is the checkpoint's index (pytorch_model.bin.index.json),
// reports says what converting each of its shards writes (by the shard's
// name in src), and name gives each shard's name in the new index. The new
// weight_map holds what the shards hold once converted, so aliases dropped
// on conversion leave it; src's other metadata and members are kept, its
// totals recomputed. Every disagreement between src and the shards is a
// warning, sorted, and settled by the shards: a tensor src does not list
// is added, one src places in another shard is indexed where it is, one
// src lists but its shard does not hold is left out. A shard of src with
// no report is an error.
func IndexFor(src *sharded.Index, reports map[string]*Report, name func(shard string) string) (*sharded.Index, []string, error) {
	shards := src.Shards()
	var warnings []string
	for _, shard := range shards {
		r := reports[shard]
		if r == nil {
			return nil, nil, fmt.Errorf("%w: shard %s was not converted", ErrInput, shard)
		}
		removed := map[string]bool{}
		for _, a := range r.Removed {
			removed[a.Name] = true
		}
		here := make(map[string]bool, len(r.Tensors))
		for _, t := range r.Tensors {
			here[t.Name] = true
			if old, ok := src.WeightMap[t.Name]; !ok {
				warnings = append(warnings, fmt.Sprintf("tensor %q in %s is not in the index; added", t.Name, shard))
			} else if old != shard {
				warnings = append(warnings, fmt.Sprintf("tensor %q is in %s, the index says %s; indexed where it is", t.Name, shard, old))
			}
		}
		for t, s := range src.WeightMap {
			if s == shard && !removed[t] && !here[t] {
				warnings = append(warnings, fmt.Sprintf("tensor %q is not in %s; left out of the new index", t, shard))
			}
		}
	}
	slices.Sort(warnings)
	x := sharded.NewIndex()
	x.Metadata, x.Extra = src.Metadata, src.Extra
	for _, shard := range shards {
		for _, t := range reports[shard].Tensors {
			dt, _ := safetensors.ParseDType(t.DType)
			if err := x.Add(name(shard), safetensors.TensorInfo{Name: t.Name, DType: dt, Shape: t.Shape}); err != nil {
				return nil, nil, err
			}
		}
	}
	return x, warnings, nil
}
