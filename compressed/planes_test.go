package compressed

import (
	"bytes"
	"math/rand/v2"
	"testing"
)

// TestPlanesRoundTrip: joinPlanes inverts splitPlanes for every width,
// with and without rotation, at lengths around the unrolled loops' steps
// (8 elements in Go, 16 in the amd64 SSE2 routines; below 16 only the
// portable loops run).
func TestPlanesRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, w := range []int{1, 2, 4, 8} {
		for _, rot := range []bool{false, true} {
			for _, n := range []int{0, 1, 3, 4, 5, 7, 8, 9, 15, 16, 17, 24, 31, 32, 33, 1000, 1001, 4096 + 13} {
				src := make([]byte, n*w)
				for i := range src {
					src[i] = byte(r.Uint32())
				}
				planes := make([][]byte, w)
				for j := range planes {
					planes[j] = make([]byte, n)
				}
				splitPlanes(planes, src, w, rot)
				if rot && w == 2 && n > 0 {
					// The top plane holds the exponent: bits 14..7 of the element.
					e := uint16(src[0]) | uint16(src[1])<<8
					if planes[1][0] != byte(e>>7) {
						t.Fatalf("BF16 exponent plane: got %#x want %#x", planes[1][0], byte(e>>7))
					}
				}
				got := make([]byte, n*w)
				joinPlanes(got, planes, w, rot)
				if !bytes.Equal(got, src) {
					t.Fatalf("w=%d rot=%v n=%d: round trip differs", w, rot, n)
				}
			}
		}
	}
}
