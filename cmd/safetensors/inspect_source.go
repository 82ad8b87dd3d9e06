package main

import (
	"errors"
	"os"

	"github.com/gosafetensors/safetensors"
	"github.com/gosafetensors/safetensors/internal/sniff"
	"github.com/gosafetensors/safetensors/torch"
)

// inspected is what inspect shows of a file: a safetensors header, or the
// tensors of a PyTorch checkpoint described the same way.
type inspected struct {
	format     string // "safetensors", "pytorch-zip", "pytorch-legacy"
	fileSize   int64
	headerSize int64
	Tensors    []safetensors.TensorInfo
	Metadata   map[string]string
	Warnings   []string
	nbytes     map[string]int64 // checkpoint tensors: bytes as stored (sub-byte dtypes aside, = Size)
}

// bytes returns a tensor's data size.
func (f *inspected) bytes(t safetensors.TensorInfo) int64 {
	if n, ok := f.nbytes[t.Name]; ok {
		return n
	}
	return t.Size()
}

// openFileOrCheckpoint opens file as safetensors or, when it is not one
// but looks like a PyTorch checkpoint, through the inert checkpoint reader.
// Exactly one of the results is non-nil on success; errors carry the exit
// status.
func openFileOrCheckpoint(file string) (*safetensors.File, *torch.Checkpoint, error) {
	f, err := safetensors.Open(file)
	if err == nil {
		return f, nil, nil
	}
	var fe *safetensors.FormatError
	if !errors.As(err, &fe) || !looksLikeCheckpoint(file) {
		return nil, nil, fileProblem(file, err)
	}
	c, err := torch.Open(file)
	if err != nil {
		return nil, nil, &exitError{Code: exitProblems, Err: err}
	}
	return nil, c, nil
}

// openInspected reads the safetensors header of file or, when the file is
// a PyTorch checkpoint instead, lists its tensors without running it.
func openInspected(file string) (*inspected, error) {
	f, c, err := openFileOrCheckpoint(file)
	if err != nil {
		return nil, err
	}
	if f != nil {
		defer f.Close()
		return &inspected{format: "safetensors", fileSize: f.FileSize(), headerSize: f.Size,
			Tensors: f.Tensors, Metadata: f.Metadata, Warnings: f.Warnings}, nil
	}
	defer c.Close()
	out := &inspected{format: "pytorch-" + c.Format, nbytes: map[string]int64{}}
	if st, err := os.Stat(file); err == nil {
		out.fileSize = st.Size()
	}
	for _, e := range c.Entries {
		if e.Tensor == nil {
			continue
		}
		dt, ok := safetensors.ParseDType(e.Tensor.DType)
		if !ok {
			out.Warnings = append(out.Warnings, "tensor "+e.Name+": dtype "+e.Tensor.DType+" has no safetensors equivalent")
			continue
		}
		out.Tensors = append(out.Tensors, safetensors.TensorInfo{Name: e.Name, DType: dt, Shape: e.Tensor.Shape})
		out.nbytes[e.Name] = e.Tensor.NBytes()
	}
	return out, nil
}

// looksLikeCheckpoint reports whether file starts like a torch zip or a
// pickle (the legacy format starts with one).
func looksLikeCheckpoint(file string) bool {
	f, err := os.Open(file)
	if err != nil {
		return false
	}
	defer f.Close()
	var b [4]byte
	n, _ := f.Read(b[:])
	return sniff.IsCheckpointPrefix(b[:n])
}
