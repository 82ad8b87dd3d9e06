package compressed

import (
	"bytes"
	"testing"

	"github.com/gosafetensors/safetensors"
)

// TestPlan: frames cover the file contiguously, are at most the frame size,
// start at the end of the header, cut only at tensor boundaries or at whole
// elements inside one tensor, and small neighbours share a frame (of one
// dtype when asked).
func TestPlan(t *testing.T) {
	ts := []safetensors.TensorData{
		{Name: "a", DType: safetensors.F32, Shape: []int64{3}, Data: make([]byte, 12)},
		{Name: "b", DType: safetensors.F32, Shape: []int64{5}, Data: make([]byte, 20)},
		{Name: "big", DType: safetensors.F32, Shape: []int64{1000}, Data: make([]byte, 4000)},
		{Name: "c", DType: safetensors.BF16, Shape: []int64{3}, Data: make([]byte, 6)},
		{Name: "d", DType: safetensors.I64, Shape: []int64{1}, Data: make([]byte, 8)},
		{Name: "e", DType: safetensors.F32, Shape: []int64{0}, Data: nil},
	}
	file, err := safetensors.Marshal(ts, nil)
	if err != nil {
		t.Fatal(err)
	}
	sr, err := safetensors.NewReader(bytes.NewReader(file), int64(len(file)))
	if err != nil {
		t.Fatal(err)
	}
	bounds := map[int64]bool{}
	for _, ti := range sr.Tensors {
		bounds[sr.DataOffset()+ti.DataOffsets[0]] = true
		bounds[sr.DataOffset()+ti.DataOffsets[1]] = true
	}
	for _, sameDType := range []bool{false, true} {
		segs := plan(&sr.Header, 1024, !sameDType, sameDType)
		off := int64(0)
		if sameDType {
			off = sr.DataOffset()
		}
		for i, s := range segs {
			if s.off != off || s.n <= 0 || s.n > 1024 {
				t.Fatalf("sameDType=%v: segment %d %+v (want offset %d)", sameDType, i, s, off)
			}
			if end := s.off + s.n; end > sr.DataOffset() && !bounds[end] {
				big, _ := sr.Info("big")
				inBig := end > sr.DataOffset()+big.DataOffsets[0] && end < sr.DataOffset()+big.DataOffsets[1]
				if !inBig || (end-sr.DataOffset()-big.DataOffsets[0])%4 != 0 {
					t.Errorf("sameDType=%v: segment %d ends at %d, not at a tensor boundary or an element of big", sameDType, i, end)
				}
			}
			off += s.n
		}
		if off != int64(len(file)) {
			t.Fatalf("segments end at %d, file has %d bytes", off, len(file))
		}
		// The header is its own frame; small tensors share frames.
		if !sameDType && segs[0].n != sr.DataOffset() {
			t.Errorf("the header is not a frame of its own: %+v", segs[0])
		}
		if want := map[bool]int{false: 1 + 1 + 4, true: 1 + 1 + 4 + 1}[sameDType]; len(segs) != want {
			t.Errorf("sameDType=%v: %d segments, want %d: %+v", sameDType, len(segs), want, segs)
		}
	}
}
