//go:build !amd64

package diff

// useAVX2 is false: the assembly kernels exist for amd64 only.
const useAVX2 = false

// compareF32 is compareScalar: the assembly kernels exist for amd64 only.
func compareF32(r *chunkResult, x, y []float32, eps float64) { compareScalar(r, x, y, eps) }

// compareF64 is compareScalar: the assembly kernels exist for amd64 only.
func compareF64(r *chunkResult, x, y []float64, eps float64) { compareScalar(r, x, y, eps) }
