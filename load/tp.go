package load

import (
	"fmt"
	"math/bits"
	"path"
	"strconv"
	"strings"

	"github.com/gosafetensors/safetensors"
)

// Split says how tensor parallelism divides a tensor among ranks: along
// one dimension (each rank reads a contiguous range of it), or not at all.
type Split int

const (
	// Replicate gives every rank the whole tensor.
	Replicate Split = -1
	// Rows splits dimension 0: the output features of a [out, in] linear
	// weight (column-parallel layers: q, k, v, gate, up), the vocabulary of
	// an embedding or an lm_head.
	Rows Split = 0
	// Cols splits dimension 1: the input features of a [out, in] linear
	// weight (row-parallel layers: o, down). A tensor with fewer dimensions
	// (the 1-D bias of a row-parallel layer, added once after the
	// reduction) is replicated.
	Cols Split = 1
)

// Dim returns the split along dimension d (Rows is Dim(0), Cols Dim(1)).
func Dim(d int) Split { return Split(d) }

func (s Split) String() string {
	switch {
	case s < 0:
		return "replicate"
	case s == Rows:
		return "rows"
	case s == Cols:
		return "cols"
	}
	return "dim" + strconv.Itoa(int(s))
}

// ParseSplit reads "rows", "cols", "replicate" or "dimN".
func ParseSplit(s string) (Split, error) {
	switch s {
	case "rows", "row":
		return Rows, nil
	case "cols", "columns", "col":
		return Cols, nil
	case "replicate", "replicated", "none":
		return Replicate, nil
	}
	if d, ok := strings.CutPrefix(s, "dim"); ok {
		if n, err := strconv.Atoi(d); err == nil && n >= 0 && n < 64 && strconv.Itoa(n) == d {
			return Split(n), nil
		}
	}
	return Replicate, fmt.Errorf("%w: split %q: want rows, cols, replicate or dimN", ErrOption, s)
}

// Rule splits the tensors whose names match Pattern, a glob in path.Match
// syntax ('*' matches any run of characters but '/', so "*.q_proj.weight"
// matches "model.layers.0.self_attn.q_proj.weight").
type Rule struct {
	Pattern string
	Split   Split
}

// ParseRule reads "PATTERN=rows|cols|replicate|dimN".
func ParseRule(s string) (Rule, error) {
	i := strings.LastIndexByte(s, '=')
	if i <= 0 {
		return Rule{}, fmt.Errorf("%w: rule %q: want PATTERN=rows|cols|replicate|dimN", ErrOption, s)
	}
	sp, err := ParseSplit(s[i+1:])
	if err != nil {
		return Rule{}, fmt.Errorf("rule %q: %w", s, err)
	}
	r := Rule{Pattern: s[:i], Split: sp}
	return r, r.check()
}

func (r Rule) check() error {
	if _, err := path.Match(r.Pattern, ""); err != nil || r.Pattern == "" {
		return fmt.Errorf("%w: rule pattern %q is not a valid glob", ErrOption, r.Pattern)
	}
	return nil
}

func (r Rule) String() string { return r.Pattern + "=" + r.Split.String() }

// DefaultRules is the rule table used unless WithoutDefaultRules: the
// Megatron layout of the common decoder names (Llama, Mistral, Qwen, Gemma,
// DeepSeek and Mixtral experts, GPT-NeoX, Falcon). Column-parallel
// projections split their output rows (and their biases), row-parallel
// ones their input columns (their biases replicate), embeddings and
// lm_head their vocabulary rows. Everything else — norms, fused qkv or
// gate_up projections whose layout differs by model, quantization scales
// — is replicated: a wrong split would be silently wrong, a replica only
// costs bytes. Rules given with WithRules are tried first.
var DefaultRules = []Rule{
	{"*.q_proj.weight", Rows}, {"*.q_proj.bias", Rows},
	{"*.k_proj.weight", Rows}, {"*.k_proj.bias", Rows},
	{"*.v_proj.weight", Rows}, {"*.v_proj.bias", Rows},
	{"*.gate_proj.weight", Rows}, {"*.gate_proj.bias", Rows},
	{"*.up_proj.weight", Rows}, {"*.up_proj.bias", Rows},
	{"*.o_proj.weight", Cols},
	{"*.down_proj.weight", Cols},
	{"*.experts.*.w1.weight", Rows}, {"*.experts.*.w3.weight", Rows},
	{"*.experts.*.w2.weight", Cols},
	{"*.dense_h_to_4h.weight", Rows}, {"*.dense_h_to_4h.bias", Rows},
	{"*.dense_4h_to_h.weight", Cols},
	{"*.attention.dense.weight", Cols},
	{"*.self_attention.dense.weight", Cols},
	{"*embed_tokens.weight", Rows},
	{"*.embed_in.weight", Rows}, {"embed_out.weight", Rows},
	{"*word_embeddings.weight", Rows},
	{"lm_head.weight", Rows}, {"*.lm_head.weight", Rows},
}

