package compressed

import (
	"runtime"
	"syscall"
	"testing"
	"time"
)

func threadCPU() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(1, &ru) // RUSAGE_THREAD
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func BenchmarkJoinBF16(b *testing.B) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	n := 512 << 10
	p0, p1 := make([]byte, n), make([]byte, n)
	dst := make([]byte, 2*n)
	b.SetBytes(int64(2 * n))
	c0 := threadCPU()
	for range b.N {
		joinPlanes(dst, [][]byte{p0, p1}, 2, true)
	}
	b.ReportMetric(float64(2*n*b.N)/1e6/(threadCPU()-c0).Seconds(), "MB/cpu-s")
}
