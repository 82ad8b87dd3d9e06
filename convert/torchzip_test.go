package convert

import (
	"io"
	"testing"

	"github.com/gosafetensors/safetensors/torch/torchtest"
)

// synth describes a contiguous tensor filled with a byte pattern, streamed
// when the checkpoint is written so big benchmarks need no big buffers.
func synth(name, dtype string, seed byte, shape ...int64) torchtest.Tensor {
	n := int64(torchtest.ItemSize(dtype))
	for _, d := range shape {
		n *= d
	}
	return torchtest.Tensor{Name: name, DType: dtype, Shape: shape, DataSize: n, Fill: patternFill(n, seed)}
}

func patternFill(n int64, seed byte) func(w io.Writer) error {
	return func(w io.Writer) error {
		buf := make([]byte, min(n, 1<<20))
		for i := range buf {
			buf[i] = byte(i*7) ^ seed
		}
		for n := n; n > 0; {
			k := min(n, int64(len(buf)))
			if _, err := w.Write(buf[:k]); err != nil {
				return err
			}
			n -= k
		}
		return nil
	}
}

// writeTorchZip writes a torch.save-style zip checkpoint with torchtest.
func writeTorchZip(tb testing.TB, path string, tensors []torchtest.Tensor) {
	tb.Helper()
	if err := torchtest.WriteFile(path, tensors, torchtest.Options{}); err != nil {
		tb.Fatal(err)
	}
}
