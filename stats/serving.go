package stats

import (
	"errors"
	"fmt"
	"math"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
)

// ModelConfig is what a serving estimate needs from a model's config.json
// (Hugging Face transformers field names), after defaults are applied.
type ModelConfig struct {
	ModelType  string
	Layers     int // num_hidden_layers
	Heads      int // num_attention_heads
	KVHeads    int // num_key_value_heads (default: Heads)
	HeadDim    int // head_dim (default: hidden_size / num_attention_heads)
	HiddenSize int
	// SlidingWindow is the window of the layers that attend locally (0:
	// none); Sliding[i] says whether layer i does.
	SlidingWindow int
	Sliding       []bool
	// KVLoraRank and QKRopeHeadDim are set for multi-head latent attention
	// (DeepSeek-V2/V3): each layer caches one compressed latent of
	// kv_lora_rank plus the shared rotary key of qk_rope_head_dim per
	// token, instead of K and V per head.
	KVLoraRank, QKRopeHeadDim int
	VocabSize                 int
}

// MLA reports whether the model caches a compressed latent (DeepSeek's
// multi-head latent attention).
func (c *ModelConfig) MLA() bool { return c.KVLoraRank > 0 }

// ErrConfig wraps every problem with a config.json.
var ErrConfig = errors.New("model config")

// rawConfig holds the fields read, as in config.json; text_config (Gemma 3,
// multimodal wrappers) is read when the top level has no layers.
type rawConfig struct {
	ModelType            string          `json:"model_type"`
	NumHiddenLayers      *int            `json:"num_hidden_layers"`
	NumAttentionHeads    *int            `json:"num_attention_heads"`
	NumKeyValueHeads     *int            `json:"num_key_value_heads"`
	HeadDim              *int            `json:"head_dim"`
	HiddenSize           *int            `json:"hidden_size"`
	SlidingWindow        *int            `json:"sliding_window"`
	UseSlidingWindow     *bool           `json:"use_sliding_window"`
	MaxWindowLayers      *int            `json:"max_window_layers"`
	SlidingWindowPattern *int            `json:"sliding_window_pattern"`
	LayerTypes           []string        `json:"layer_types"`
	KVLoraRank           *int            `json:"kv_lora_rank"`
	QKRopeHeadDim        *int            `json:"qk_rope_head_dim"`
	VocabSize            *int            `json:"vocab_size"`
	TextConfig           *jsontext.Value `json:"text_config"`
}

func val(p *int) int {
	if p == nil {
		return 0
	}
	return *p
}

// ParseModelConfig reads a transformers config.json. Layers, attention
// heads and hidden size (or head_dim) are required; every count must be
// positive and at most 2^20, so that no product overflows.
func ParseModelConfig(b []byte) (*ModelConfig, error) {
	var r rawConfig
	if err := json.Unmarshal(b, &r, json.RejectUnknownMembers(false)); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrConfig, err)
	}
	if r.NumHiddenLayers == nil && r.TextConfig != nil {
		c, err := ParseModelConfig(*r.TextConfig)
		if err != nil {
			return nil, fmt.Errorf("text_config: %w", err)
		}
		return c, nil
	}
	const limit = 1 << 20
	for _, f := range []struct {
		name string
		v    *int
		need bool
	}{{"num_hidden_layers", r.NumHiddenLayers, true}, {"num_attention_heads", r.NumAttentionHeads, true},
		{"num_key_value_heads", r.NumKeyValueHeads, false}, {"head_dim", r.HeadDim, false}, {"hidden_size", r.HiddenSize, false},
		{"sliding_window", r.SlidingWindow, false}, {"kv_lora_rank", r.KVLoraRank, false}, {"qk_rope_head_dim", r.QKRopeHeadDim, false},
		{"vocab_size", r.VocabSize, false}, {"sliding_window_pattern", r.SlidingWindowPattern, false}} {
		if f.v == nil {
			if f.need {
				return nil, fmt.Errorf("%w: no %s", ErrConfig, f.name)
			}
			continue
		}
		if *f.v < 0 || *f.v > limit || *f.v == 0 && f.need {
			return nil, fmt.Errorf("%w: %s = %d is out of range 1..%d", ErrConfig, f.name, *f.v, limit)
		}
	}
	c := &ModelConfig{ModelType: r.ModelType, Layers: *r.NumHiddenLayers, Heads: *r.NumAttentionHeads,
		KVHeads: val(r.NumKeyValueHeads), HeadDim: val(r.HeadDim), HiddenSize: val(r.HiddenSize),
		KVLoraRank: val(r.KVLoraRank), QKRopeHeadDim: val(r.QKRopeHeadDim), VocabSize: val(r.VocabSize)}
	if c.KVHeads == 0 {
		c.KVHeads = c.Heads
	}
	if c.HeadDim == 0 {
		if c.HiddenSize == 0 {
			return nil, fmt.Errorf("%w: neither head_dim nor hidden_size", ErrConfig)
		}
		c.HeadDim = c.HiddenSize / c.Heads
	}
	c.Sliding = make([]bool, c.Layers)
	switch w := val(r.SlidingWindow); {
	case len(r.LayerTypes) > 0: // transformers' explicit per-layer list
		if len(r.LayerTypes) != c.Layers {
			return nil, fmt.Errorf("%w: layer_types lists %d layers, num_hidden_layers is %d", ErrConfig, len(r.LayerTypes), c.Layers)
		}
		for i, t := range r.LayerTypes {
			c.Sliding[i] = t == "sliding_attention"
		}
		c.SlidingWindow = w
	case w == 0 || r.UseSlidingWindow != nil && !*r.UseSlidingWindow:
	case r.SlidingWindowPattern != nil && *r.SlidingWindowPattern > 0: // Gemma 3: every Nth layer is global
		for i := range c.Sliding {
			c.Sliding[i] = (i+1)%*r.SlidingWindowPattern != 0
		}
		c.SlidingWindow = w
	case r.ModelType == "gemma2": // even layers local, odd global
		for i := range c.Sliding {
			c.Sliding[i] = i%2 == 0
		}
		c.SlidingWindow = w
	case r.MaxWindowLayers != nil: // Qwen2 with use_sliding_window: layers from max_window_layers on
		for i := range c.Sliding {
			c.Sliding[i] = i >= *r.MaxWindowLayers
		}
		c.SlidingWindow = w
	default: // Mistral: every layer
		for i := range c.Sliding {
			c.Sliding[i] = true
		}
		c.SlidingWindow = w
	}
	if c.SlidingWindow == 0 {
		clear(c.Sliding)
	}
	return c, nil
}

