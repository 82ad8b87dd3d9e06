package main

import (
	"bytes"
	"fmt"

	"github.com/gosafetensors/safetensors"
)

// tensorSource is where get finds its tensor: a safetensors file, or one
// tensor of a PyTorch checkpoint held in memory as a one-tensor file.
type tensorSource struct {
	reader *safetensors.Reader
	names  []string // every tensor name, for suggestions
	close  func() error
}

// openTensorSource opens file for get. A PyTorch checkpoint is read by the
// inert decoder; only the named tensor is materialized (its C-contiguous
// bytes), and a view that would expand past 64 times its storage (zero
// strides) and 1 GiB is refused.
func openTensorSource(file, name string) (*tensorSource, error) {
	f, c, err := openFileOrCheckpoint(file)
	if err != nil {
		return nil, err
	}
	if f != nil {
		return &tensorSource{reader: &f.Reader, names: f.Names(), close: f.Close}, nil
	}
	defer c.Close()
	src := &tensorSource{close: func() error { return nil }}
	for _, e := range c.Entries {
		if e.Tensor != nil {
			src.names = append(src.names, e.Name)
		}
	}
	t := c.Tensor(name)
	if t == nil {
		// An empty file stands in, so that the caller reports the missing
		// name with its usual suggestions.
		b, _ := safetensors.Marshal(nil, nil)
		src.reader, _ = safetensors.NewReader(bytes.NewReader(b), int64(len(b)), safetensors.WithName(file))
		return src, nil
	}
	dt, ok := safetensors.ParseDType(t.DType)
	if !ok {
		return nil, &exitError{Code: exitProblems, Err: fmt.Errorf("%s: tensor %q: dtype %s has no safetensors equivalent", file, name, t.DType)}
	}
	if limit := max(64*t.Storage.NBytes(), 1<<30); t.NBytes() > limit {
		return nil, &exitError{Code: exitProblems, Err: fmt.Errorf("%s: tensor %q: its view expands %d stored bytes to %d (zero strides); refusing more than %d", file, name, t.Storage.NBytes(), t.NBytes(), limit)}
	}
	var data bytes.Buffer
	data.Grow(int(t.NBytes()))
	if _, err := t.WriteTo(&data); err != nil {
		return nil, &exitError{Code: exitProblems, Err: err}
	}
	b, err := safetensors.Marshal([]safetensors.TensorData{{Name: name, DType: dt, Shape: t.Shape, Data: data.Bytes()}}, nil)
	if err != nil {
		return nil, &exitError{Code: exitProblems, Err: err}
	}
	src.reader, err = safetensors.NewReader(bytes.NewReader(b), int64(len(b)), safetensors.WithName(file))
	if err != nil {
		return nil, &exitError{Code: exitNoCheck, Err: err}
	}
	return src, nil
}
