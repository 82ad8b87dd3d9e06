package compressed

import (
	"slices"
	"testing"
)

// TestBatchFrames: runs hold consecutive frames up to the limit, a frame
// larger than the limit is alone, every frame is in exactly one run.
func TestBatchFrames(t *testing.T) {
	mk := func(ulens ...int64) []frame {
		fs := make([]frame, len(ulens))
		var off int64
		for i, u := range ulens {
			fs[i] = frame{uoff: off, ulen: u}
			off += u
		}
		return fs
	}
	for _, c := range []struct {
		ulens []int64
		want  []int
	}{
		{nil, []int{0}},
		{[]int64{10}, []int{0, 1}},
		{[]int64{4, 4, 4, 4, 4}, []int{0, 2, 4, 5}},
		{[]int64{4, 0, 4, 0, 1}, []int{0, 5}},
		{[]int64{4, 0, 4, 0, 3}, []int{0, 4, 5}},
		{[]int64{20, 1, 1, 20}, []int{0, 1, 3, 4}},
		{[]int64{10, 10, 10}, []int{0, 1, 2, 3}},
	} {
		if got := batchFrames(mk(c.ulens...), 10); !slices.Equal(got, c.want) {
			t.Errorf("batchFrames(%v, 10) = %v, want %v", c.ulens, got, c.want)
		}
	}
}
