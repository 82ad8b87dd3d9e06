//go:build !amd64

package compressed

// Without the amd64 SSE2 routines the portable loops in joinPlanes do all
// the work.
func joinRot2Fast(dst, p0, p1 []byte, n int) int { return 0 }

func joinRot4Fast(dst, p0, p1, p2, p3 []byte, n int) int { return 0 }
