package main

import (
	"encoding/json"
	"fmt"
	"text/tabwriter"

	"github.com/gosafetensors/safetensors/stats"
	"github.com/spf13/cobra"
)

func init() { register(newEstimateCmd) }

func newEstimateCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "estimate FILE",
		Short: "Memory to hold the weights as stored, cast, and for training with Adam",
		Long: `estimate reads only the header and prints the memory needed to hold the
tensors as stored; with every floating-point tensor cast to F32, F16/BF16,
INT8 and INT4 (quantisation scales not counted); and for training with Adam:
weights and gradients as stored plus two F32 moments, everything in F32 (16
bytes per parameter), and mixed precision (16-bit weights and gradients, an
F32 master copy and two F32 moments: 16 bytes per parameter). Integer, BOOL,
C64 and F8_E8M0 tensors count as stored everywhere. Activations, buffers and
framework overhead are not included.

Exit status: 0 ok, 1 the file is not a valid safetensors file, 2 it could
not be read.`,
		Example: `  safetensors estimate model.safetensors
  safetensors estimate model.safetensors --json | jq .adam_mixed`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			src, err := openInput(cmd, args[0])
			if err != nil {
				return err
			}
			defer src.Close()
			m := stats.EstimateMemory(src)
			w := cmd.OutOrStdout()
			if asJSON {
				enc := json.NewEncoder(w)
				enc.SetIndent("", "  ")
				return enc.Encode(estimateJSON{File: args[0], Tensors: m.Tensors, Parameters: m.Params, FloatParameters: m.FloatParams,
					Stored: m.Stored, F32: m.F32, F16: m.F16, INT8: m.INT8, INT4: m.INT4, Adam: m.Adam, AdamF32: m.AdamF32, AdamMixed: m.AdamMixed})
			}
			fmt.Fprintf(w, "%s: %d tensors, %s parameters (%s floating-point)\n", display(args[0]), m.Tensors, humanCount(m.Params), humanCount(m.FloatParams))
			tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
			for _, row := range []struct {
				what  string
				bytes int64
			}{
				{"as stored", m.Stored},
				{"F32", m.F32},
				{"F16 / BF16", m.F16},
				{"INT8", m.INT8},
				{"INT4", m.INT4},
				{"training, Adam (weights+grads as stored, F32 moments)", m.Adam},
				{"training, Adam, all F32", m.AdamF32},
				{"training, Adam, mixed precision", m.AdamMixed},
			} {
				fmt.Fprintf(tw, "%s\t%s\t%s bytes\n", row.what, humanBytes(row.bytes), groupDigits(row.bytes))
			}
			return tw.Flush()
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON object; every size in bytes")
	return cmd
}

// estimateJSON is the --json output of estimate; sizes in bytes.
type estimateJSON struct {
	File            string `json:"file"`
	Tensors         int    `json:"tensors"`
	Parameters      int64  `json:"parameters"`
	FloatParameters int64  `json:"float_parameters"`
	Stored          int64  `json:"stored"`
	F32             int64  `json:"f32"`
	F16             int64  `json:"f16"`
	INT8            int64  `json:"int8"`
	INT4            int64  `json:"int4"`
	Adam            int64  `json:"adam"`
	AdamF32         int64  `json:"adam_f32"`
	AdamMixed       int64  `json:"adam_mixed"`
}
