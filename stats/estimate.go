package stats

import (
	"math"
	"math/bits"

	"github.com/gosafetensors/safetensors"
)

// Memory estimates the bytes needed to hold a model's tensors in several
// forms. Only floating-point tensors (F4, F6, F8 except the E8M0 scales,
// F16, BF16, F32, F64) are cast or trained; every other tensor (integers,
// BOOL, C64, F8_E8M0 scales) is counted as stored in every row. Sums
// saturate at math.MaxInt64 rather than wrap.
type Memory struct {
	Tensors int   // number of tensors
	Params  int64 // elements of every tensor (a scalar counts 1)
	// FloatParams are the elements of floating-point tensors: those cast,
	// and those given gradients and optimizer state in training.
	FloatParams int64
	// Stored is the size of the tensor data as stored.
	Stored int64
	// F32, F16 (also BF16) and INT8 hold each float parameter in 4, 2 and
	// 1 bytes; INT4 in half a byte (rounded up per tensor). Quantisation
	// scales and zero points are not counted.
	F32, F16, INT8, INT4 int64
	// Adam is training with Adam or AdamW: weights and gradients in the
	// stored dtype plus two F32 moments (8 bytes) per float parameter.
	// AdamF32 is the same with weights and gradients in F32 (16 bytes per
	// float parameter). AdamMixed is mixed-precision training: F16/BF16
	// weights and gradients, an F32 master copy and two F32 moments (16
	// bytes per float parameter, as the ZeRO paper counts). Activations,
	// temporary buffers and framework overhead are not counted.
	Adam, AdamF32, AdamMixed int64
}

// EstimateMemory estimates the memory for every tensor of src from its
// header alone: no tensor data is read.
func EstimateMemory(src safetensors.Source) Memory {
	names := src.Names()
	infos := make([]safetensors.TensorInfo, 0, len(names))
	for _, n := range names {
		if info, ok := src.Info(n); ok {
			infos = append(infos, info)
		}
	}
	return EstimateInfos(infos)
}

// trained reports whether dt holds floating-point parameters that are cast
// and trained: F8_E8M0 scales are floats but are not.
func trained(dt safetensors.DType) bool { return dt.IsFloat() && dt != safetensors.F8_E8M0 }

// EstimateInfos is [EstimateMemory] over tensor descriptions.
func EstimateInfos(infos []safetensors.TensorInfo) Memory {
	var m Memory
	m.Tensors = len(infos)
	for _, t := range infos {
		n := elements(t.Shape)
		size := t.Size()
		m.Params = add(m.Params, n)
		m.Stored = add(m.Stored, size)
		if !trained(t.DType) {
			for _, p := range []*int64{&m.F32, &m.F16, &m.INT8, &m.INT4, &m.Adam, &m.AdamF32, &m.AdamMixed} {
				*p = add(*p, size)
			}
			continue
		}
		m.FloatParams = add(m.FloatParams, n)
		m.F32 = add(m.F32, mul(n, 4))
		m.F16 = add(m.F16, mul(n, 2))
		m.INT8 = add(m.INT8, n)
		m.INT4 = add(m.INT4, n/2+n%2)
		m.Adam = add(m.Adam, add(mul(size, 2), mul(n, 8)))
		m.AdamF32 = add(m.AdamF32, mul(n, 16))
		m.AdamMixed = add(m.AdamMixed, mul(n, 16))
	}
	return m
}

// elements is the product of shape, saturating.
func elements(shape []int64) int64 {
	n := int64(1)
	for _, d := range shape {
		if d <= 0 {
			return 0
		}
		n = mul(n, d)
	}
	return n
}

func add(a, b int64) int64 {
	s, carry := bits.Add64(uint64(a), uint64(b), 0)
	if carry != 0 || s > math.MaxInt64 {
		return math.MaxInt64
	}
	return int64(s)
}

func mul(a, b int64) int64 {
	hi, lo := bits.Mul64(uint64(a), uint64(b))
	if hi != 0 || lo > math.MaxInt64 {
		return math.MaxInt64
	}
	return int64(lo)
}
