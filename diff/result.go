package diff

import (
	"slices"

	"github.com/gosafetensors/safetensors"
)

// Result is the difference between two sources, A and B.
type Result struct {
	OnlyA, OnlyB []string // names in one side only, sorted
	Tensors      []Tensor // tensors in both, sorted by name
	Meta         Meta
}

// Tensor compares one tensor present in both sources.
type Tensor struct {
	Name string
	// AliasA (AliasB) is set when Name is not a tensor of A (B) but a tied
	// weight its converter removed, recorded in __metadata__ as
	// Name -> AliasA: A's side is then the tensor AliasA.
	AliasA, AliasB string
	DTypeA, DTypeB safetensors.DType
	ShapeA, ShapeB []int64
	// Compared is true when the values were compared: same shape, data
	// read (not WithNamesOnly), and either the same dtype or two dtypes
	// that decode to numbers.
	Compared bool
	// Identical is true when dtypes, shapes and every byte are equal.
	Identical bool
	// Count is the number of elements compared; Differing how many differ
	// by more than the epsilon, or where exactly one side is NaN. C64
	// elements are compared as complex numbers, as numpy does: |a-b| is
	// the modulus of the complex difference (a part equal on both sides,
	// infinities included, contributes 0), NaN if either part is. For
	// F6_E2M3 and F6_E3M2, which cannot be decoded, Differing counts
	// differing bytes.
	Count, Differing int64
	// MaxAbs is the largest |a-b| and MaxRel the largest
	// |a-b| / max(|a|, |b|) over elements where neither side is NaN (+Inf
	// where one side is infinite and the other not).
	MaxAbs, MaxRel float64
	// Integer is true when both sides have the same integer dtype: then
	// MaxAbsInt is MaxAbs exactly (float64 rounds differences of 64-bit
	// integers beyond 2^53).
	Integer   bool
	MaxAbsInt uint64
}

// DTypeDiffers reports whether the two sides have different dtypes.
func (t *Tensor) DTypeDiffers() bool { return t.DTypeA != t.DTypeB }

// IsAlias reports whether either side was found through a tied-weight alias.
func (t *Tensor) IsAlias() bool { return t.AliasA != "" || t.AliasB != "" }

// ShapeDiffers reports whether the two sides have different shapes.
func (t *Tensor) ShapeDiffers() bool { return !slices.Equal(t.ShapeA, t.ShapeB) }

// Equal reports whether the tensor is the same on both sides, within the
// epsilon: same dtype and shape, and no differing element.
func (t *Tensor) Equal() bool {
	return !t.DTypeDiffers() && !t.ShapeDiffers() && t.Differing == 0
}

// Meta lists differences in __metadata__.
type Meta struct {
	OnlyA   map[string]string    `json:"only_a"`  // keys in A only
	OnlyB   map[string]string    `json:"only_b"`  // keys in B only
	Changed map[string][2]string `json:"changed"` // keys in both with different values: [A, B]
}

// Equal reports whether the metadata is the same on both sides.
func (m *Meta) Equal() bool { return len(m.OnlyA)+len(m.OnlyB)+len(m.Changed) == 0 }

// TensorsEqual reports whether both sources hold the same tensor names and
// every tensor is [Tensor.Equal], whatever their metadata.
func (r *Result) TensorsEqual() bool {
	if len(r.OnlyA)+len(r.OnlyB) > 0 {
		return false
	}
	for i := range r.Tensors {
		if !r.Tensors[i].Equal() {
			return false
		}
	}
	return true
}

// Equal reports whether the tensors and the metadata are equal.
func (r *Result) Equal() bool { return r.TensorsEqual() && r.Meta.Equal() }