// Uneven says what to do with a dimension that the world size does not
// divide.
type Uneven int

const (
	// Refuse fails the load with ErrUneven naming the tensor.
	Refuse Uneven = iota
	// Chunk gives ranks torch.chunk's parts: ceil(n/world) positions each,
	// the last ranks fewer, possibly none (a part with 0 along the split
	// dimension).
	Chunk
)

// ParseUneven reads "refuse" or "chunk".
func ParseUneven(s string) (Uneven, error) {
	switch s {
	case "refuse":
		return Refuse, nil
	case "chunk":
		return Chunk, nil
	}
	return Refuse, fmt.Errorf("%w: uneven %q: want refuse or chunk", ErrOption, s)
}

func (u Uneven) String() string {
	if u == Chunk {
		return "chunk"
	}
	return "refuse"
}

// tp is a rank's view of tensor parallelism.
type tp struct {
	rank, world int
	rules       []Rule
	uneven      Uneven
}

// splitFor returns the first matching rule's split, Replicate when none.
func (t *tp) splitFor(name string) Split {
	for _, r := range t.rules {
		if ok, _ := path.Match(r.Pattern, name); ok {
			return r.Split
		}
	}
	return Replicate
}

// part decides this rank's part of a tensor and the byte runs it needs:
// runs runs of runLen bytes, stride apart, from first (a split along a
// late dimension of a large tensor has one run per outer position; they
// are listed only as they are read).
func (t *tp) part(info safetensors.TensorInfo, file string) (Part, error) {
	p := Part{Name: info.Name, DType: info.DType, Shape: append([]int64(nil), info.Shape...), Info: info, File: file, Split: Replicate, Size: info.Size()}
	p.runLen, p.stride = p.Size, p.Size
	if p.Size > 0 {
		p.runs = 1
	}
	if t == nil || t.world <= 1 {
		return p, nil
	}
	sp := t.splitFor(info.Name)
	d := int(sp)
	if sp < 0 || d >= len(info.Shape) {
		return p, nil
	}
	n := info.Shape[d]
	w := int64(t.world)
	var start, stop int64
	if n%w == 0 {
		start, stop = int64(t.rank)*(n/w), int64(t.rank+1)*(n/w)
	} else if t.uneven == Chunk {
		c := (n + w - 1) / w
		start = min(int64(t.rank)*c, n)
		stop = min(start+c, n)
	} else {
		return p, fmt.Errorf("%s: tensor %q: dimension %d of shape %v has %d positions, which %d ranks do not divide (%w; WithUneven(Chunk) gives torch.chunk parts)", file, info.Name, d, info.Shape, n, t.world, ErrUneven)
	}
	p.Split, p.Start, p.Stop = sp, start, stop
	p.Shape[d] = stop - start
	if info.Size() == 0 {
		p.Size, p.runs = 0, 0
		return p, nil
	}
	inner, outer := int64(1), int64(1)
	ok := true
	for _, s := range info.Shape[d+1:] {
		inner, ok = mul(inner, s, ok)
	}
	for _, s := range info.Shape[:d] {
		outer, ok = mul(outer, s, ok)
	}
	b := int64(info.DType.Bits())
	ib, ok := mul(inner, b, ok)
	startBits, ok := mul(start, ib, ok)
	lenBits, ok := mul(stop-start, ib, ok)
	strideBits, ok := mul(n, ib, ok)
	if !ok {
		return p, fmt.Errorf("%s: tensor %q: shape %v overflows 64-bit byte offsets", file, info.Name, info.Shape)
	}
	if startBits%8 != 0 || lenBits%8 != 0 || (outer > 1 && strideBits%8 != 0) {
		return p, fmt.Errorf("%s: tensor %q: rank %d's part %d:%d of dimension %d does not start and end on byte boundaries for %s (%w)", file, info.Name, t.rank, start, stop, d, info.DType, ErrMisaligned)
	}
	p.first, p.runLen, p.stride, p.runs = startBits/8, lenBits/8, strideBits/8, outer
	if p.runLen == 0 {
		p.runs = 0
	}
	hi, lo := bits.Mul64(uint64(p.runLen), uint64(p.runs))
	if hi != 0 || lo > uint64(info.Size()) {
		return p, fmt.Errorf("%s: tensor %q: part of %d runs of %d bytes exceeds the tensor's %d bytes", file, info.Name, p.runs, p.runLen, info.Size())
	}
	p.Size = int64(lo)
	if p.runs > 1 && p.runLen == p.stride { // the whole dimension: one run
		p.runLen, p.runs = p.Size, 1
	}
	return p, nil
}

// mul multiplies non-negative a and b, reporting overflow through ok.
func mul(a, b int64, ok bool) (int64, bool) {
	hi, lo := bits.Mul64(uint64(a), uint64(b))
	if !ok || hi != 0 || lo > 1<<63-1 {
		return 0, false
	}
	return int64(lo), true
}
