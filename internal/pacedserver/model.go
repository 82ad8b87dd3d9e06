package pacedserver

import (
	"bytes"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"io"
	"math/rand/v2"

	"github.com/gosafetensors/safetensors"
)

// Generated is a safetensors file whose header is real and whose tensor
// bytes are computed from their offset: a model of any size that costs
// no disk and no memory. Bytes at different offsets (and of different
// files) differ, so a chunk read at the wrong place does not pass for the
// right one.
type Generated struct {
	Header []byte // prefix and JSON, as safetensors.Layout encodes them
	Size   int64
	seed   int64
}

// pattern is the block the data is cut from: an odd length, so that it
// lines up with no power-of-two chunk size.
var pattern = func() []byte {
	b := make([]byte, 1<<20+4099)
	r := rand.New(rand.NewPCG(1, 2))
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}()

// NewGenerated lays out tensors (safetensors.Layout) as a file named name.
func NewGenerated(name string, tensors []safetensors.TensorInfo) (*Generated, *safetensors.Header, error) {
	h, hdr, err := safetensors.Layout(tensors, map[string]string{"format": "pt"})
	if err != nil {
		return nil, nil, err
	}
	f := fnv.New64a()
	f.Write([]byte(name))
	return &Generated{Header: hdr, Size: h.FileSize(), seed: int64(f.Sum64() % uint64(len(pattern)))}, h, nil
}

// ReadAt implements io.ReaderAt.
func (g *Generated) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, fmt.Errorf("negative offset %d", off)
	}
	if off >= g.Size {
		return 0, io.EOF
	}
	var eof error
	if int64(len(p)) > g.Size-off {
		p, eof = p[:g.Size-off], io.EOF
	}
	n := 0
	if off < int64(len(g.Header)) {
		n = copy(p, g.Header[off:])
	}
	for n < len(p) {
		i := (off + int64(n) + g.seed) % int64(len(pattern))
		n += copy(p[n:], pattern[i:])
	}
	return n, eof
}

// ModelSpec describes a Llama-shaped model to generate.
type ModelSpec struct {
	Hidden, Intermediate, Layers, Vocab int64
	Shards                              int // 1: a single model.safetensors
}

// Tensors lists the spec's tensors (BF16; norms F32), in layer order.
func (s ModelSpec) Tensors() []safetensors.TensorInfo {
	bf := safetensors.BF16
	var ts []safetensors.TensorInfo
	add := func(name string, dt safetensors.DType, shape ...int64) {
		ts = append(ts, safetensors.TensorInfo{Name: name, DType: dt, Shape: shape})
	}
	add("model.embed_tokens.weight", bf, s.Vocab, s.Hidden)
	for l := range s.Layers {
		p := fmt.Sprintf("model.layers.%d.", l)
		add(p+"input_layernorm.weight", safetensors.F32, s.Hidden)
		add(p+"self_attn.q_proj.weight", bf, s.Hidden, s.Hidden)
		add(p+"self_attn.k_proj.weight", bf, s.Hidden, s.Hidden)
		add(p+"self_attn.v_proj.weight", bf, s.Hidden, s.Hidden)
		add(p+"self_attn.o_proj.weight", bf, s.Hidden, s.Hidden)
		add(p+"post_attention_layernorm.weight", safetensors.F32, s.Hidden)
		add(p+"mlp.gate_proj.weight", bf, s.Intermediate, s.Hidden)
		add(p+"mlp.up_proj.weight", bf, s.Intermediate, s.Hidden)
		add(p+"mlp.down_proj.weight", bf, s.Hidden, s.Intermediate)
	}
	add("model.norm.weight", safetensors.F32, s.Hidden)
	add("lm_head.weight", bf, s.Vocab, s.Hidden)
	return ts
}

// Model generates the spec's files, keyed by path ("/model.safetensors",
// or "/model-00001-of-00004.safetensors"… and
// "/model.safetensors.index.json"), tensors packed into shards in order
// so that shards are about equal in size.
func (s ModelSpec) Model() (map[string]File, error) {
	ts := s.Tensors()
	if s.Shards <= 1 {
		g, _, err := NewGenerated("model.safetensors", ts)
		if err != nil {
			return nil, err
		}
		return map[string]File{"/model.safetensors": {Content: g, Size: g.Size}}, nil
	}
	var total int64
	for _, t := range ts {
		total += byteSize(t)
	}
	per := (total + int64(s.Shards) - 1) / int64(s.Shards)
	groups := make([][]safetensors.TensorInfo, s.Shards)
	var acc int64
	for _, t := range ts {
		i := min(int(acc/per), s.Shards-1)
		groups[i] = append(groups[i], t)
		acc += byteSize(t)
	}
	files := map[string]File{}
	weightMap := map[string]string{}
	for i, g := range groups {
		name := fmt.Sprintf("model-%05d-of-%05d.safetensors", i+1, s.Shards)
		gen, _, err := NewGenerated(name, g)
		if err != nil {
			return nil, err
		}
		files["/"+name] = File{Content: gen, Size: gen.Size}
		for _, t := range g {
			weightMap[t.Name] = name
		}
	}
	idx, err := indexJSON(total, weightMap)
	if err != nil {
		return nil, err
	}
	files["/model.safetensors.index.json"] = File{Content: bytes.NewReader(idx), Size: int64(len(idx))}
	return files, nil
}

func indexJSON(total int64, weightMap map[string]string) ([]byte, error) {
	return json.MarshalIndent(map[string]any{
		"metadata":   map[string]any{"total_size": total},
		"weight_map": weightMap,
	}, "", "  ")
}

// byteSize is a laid-out tensor's size, from its shape (the spec's shapes
// are small enough not to overflow).
func byteSize(t safetensors.TensorInfo) int64 {
	return t.NumElements() * int64(t.DType.Bits()) / 8
}
