package convert

import (
	"iter"
	"maps"
	"slices"

	"github.com/gosafetensors/safetensors"
	"github.com/gosafetensors/safetensors/torch"
)

// Source is a PyTorch checkpoint seen as the safetensors file that
// converting it with the same options would write: the same names (the
// state_dict unwrapped, aliases of identical views dropped, non-tensors
// skipped), dtypes, shapes, order and __metadata__. Tensors are read
// lazily through torch.View, so a slice of a strided or expanded view reads
// only the storage bytes it needs. Nothing in the checkpoint is executed.
//
// Source implements safetensors.Source; DataOffsets are those the
// converted file would have.
type Source struct {
	name  string
	ckpt  *torch.Checkpoint
	plan  *Plan
	infos []safetensors.TensorInfo // output order
	index map[string]int
	names []string
}

var _ safetensors.Source = (*Source)(nil)

// NewSource plans the conversion of c (see [NewPlan]) and serves its
// result. name is used in error messages. Close closes c.
func NewSource(c *torch.Checkpoint, name string, opts ...PlanOption) (*Source, error) {
	p, err := NewPlan(c, opts...)
	if err != nil {
		return nil, err
	}
	s := &Source{name: name, ckpt: c, plan: p, index: make(map[string]int, len(p.report.Tensors))}
	var off int64
	for i, t := range p.report.Tensors {
		dt, _ := safetensors.ParseDType(t.DType) // NewPlan refuses dtypes safetensors lacks
		s.infos = append(s.infos, safetensors.TensorInfo{Name: t.Name, DType: dt, Shape: t.Shape, DataOffsets: [2]int64{off, off + t.Bytes}})
		off += t.Bytes
		s.index[t.Name] = i
		s.names = append(s.names, t.Name)
	}
	slices.Sort(s.names)
	return s, nil
}

// Checkpoint returns the checkpoint the source reads.
func (s *Source) Checkpoint() *torch.Checkpoint { return s.ckpt }

// Report returns what converting writes: tensors, removed aliases, skipped
// entries, metadata.
func (s *Source) Report() *Report { return s.plan.Report() }

// Names returns the output tensor names, sorted.
func (s *Source) Names() []string { return slices.Clone(s.names) }

// Info describes the named output tensor.
func (s *Source) Info(name string) (safetensors.TensorInfo, bool) {
	i, ok := s.index[name]
	if !ok {
		return safetensors.TensorInfo{}, false
	}
	return s.infos[i], true
}

// Tensor returns the named output tensor, read lazily from the checkpoint.
func (s *Source) Tensor(name string) (*safetensors.Tensor, error) {
	i, ok := s.index[name]
	if !ok {
		return nil, safetensors.MissingTensor(s.name, name)
	}
	return s.tensorAt(i), nil
}

func (s *Source) tensorAt(i int) *safetensors.Tensor {
	info := s.infos[i]
	return safetensors.NewTensor(info, s.plan.sources[info.Name].View(), s.name)
}

// All iterates over the output tensors in the converted file's order.
func (s *Source) All() iter.Seq2[*safetensors.Tensor, error] {
	return func(yield func(*safetensors.Tensor, error) bool) {
		for i := range s.infos {
			if !yield(s.tensorAt(i), nil) {
				return
			}
		}
	}
}

// Meta returns the __metadata__ the converted file would have.
func (s *Source) Meta() map[string]string {
	m := map[string]string{}
	maps.Copy(m, s.plan.report.Metadata)
	return m
}

// Close closes the checkpoint.
func (s *Source) Close() error { return s.ckpt.Close() }

// PlanCheckpoint is NewPlan for a checkpoint opened from input (a path or
// URL), which the report names and Write refuses to overwrite.
func PlanCheckpoint(c *torch.Checkpoint, input string, opts ...PlanOption) (*Plan, error) {
	p, err := NewPlan(c, opts...)
	if err != nil {
		return nil, withInput(err, input)
	}
	p.report.Input = input
	return p, nil
}
