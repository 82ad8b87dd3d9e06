package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/gosafetensors/safetensors/source"
	"github.com/gosafetensors/safetensors/stats"
	"github.com/spf13/cobra"
)

func init() { register(newEstimateCmd) }

type estimateFlags struct {
	json      bool
	context   int
	batch     int
	kvDType   string
	tp        int
	gpuMemory string
	config    string
}

func newEstimateCmd() *cobra.Command {
	var fl estimateFlags
	cmd := &cobra.Command{
		Use:   "estimate LOCATION [--context N [--batch B] [--kv-dtype f32|bf16|f16|f8] [--tp N] [--gpu-memory SIZE]]",
		Short: "Memory to hold the weights, to train them with Adam, or to serve them with a KV cache",
		Long: `estimate reads only the header and prints the memory needed to hold the
tensors as stored; with every floating-point tensor cast to F32, F16/BF16,
INT8 and INT4 (quantisation scales not counted); and for training with Adam:
weights and gradients as stored plus two F32 moments, everything in F32 (16
bytes per parameter), and mixed precision (16-bit weights and gradients, an
F32 master copy and two F32 moments: 16 bytes per parameter). Integer, BOOL,
C64 and F8_E8M0 tensors count as stored everywhere.

With --context it estimates serving instead, per device, from config.json
next to the weights (or --config): the weights as stored split over --tp
devices; the KV cache for --batch sequences of --context tokens (K and V per
layer, the KV heads split over the devices, sliding-window layers holding at
most their window, DeepSeek's compressed latent — kv_lora_rank plus
qk_rope_head_dim per layer and token — where the config has one); an
activation allowance (hidden states of one layer for the batch and context,
and one token's logits) and a runtime allowance (512 MiB plus 5% of the
weights), both stated as allowances, not measurements; and, with
--gpu-memory, whether it fits.

Exit status: 0 ok (with --gpu-memory: it fits), 1 the file or config is not
valid (with --gpu-memory: it does not fit), 2 it could not be read.`,
		Example: `  safetensors estimate model.safetensors
  safetensors estimate hf://meta-llama/Meta-Llama-3-8B --context 8192 --batch 4 --tp 2 --gpu-memory 24GiB
  safetensors estimate ./model --context 32768 --kv-dtype f8 --json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runEstimate(cmd, args[0], fl)
		},
	}
	f := cmd.Flags()
	f.BoolVar(&fl.json, "json", false, "print one JSON object; every size in bytes")
	f.IntVar(&fl.context, "context", 0, "estimate serving with `N` tokens per sequence")
	f.IntVar(&fl.batch, "batch", 1, "sequences served at once")
	f.StringVar(&fl.kvDType, "kv-dtype", "bf16", "KV cache dtype: f32, bf16, f16 or f8")
	f.IntVar(&fl.tp, "tp", 1, "tensor-parallel devices")
	f.StringVar(&fl.gpuMemory, "gpu-memory", "", "memory per device, e.g. 24GiB or 80GB: say whether it fits")
	f.StringVar(&fl.config, "config", "", "read the model config from `FILE` instead of config.json next to the weights")
	return cmd
}

// estimateJSON is the --json output of estimate; sizes in bytes.
type estimateJSON struct {
	File            string       `json:"file"`
	Tensors         int          `json:"tensors"`
	Parameters      int64        `json:"parameters"`
	FloatParameters int64        `json:"float_parameters"`
	Stored          int64        `json:"stored"`
	F32             int64        `json:"f32"`
	F16             int64        `json:"f16"`
	INT8            int64        `json:"int8"`
	INT4            int64        `json:"int4"`
	Adam            int64        `json:"adam"`
	AdamF32         int64        `json:"adam_f32"`
	AdamMixed       int64        `json:"adam_mixed"`
	Serving         *servingJSON `json:"serving,omitempty"`
}

// servingJSON is the serving estimate of estimate --context --json.
type servingJSON struct {
	Context             int    `json:"context"`
	Batch               int    `json:"batch"`
	KVDType             string `json:"kv_dtype"`
	TP                  int    `json:"tp"`
	Layers              int    `json:"layers"`
	KVHeads             int    `json:"kv_heads"`
	KVHeadsPerDevice    int    `json:"kv_heads_per_device"`
	HeadDim             int    `json:"head_dim"`
	SlidingWindow       int    `json:"sliding_window"`
	SlidingLayers       int    `json:"sliding_layers"`
	MLA                 bool   `json:"mla"`
	WeightsPerDevice    int64  `json:"weights_per_device"`
	KVCachePerDevice    int64  `json:"kv_cache_per_device"`
	ActivationAllowance int64  `json:"activation_allowance"`
	RuntimeAllowance    int64  `json:"runtime_allowance"`
	TotalPerDevice      int64  `json:"total_per_device"`
	GPUMemory           int64  `json:"gpu_memory,omitempty"`
	Fits                *bool  `json:"fits,omitempty"`
}

var kvDTypeBytes = map[string]float64{"f32": 4, "bf16": 2, "f16": 2, "f8": 1}

func runEstimate(cmd *cobra.Command, loc string, fl estimateFlags) error {
	var opt stats.ServingOptions
	serving := fl.context != 0
	if serving {
		kv, ok := kvDTypeBytes[strings.ToLower(fl.kvDType)]
		switch {
		case fl.context < 0:
			return usageError("--context %d: give a positive number of tokens", fl.context)
		case fl.batch < 1 || fl.tp < 1:
			return usageError("--batch %d, --tp %d: give positive numbers", fl.batch, fl.tp)
		case !ok:
			return usageError("--kv-dtype %q: one of f32, bf16, f16, f8", fl.kvDType)
		}
		opt = stats.ServingOptions{Context: fl.context, Batch: fl.batch, KVBytes: kv, TP: fl.tp}
		if fl.gpuMemory != "" {
			n, err := parseSize(fl.gpuMemory)
			if err != nil || n <= 0 {
				return usageError("--gpu-memory %q: a size such as 24GiB", fl.gpuMemory)
			}
			opt.GPUMemory = n
		}
	} else if fl.config != "" || fl.gpuMemory != "" || fl.tp != 1 || fl.batch != 1 {
		return usageError("--config, --batch, --tp and --gpu-memory estimate serving: give --context too")
	}
	m, err := openLocation(cmd, loc)
	if err != nil {
		return err
	}
	defer m.Close()
	mem := stats.EstimateMemory(m)
	out := estimateJSON{File: loc, Tensors: mem.Tensors, Parameters: mem.Params, FloatParameters: mem.FloatParams,
		Stored: mem.Stored, F32: mem.F32, F16: mem.F16, INT8: mem.INT8, INT4: mem.INT4, Adam: mem.Adam, AdamF32: mem.AdamF32, AdamMixed: mem.AdamMixed}
	var cfgName string
	if serving {
		raw, name, err := readModelConfig(cmdContext(cmd), loc, m, fl.config)
		if err != nil {
			return err
		}
		cfgName = name
		cfg, err := stats.ParseModelConfig(raw)
		if err != nil {
			return &exitError{Code: exitProblems, Err: fmt.Errorf("%s: %w", name, err)}
		}
		s, err := stats.EstimateServing(mem.Stored, cfg, opt)
		if err != nil {
			return usageError("%v", err)
		}
		sliding := 0
		for _, b := range cfg.Sliding {
			if b {
				sliding++
			}
		}
		out.Serving = &servingJSON{Context: opt.Context, Batch: opt.Batch, KVDType: strings.ToLower(fl.kvDType), TP: opt.TP,
			Layers: cfg.Layers, KVHeads: cfg.KVHeads, KVHeadsPerDevice: s.KVHeadsPerDevice, HeadDim: cfg.HeadDim,
			SlidingWindow: cfg.SlidingWindow, SlidingLayers: sliding, MLA: cfg.MLA(),
			WeightsPerDevice: s.WeightsPerDevice, KVCachePerDevice: s.KVCachePerDevice, ActivationAllowance: s.ActivationAllowance,
			RuntimeAllowance: s.RuntimeAllowance, TotalPerDevice: s.TotalPerDevice, GPUMemory: opt.GPUMemory}
		if opt.GPUMemory > 0 {
			out.Serving.Fits = &s.Fits
		}
	}
	w := cmd.OutOrStdout()
	if fl.json {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		if err := enc.Encode(out); err != nil {
			return err
		}
	} else {
		printEstimate(w, loc, cfgName, mem, out.Serving)
	}
	if out.Serving != nil && out.Serving.Fits != nil && !*out.Serving.Fits {
		return &exitError{Code: exitProblems}
	}
	return nil
}

func printEstimate(w io.Writer, loc, cfgName string, m stats.Memory, s *servingJSON) {
	fmt.Fprintf(w, "%s: %s, %s parameters (%s floating-point)\n", display(loc), plural(int64(m.Tensors), "tensor"), humanCount(m.Params), humanCount(m.FloatParams))
	row := func(what string, n int64) []string { return []string{what, humanBytes(n), groupDigits(n) + " bytes"} }
	right := []bool{false, true, true}
	var b strings.Builder
	if s == nil {
		writeColumns(&b, "", [][]string{
			row("as stored", m.Stored),
			row("F32", m.F32),
			row("F16 / BF16", m.F16),
			row("INT8", m.INT8),
			row("INT4", m.INT4),
			row("training, Adam (weights+grads as stored, F32 moments)", m.Adam),
			row("training, Adam, all F32", m.AdamF32),
			row("training, Adam, mixed precision", m.AdamMixed),
		}, right)
		io.WriteString(w, b.String())
		return
	}
	attn := fmt.Sprintf("%d layers, %d KV heads (%d per device) of %d", s.Layers, s.KVHeads, s.KVHeadsPerDevice, s.HeadDim)
	if s.MLA {
		attn = fmt.Sprintf("%d layers of latent attention (one compressed KV per layer and token, on every device)", s.Layers)
	}
	if s.SlidingLayers > 0 {
		attn += fmt.Sprintf(", %d of them with a %s-token sliding window", s.SlidingLayers, groupDigits(int64(s.SlidingWindow)))
	}
	fmt.Fprintf(w, "serving %s of %s tokens, KV cache in %s, on %s (%s: %s)\n", plural(int64(s.Batch), "sequence"), groupDigits(int64(s.Context)),
		strings.ToUpper(s.KVDType), plural(int64(s.TP), "device"), display(cfgName), attn)
	writeColumns(&b, "", [][]string{
		row("weights per device", s.WeightsPerDevice),
		row("KV cache per device", s.KVCachePerDevice),
		row("activations (allowance)", s.ActivationAllowance),
		row("runtime (allowance: 512 MiB + 5% of weights)", s.RuntimeAllowance),
		row("total per device", s.TotalPerDevice),
	}, right)
	io.WriteString(w, b.String())
	if s.Fits != nil {
		verdict := "fits"
		if !*s.Fits {
			verdict = "does not fit"
		}
		fmt.Fprintf(w, "%s in %s per device\n", verdict, humanBytes(s.GPUMemory))
	}
}

// maxConfigSize bounds the config.json read: real ones are a few KiB.
const maxConfigSize = 4 << 20

// readModelConfig reads the model's config.json: the file given, or the one
// beside the weights (in a local directory, or through the opener for a
// file, an index, HTTP or hf://).
func readModelConfig(ctx context.Context, loc string, m *source.Model, given string) ([]byte, string, error) {
	if given != "" {
		return readLocalConfig(given)
	}
	if st, err := os.Stat(loc); err == nil { // a local directory or file
		if !st.IsDir() {
			loc = filepath.Dir(loc)
		}
		return readLocalConfig(filepath.Join(loc, "config.json"))
	}
	if m.Object == nil {
		return nil, "", &exitError{Code: exitNoCheck, Err: fmt.Errorf("no config.json next to %s: give --config FILE", loc)}
	}
	obj, err := m.Object.Sibling(ctx, "config.json")
	if err != nil {
		return nil, "", &exitError{Code: exitNoCheck, Err: fmt.Errorf("no config.json next to %s (give --config FILE): %w", loc, err)}
	}
	defer obj.Close()
	if obj.Size > maxConfigSize {
		return nil, "", &exitError{Code: exitProblems, Err: fmt.Errorf("%s: %d bytes is not a model config (limit %d)", obj.Name, obj.Size, maxConfigSize)}
	}
	b := make([]byte, obj.Size)
	if _, err := obj.ReadAt(b, 0); err != nil && !errors.Is(err, io.EOF) {
		return nil, "", &exitError{Code: exitNoCheck, Err: err}
	}
	return b, obj.Name, nil
}

func readLocalConfig(path string) ([]byte, string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, "", &exitError{Code: exitNoCheck, Err: fmt.Errorf("%w (give --config FILE)", err)}
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxConfigSize+1))
	if err != nil {
		return nil, "", &exitError{Code: exitNoCheck, Err: err}
	}
	if len(b) > maxConfigSize {
		return nil, "", &exitError{Code: exitProblems, Err: fmt.Errorf("%s: more than %d bytes is not a model config", path, maxConfigSize)}
	}
	return b, path, nil
}
