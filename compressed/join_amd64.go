package compressed

// Implemented in join_amd64.s with SSE2 (part of the amd64 baseline).
//
//go:noescape
func joinRot2SSE2(dst, p0, p1 *byte, n int)

//go:noescape
func joinRot4SSE2(dst, p0, p1, p2, p3 *byte, n int)

// joinRot2Fast joins the first n&^15 elements of p0 and p1 (w=2, rotated)
// into dst and returns how many it joined. The caller guarantees
// len(p0), len(p1) >= n and len(dst) >= 2n.
func joinRot2Fast(dst, p0, p1 []byte, n int) int {
	m := n &^ 15
	if m > 0 {
		_, _, _ = dst[2*m-1], p0[m-1], p1[m-1] // bounds, checked once
		joinRot2SSE2(&dst[0], &p0[0], &p1[0], m)
	}
	return m
}

// joinRot4Fast is joinRot2Fast for four planes (w=4, rotated).
func joinRot4Fast(dst, p0, p1, p2, p3 []byte, n int) int {
	m := n &^ 15
	if m > 0 {
		_, _, _, _, _ = dst[4*m-1], p0[m-1], p1[m-1], p2[m-1], p3[m-1]
		joinRot4SSE2(&dst[0], &p0[0], &p1[0], &p2[0], &p3[0], m)
	}
	return m
}
