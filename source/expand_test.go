package source_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"io"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/gosafetensors/safetensors"
	"github.com/gosafetensors/safetensors/compressed"
	"github.com/gosafetensors/safetensors/source"
)

// WithMaxExpanded refuses a compressed file whose original is past the
// bound from its seek table, before a frame is decoded (the counter sees
// none), with an error wrapping ErrExpandedLimit and compressed.ErrMaxSize
// that names the bound and the hint; at the bound the file opens, and a
// whole-container check decodes the original, which the counter sees.
func TestMaxExpanded(t *testing.T) {
	ctx := context.Background()
	data := make([]byte, 1<<20)
	rand.Read(data)
	plain, err := safetensors.Marshal([]safetensors.TensorData{{Name: "w", DType: safetensors.U8, Shape: []int64{int64(len(data))}, Data: data}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var zst bytes.Buffer
	if _, err := compressed.Compress(ctx, &zst, bytes.NewReader(plain), int64(len(plain))); err != nil {
		t.Fatal(err)
	}
	open := func(opts ...source.Option) (*source.Model, int64, error) {
		var n atomic.Int64 // the counter is called from Verify's goroutines
		o, err := source.NewObject("m.safetensors.zst", bytes.NewReader(zst.Bytes()), int64(zst.Len()), nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		m, err := o.Model(ctx, append(opts, source.WithDecodeCounter(func(k int64) { n.Add(k) }))...)
		if err == nil {
			err = m.Compressed.Verify(ctx)
			m.Close()
		}
		return m, n.Load(), err
	}
	size := int64(len(plain))
	_, n, err := open(source.WithMaxExpanded(size-1, 0, "raise --max-expanded"))
	if !errors.Is(err, source.ErrExpandedLimit) || !errors.Is(err, compressed.ErrMaxSize) || n != 0 ||
		!strings.Contains(err.Error(), "raise --max-expanded") {
		t.Errorf("past the bound: decoded %d, %v", n, err)
	}
	if _, n, err = open(source.WithMaxExpanded(size, 1, "")); err != nil || n < size {
		t.Errorf("at the bound: decoded %d of %d, %v", n, size, err)
	}
	if _, _, err = open(source.WithMaxExpanded(0, 1, "")); !errors.Is(err, safetensors.ErrOption) {
		t.Errorf("WithMaxExpanded(0, 1): %v", err)
	}
	if _, err := compressed.Decompress(ctx, io.Discard, bytes.NewReader(zst.Bytes()), int64(zst.Len()), compressed.WithDecodeCounter(func(int64) {})); !errors.Is(err, compressed.ErrOption) {
		t.Errorf("Decompress with a decode counter: %v", err)
	}
}
