//go:build !amd64

package diff

import "github.com/gosafetensors/safetensors"

// useAVX2 and useF16C are false: the assembly kernels exist for amd64
// only.
const (
	useAVX2 = false
	useF16C = false
)

// compareF32 is compareScalar: the assembly kernels exist for amd64 only.
func compareF32(r *chunkResult, x, y []float32, eps float64) { compareScalar(r, x, y, eps) }

// compareF64 is compareScalar: the assembly kernels exist for amd64 only.
func compareF64(r *chunkResult, x, y []float64, eps float64) { compareScalar(r, x, y, eps) }

// compare16 reports false: without the assembly kernels, BF16 and F16 are
// decoded block by block.
func compare16(*chunkResult, []byte, []byte, safetensors.DType, float64) bool { return false }