// ServingOptions describe a deployment to estimate.
type ServingOptions struct {
	Context   int     // tokens per sequence (prompt and output)
	Batch     int     // sequences served at once (default 1)
	KVBytes   float64 // bytes per cached value: 4 (f32), 2 (bf16, f16), 1 (f8)
	TP        int     // tensor-parallel devices (default 1)
	GPUMemory int64   // bytes per device, or 0 for no verdict
}

// Serving is a memory estimate per device for serving a model.
type Serving struct {
	// WeightsPerDevice is the weights as stored, split evenly over the
	// TP devices (layers whose heads cannot be split are not modelled).
	WeightsPerDevice int64
	// KVCachePerDevice is the cache for Batch sequences of Context tokens:
	// per layer and token, K and V of KVHeads heads of HeadDim values
	// (the KV heads split over TP devices, replicated when fewer than the
	// devices), sliding-window layers holding at most the window; with
	// MLA, one latent of KVLoraRank+QKRopeHeadDim values per layer and
	// token, replicated on every device.
	KVCachePerDevice int64
	// KVHeadsPerDevice is how many KV heads each device caches.
	KVHeadsPerDevice int
	// ActivationAllowance is an allowance, not a measurement: hidden
	// states in and out of one layer for the whole batch and context in
	// 2 bytes, plus one token's logits per sequence in 4 bytes.
	ActivationAllowance int64
	// RuntimeAllowance is an allowance for the CUDA context, allocator
	// fragmentation and kernels' workspaces: 512 MiB plus 5% of the
	// weights on the device.
	RuntimeAllowance int64
	// TotalPerDevice is the sum of the four.
	TotalPerDevice int64
	// Fits reports TotalPerDevice <= GPUMemory (false when GPUMemory is 0).
	Fits bool
}

// KVCacheBytes returns the KV cache of c for batch sequences of context
// tokens at kvBytes per value, on one of tp devices, and the KV heads each
// device holds. Sums saturate at math.MaxInt64.
func KVCacheBytes(c *ModelConfig, context, batch int, kvBytes float64, tp int) (int64, int) {
	tp = max(tp, 1)
	heads := (c.KVHeads + tp - 1) / tp
	var values float64 // cached values per sequence
	for i := range c.Layers {
		tokens := float64(context)
		if c.Sliding[i] && c.SlidingWindow > 0 {
			tokens = math.Min(tokens, float64(c.SlidingWindow))
		}
		if c.MLA() {
			values += tokens * float64(c.KVLoraRank+c.QKRopeHeadDim)
		} else {
			values += tokens * 2 * float64(heads) * float64(c.HeadDim)
		}
	}
	if c.MLA() {
		heads = 0
	}
	return saturate(values * float64(max(batch, 1)) * kvBytes), heads
}

func saturate(v float64) int64 {
	if v >= math.MaxInt64 {
		return math.MaxInt64
	}
	return int64(math.Ceil(v))
}

// EstimateServing estimates the memory per device to serve a model whose
// weights take weights bytes (as stored) with config c.
func EstimateServing(weights int64, c *ModelConfig, o ServingOptions) (Serving, error) {
	if o.Context <= 0 {
		return Serving{}, fmt.Errorf("%w: context of %d tokens", ErrOption, o.Context)
	}
	if o.Batch < 0 || o.TP < 0 || o.GPUMemory < 0 || !(o.KVBytes > 0) {
		return Serving{}, fmt.Errorf("%w: batch %d, tp %d, gpu memory %d, %v bytes per KV value", ErrOption, o.Batch, o.TP, o.GPUMemory, o.KVBytes)
	}
	batch, tp := max(o.Batch, 1), max(o.TP, 1)
	var s Serving
	s.WeightsPerDevice = (weights + int64(tp) - 1) / int64(tp)
	s.KVCachePerDevice, s.KVHeadsPerDevice = KVCacheBytes(c, o.Context, batch, o.KVBytes, tp)
	act := 2*float64(batch)*float64(o.Context)*float64(c.HiddenSize)*2 + float64(batch)*float64(c.VocabSize)*4
	s.ActivationAllowance = saturate(act)
	s.RuntimeAllowance = 512<<20 + s.WeightsPerDevice/20
	total := float64(s.WeightsPerDevice) + float64(s.KVCachePerDevice) + float64(s.ActivationAllowance) + float64(s.RuntimeAllowance)
	s.TotalPerDevice = saturate(total)
	s.Fits = o.GPUMemory > 0 && s.TotalPerDevice <= o.GPUMemory
	return s, nil
}
