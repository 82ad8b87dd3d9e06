package load

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/gosafetensors/safetensors"
	"github.com/gosafetensors/safetensors/internal/fetch"
)

// TestAssemblyRefusesMisplaced feeds the assembly chunks that the fetch
// engine would never produce: a piece read into memory other than its
// place, and a piece that arrives twice. Both fail with ErrMisplaced and
// deliver nothing.
func TestAssemblyRefusesMisplaced(t *testing.T) {
	data := make([]byte, 64)
	_, hdr, err := safetensors.Layout([]safetensors.TensorInfo{{Name: "w", DType: safetensors.U8, Shape: []int64{64}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	r, err := safetensors.NewReader(bytes.NewReader(append(hdr, data...)), int64(len(hdr)+len(data)))
	if err != nil {
		t.Fatal(err)
	}
	l, err := New(r)
	if err != nil {
		t.Fatal(err)
	}
	var delivered int
	fresh := func() *assembly {
		return l.newAssembly(func(*Tensor) error { delivered++; return nil }, nil)
	}
	half := func(pos int64) *fetch.Chunk {
		return &fetch.Chunk{Pieces: []fetch.Extent{{Item: 0, Pos: pos, Len: 32, Off: int64(len(hdr)) + pos}}, Bytes: 32}
	}
	ctx := context.Background()

	a := fresh()
	bufs, err := a.buffers(ctx, half(0))
	if err != nil {
		t.Fatal(err)
	}
	if err := a.done(half(0), [][]byte{make([]byte, 32)}); !errors.Is(err, ErrMisplaced) {
		t.Fatalf("a piece outside its part: %v", err)
	}
	// Shifted by one byte inside the part.
	if err := a.done(half(0), [][]byte{a.items[0].buf[1:33]}); !errors.Is(err, ErrMisplaced) {
		t.Fatalf("a piece one byte off: %v", err)
	}
	if err := a.done(half(0), bufs); err != nil {
		t.Fatal(err)
	}
	if err := a.done(half(0), bufs); !errors.Is(err, ErrMisplaced) {
		t.Fatalf("the same piece twice: %v", err)
	}
	if delivered != 0 {
		t.Fatalf("a part delivered with half its bytes")
	}
	// The two halves, once each: delivered once.
	a = fresh()
	b0, _ := a.buffers(ctx, half(0))
	b1, _ := a.buffers(ctx, half(32))
	if err := a.done(half(32), b1); err != nil {
		t.Fatal(err)
	}
	if err := a.done(half(0), b0); err != nil || delivered != 1 {
		t.Fatalf("err %v, %d deliveries", err, delivered)
	}
	if err := a.done(half(0), b0); !errors.Is(err, ErrMisplaced) || delivered != 1 {
		t.Fatalf("a piece after delivery: %v, %d deliveries", err, delivered)
	}
}
