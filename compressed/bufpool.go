package compressed

import (
	"math/bits"
	"sync"
)

// bufPools recycle frame-sized buffers (compressed input, decompressed
// output on the way to a writer), one pool per power-of-two capacity: a
// request is served by a buffer of the smallest class that holds it, so
// buffers of one size are not dropped for requests of another, and no
// pooled buffer is ever too small.
const (
	minBufClass = 12               // 4 KiB
	maxBufClass = minBufClass + 16 // 256 MiB
	maxPooled   = 2 * MaxFrameSize // larger buffers are not kept (at most 1<<maxBufClass)
)

var bufPools [maxBufClass + 1]sync.Pool

// bufClass returns the smallest class whose buffers hold n bytes.
func bufClass(n int64) int {
	if n <= 1<<minBufClass {
		return minBufClass
	}
	return bits.Len64(uint64(n - 1))
}

// getBuf returns a buffer of length n (n must be checked by the caller:
// at most a frame, a chunk or a header).
func getBuf(n int64) *[]byte {
	if n <= maxPooled {
		c := bufClass(n)
		if bp, ok := bufPools[c].Get().(*[]byte); ok {
			*bp = (*bp)[:n]
			return bp
		}
		b := make([]byte, n, 1<<c)
		return &b
	}
	b := make([]byte, n)
	return &b
}

// putBuf gives bp back for reuse; it must not be used afterwards.
func putBuf(bp *[]byte) {
	c := cap(*bp)
	if c < 1<<minBufClass || c > 1<<maxBufClass {
		return
	}
	// The class whose requests every buffer of this capacity can serve.
	k := bits.Len64(uint64(c)) - 1
	bufPools[k].Put(bp)
}
