// Package benchcmp runs a benchmark and its baseline interleaved and
// reports ratios, so that a noisy shared machine slows both alike.
package benchcmp

import (
	"io"
	"os"
	"slices"
	"testing"
	"time"
)

// Interleaved runs ours and the baseline alternately, b.N times each, and
// reports the median throughput of both (bytes of input per second) and
// ratio = median time of ours / median time of the baseline.
func Interleaved(b *testing.B, bytes int64, baseline, ours func()) {
	b.Helper()
	var tb, to []time.Duration
	baseline()
	ours()
	b.ResetTimer()
	for range b.N {
		t0 := time.Now()
		baseline()
		t1 := time.Now()
		ours()
		t2 := time.Now()
		tb, to = append(tb, t1.Sub(t0)), append(to, t2.Sub(t1))
	}
	b.StopTimer()
	mb, mo := Median(tb), Median(to)
	b.ReportMetric(float64(bytes)/mb.Seconds()/1e9, "base-GB/s")
	b.ReportMetric(float64(bytes)/mo.Seconds()/1e9, "ours-GB/s")
	b.ReportMetric(mo.Seconds()/mb.Seconds(), "ratio")
}

// Median returns the median of d (d is not reordered).
func Median(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}

// ReadOnce reads paths start to end through one 4 MiB buffer: the cost of
// looking at every byte once.
func ReadOnce(b *testing.B, paths ...string) {
	buf := make([]byte, 4<<20)
	for _, p := range paths {
		f, err := os.Open(p)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := io.CopyBuffer(io.Discard, struct{ io.Reader }{f}, buf); err != nil {
			b.Fatal(err)
		}
		f.Close()
	}
}
