//go:build !amd64

package stats

// useAVX2 is false: the assembly kernel exists for amd64 only.
const useAVX2 = false

// addBlockF32 is addBlock: the assembly kernel exists for amd64 only.
func addBlockF32(a *acc, v []float32) { addBlock(a, v) }
