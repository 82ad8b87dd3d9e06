package stats_test

import (
	"errors"
	"os"
	"testing"

	"github.com/gosafetensors/safetensors/stats"
)

func config(t *testing.T, name string) *stats.ModelConfig {
	t.Helper()
	b, err := os.ReadFile("../testdata/configs/" + name)
	if err != nil {
		t.Fatal(err)
	}
	c, err := stats.ParseModelConfig(b)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestKVCacheHandComputed checks the KV cache against sizes computed by
// hand from the real configs (testdata/configs/INDEX.json says how).
func TestKVCacheHandComputed(t *testing.T) {
	const bf16 = 2
	for _, tc := range []struct {
		file           string
		context, batch int
		kvBytes        float64
		tp             int
		want           int64
		headsPerDevice int
	}{
		// Llama-3-8B: 2 x 8 heads x 128 x 2 bytes x 32 layers = 128 KiB per token.
		{"llama3_8b.json", 8192, 1, bf16, 1, 8192 * 131072, 8},
		{"llama3_8b.json", 8192, 4, 1, 1, 4 * 8192 * 65536, 8},      // f8, batch 4
		{"llama3_8b.json", 8192, 1, bf16, 4, 8192 * 131072 / 4, 2},  // 2 KV heads per device
		{"llama3_8b.json", 8192, 1, bf16, 16, 8192 * 131072 / 8, 1}, // 8 heads over 16 devices: replicated
		{"llama3_8b.json", 1000, 1, 4, 1, 1000 * 262144, 8},         // f32
		// Mistral: every layer keeps at most the 4096-token window.
		{"mistral_7b_v0.1.json", 32768, 1, bf16, 1, 4096 * 131072, 8},
		{"mistral_7b_v0.1.json", 2048, 1, bf16, 1, 2048 * 131072, 8},
		// Gemma 2: 21 local layers x 4096 + 21 global x 8192 tokens, 8192 bytes each.
		{"gemma2_9b.json", 8192, 1, bf16, 1, 8192 * (21*4096 + 21*8192), 8},
		{"gemma2_9b.json", 2048, 1, bf16, 1, 8192 * 42 * 2048, 8},
		// DeepSeek MLA: (512 + 64) x 2 bytes per layer and token, replicated.
		{"deepseek_v3.json", 4096, 1, bf16, 1, 4096 * 576 * 2 * 61, 0},
		{"deepseek_v3.json", 4096, 1, bf16, 8, 4096 * 576 * 2 * 61, 0},
		{"deepseek_v2_lite.json", 32768, 2, bf16, 1, 2 * 32768 * 576 * 2 * 27, 0},
	} {
		c := config(t, tc.file)
		got, heads := stats.KVCacheBytes(c, tc.context, tc.batch, tc.kvBytes, tc.tp)
		if got != tc.want || heads != tc.headsPerDevice {
			t.Errorf("%s context %d batch %d %v bytes tp %d: %d bytes, %d heads per device; want %d, %d",
				tc.file, tc.context, tc.batch, tc.kvBytes, tc.tp, got, heads, tc.want, tc.headsPerDevice)
		}
	}
}

func TestParseModelConfig(t *testing.T) {
	g := config(t, "gemma2_9b.json")
	if g.HeadDim != 256 || g.SlidingWindow != 4096 || !g.Sliding[0] || g.Sliding[1] {
		t.Errorf("gemma2: head_dim %d window %d sliding %v", g.HeadDim, g.SlidingWindow, g.Sliding[:2])
	}
	if l := config(t, "llama3_8b.json"); l.HeadDim != 128 || l.SlidingWindow != 0 || l.MLA() {
		t.Errorf("llama: %+v", l)
	}
	if d := config(t, "deepseek_v3.json"); !d.MLA() || d.KVLoraRank != 512 || d.QKRopeHeadDim != 64 {
		t.Errorf("deepseek: %+v", d)
	}
	for _, bad := range []string{`{}`, `{"num_hidden_layers": 0, "num_attention_heads": 8, "hidden_size": 64}`,
		`{"num_hidden_layers": 2, "num_attention_heads": 8}`, `{"num_hidden_layers": 1e30, "num_attention_heads": 8}`,
		`{"num_hidden_layers": 2, "num_attention_heads": 8, "hidden_size": 64, "layer_types": ["full_attention"]}`, `[1]`} {
		if _, err := stats.ParseModelConfig([]byte(bad)); !errors.Is(err, stats.ErrConfig) {
			t.Errorf("%s: %v, want ErrConfig", bad, err)
		}
	}
	// Gemma 3 style layer_types and sliding_window_pattern.
	c, err := stats.ParseModelConfig([]byte(`{"num_hidden_layers": 6, "num_attention_heads": 8, "head_dim": 64, "sliding_window": 512, "sliding_window_pattern": 6}`))
	if err != nil || !c.Sliding[0] || c.Sliding[5] {
		t.Errorf("pattern: %v %v", c, err)
	}
}

func TestEstimateServing(t *testing.T) {
	c := config(t, "llama3_8b.json")
	const weights = 16_060_522_496 // Llama-3-8B in BF16
	s, err := stats.EstimateServing(weights, c, stats.ServingOptions{Context: 8192, KVBytes: 2, TP: 2, GPUMemory: 24 << 30})
	if err != nil {
		t.Fatal(err)
	}
	if s.WeightsPerDevice != weights/2 || s.KVCachePerDevice != 8192*131072/2 {
		t.Errorf("%+v", s)
	}
	if s.TotalPerDevice != s.WeightsPerDevice+s.KVCachePerDevice+s.ActivationAllowance+s.RuntimeAllowance || !s.Fits {
		t.Errorf("total %+v", s)
	}
	if s, _ := stats.EstimateServing(weights, c, stats.ServingOptions{Context: 8192, KVBytes: 2, GPUMemory: 16 << 30}); s.Fits {
		t.Errorf("16 GB of BF16 weights fit a 16 GiB device with their cache: %+v", s)
	}
	if _, err := stats.EstimateServing(weights, c, stats.ServingOptions{KVBytes: 2}); !errors.Is(err, stats.ErrOption) {
		t.Errorf("no context: %v", err)
	}
}
