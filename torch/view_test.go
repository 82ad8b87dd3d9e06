package torch

import (
	"bytes"
	"io"
	"testing"

	"github.com/gosafetensors/safetensors/torch/torchtest"
)

func TestViewReadAt(t *testing.T) {
	data := f32s(120)
	views := stridedViews(data)
	c, err := openBytes(t, writeZip(t, views, torchtest.Options{}))
	if err != nil {
		t.Fatal(err)
	}
	defer func(old int64) { viewCacheMax = old }(viewCacheMax)
	for _, cacheMax := range []int64{1 << 20, 0} { // span in memory, and read from the file
		viewCacheMax = cacheMax
		for _, v := range views {
			stride := v.Stride
			if stride == nil {
				stride = []int64{1}
			}
			want := reference(data, 4, v.Offset, v.Shape, stride)
			view := c.Lookup(v.Name).View()
			if view.Size() != int64(len(want)) {
				t.Fatalf("%s: Size %d, want %d", v.Name, view.Size(), len(want))
			}
			for off := 0; off <= len(want); off++ {
				for n := 0; off+n <= len(want) && n <= 50; n++ {
					p := make([]byte, n)
					if k, err := view.ReadAt(p, int64(off)); k != n || (err != nil && !(err == io.EOF && off+n == len(want))) {
						t.Fatalf("%s cache %d: ReadAt(%d, %d) = %d, %v", v.Name, cacheMax, n, off, k, err)
					}
					if !bytes.Equal(p, want[off:off+n]) {
						t.Fatalf("%s cache %d: ReadAt(%d, %d) = %x, want %x", v.Name, cacheMax, n, off, p, want[off:off+n])
					}
				}
			}
			// past the end
			if k, err := view.ReadAt(make([]byte, 4), int64(len(want))+1); k != 0 || err != io.EOF {
				t.Fatalf("%s: read past the end = %d, %v", v.Name, k, err)
			}
			if len(want) > 0 {
				if k, err := view.ReadAt(make([]byte, len(want)+3), 0); k != len(want) || err != io.EOF {
					t.Fatalf("%s: long read = %d, %v", v.Name, k, err)
				}
			}
			var buf bytes.Buffer
			if _, err := view.Stream(&buf); err != nil || !bytes.Equal(buf.Bytes(), want) {
				t.Fatalf("%s: Stream = %v", v.Name, err)
			}
		}
	}
}

// A zero-stride view standing for 2^28 elements of a 4-element storage:
// reading any part of it costs the storage, not the view.
func TestViewExpandBoundedMemory(t *testing.T) {
	b := writeZip(t, []torchtest.Tensor{
		{Name: "x", DType: "F32", Shape: []int64{1 << 26, 4}, Stride: []int64{0, 1}, Data: f32s(4)},
	}, torchtest.Options{})
	c, err := NewReader(bytes.NewReader(b), int64(len(b)), "mem.pt", WithExpandedViews(1<<30))
	if err != nil {
		t.Fatal(err)
	}
	v := c.Lookup("x").View()
	if v.Size() != 1<<30 {
		t.Fatalf("size %d", v.Size())
	}
	p := make([]byte, 32)
	allocs := testing.AllocsPerRun(10, func() {
		if _, err := v.ReadAt(p, 1<<30-32); err != nil {
			t.Fatal(err)
		}
	})
	if !bytes.Equal(p[:16], f32s(4)) || !bytes.Equal(p[16:], f32s(4)) {
		t.Fatalf("got %x", p)
	}
	if allocs > 2 || len(v.cache) != 16 {
		t.Fatalf("%v allocations per read, cache %d bytes", allocs, len(v.cache))
	}
}
