package main

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"slices"
	"strings"

	"github.com/agnivade/levenshtein"
	"github.com/gosafetensors/safetensors"
	"github.com/gosafetensors/safetensors/internal/atomicfile"
	"github.com/gosafetensors/safetensors/internal/npy"
	"github.com/gosafetensors/safetensors/source"
	"github.com/spf13/cobra"
)

func init() { register(newGetCmd) }

type getFlags struct {
	slice  string
	output string
	raw    bool
	as     string
	limit  int64
	force  bool
}

func newGetCmd() *cobra.Command {
	var fl getFlags
	cmd := &cobra.Command{
		Use:   "get LOCATION NAME",
		Short: "Print a tensor's values or extract it to a .npy or raw file",
		Long: `Get reads one tensor, or a slice of it, from a model: a safetensors file,
a sharded model, a PyTorch checkpoint (as converting it would write it), local
or remote (see inspect).

Without -o it prints the values as numpy prints an array (array2string with
", " between values): floats in numpy's format, lines wrapped to the
terminal's width (75 columns in a pipe), and a tensor of more than --limit
values summarised with "..." (the first and last 3 of each long dimension;
only those are read). With -o OUT it writes a NumPy .npy file, or the raw
little-endian bytes when OUT ends in .bin or .raw or --raw is given; "-o -"
writes to stdout (not to a terminal). Output files appear atomically:
complete or not at all.

NumPy has no dtype for BF16 and the 8-, 6- and 4-bit floats: write those
raw, or convert them with --as f32.

--slice takes what Python puts between the brackets of x[...], one item per
dimension, the brackets optional: "0:2,:,-1", "[::2]", "3" (a single index
drops the dimension), "..., 0" (the Ellipsis stands for the dimensions not
named). Only the selected bytes are read. Unlike Python, a bound outside the
dimension is an error (exit 2), not clamped; steps must be positive.`,
		Example: `  safetensors get model.safetensors lm_head.weight --slice '[0:2, :5]'
  safetensors get model.safetensors lm_head.weight --slice '..., -1'
  safetensors get model.safetensors lm_head.weight -o lm_head.npy
  safetensors get model.safetensors embed.weight --as f32 -o embed.npy
  safetensors get model.safetensors embed.weight -o embed.bin`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runGet(cmd, cmd.OutOrStdout(), cmd.ErrOrStderr(), args[0], args[1], fl)
		},
	}
	f := cmd.Flags()
	f.StringVar(&fl.slice, "slice", "", "select part of the tensor, e.g. '[0:2, :, -1]' or '..., 0'; out-of-range bounds are errors")
	f.StringVarP(&fl.output, "output", "o", "", "write the tensor to `OUT` (.npy, or raw bytes for .bin/.raw; - for stdout)")
	f.BoolVar(&fl.raw, "raw", false, "write raw little-endian bytes instead of .npy")
	f.StringVar(&fl.as, "as", "", "convert the values first; only f32 is supported (from F16, BF16, F8_E4M3, F8_E5M2, F64 and integers)")
	f.Int64Var(&fl.limit, "limit", 1000, "print at most `N` values; a larger tensor is summarised with ... (-1: never)")
	f.BoolVarP(&fl.force, "force", "f", false, "overwrite OUT if it exists")
	return cmd
}

func runGet(cmd *cobra.Command, stdout, stderr io.Writer, loc, name string, fl getFlags) error {
	if fl.as != "" && fl.as != "f32" {
		return usageError("--as %q: only f32 is supported", fl.as)
	}
	idx, err := safetensors.ParseSlice(fl.slice)
	if err != nil {
		return usageError("--slice: %v", err)
	}
	if err := checkOverwrite(fl.output, fl.force); err != nil {
		return err
	}
	m, err := openLocation(cmd, loc)
	if err != nil {
		return err
	}
	defer m.Close()
	t, err := lookupTensor(m, name, stderr)
	if err != nil {
		return err
	}
	if len(idx) > 0 {
		if t, err = t.Slice(idx...); err != nil {
			return exitFor(err)
		}
	}
	if fl.output == "" {
		opt := printOptions{threshold: fl.limit, edge: defaultEdgeItems, width: terminalWidth(stdout)}
		if err := printTensor(stdout, t, fl.as == "f32", opt); err != nil {
			return exitFor(err)
		}
		if fl.limit >= 0 && t.NumElements() > fl.limit {
			summaryNote(stderr, t, fl.limit)
		}
		return nil
	}
	return writeTensor(cmdContext(cmd), stdout, stderr, loc, m, t, fl)
}

// lookupTensor finds the named tensor; a tied weight that conversion wrote
// once is served from the name kept (with a note), and a name that is not
// there is a usage mistake (exit 2) with the names it looks like.
func lookupTensor(m *source.Model, name string, stderr io.Writer) (*safetensors.Tensor, error) {
	t, err := m.Tensor(name)
	if errors.Is(err, safetensors.ErrTensorNotFound) {
		if kept, ok := m.Meta()[name]; ok {
			if kt, kerr := m.Tensor(kept); kerr == nil {
				fmt.Fprintf(stderr, "note: %s was written once as %s (tied weights; __metadata__ records %s: %s)\n", display(name), display(kept), display(name), display(kept))
				return kt, nil
			}
		}
		if s := suggestNames(m.Names(), name); len(s) > 0 {
			err = fmt.Errorf("%w\n  did you mean: %s", err, strings.Join(s, ", "))
		}
	}
	if err != nil {
		return nil, exitFor(err)
	}
	return t, nil
}

// writeTensor writes t to -o: a .npy file, or raw bytes; stdout for "-".
// A file appears only once complete; cancelling (Ctrl-C) leaves nothing.
func writeTensor(ctx context.Context, stdout, stderr io.Writer, loc string, m *source.Model, t *safetensors.Tensor, fl getFlags) error {
	// conv holds converted values; data then comes from it, not t.
	var conv []float32
	dtype := t.DType
	if fl.as == "f32" {
		var err error
		if conv, err = safetensors.ToFloat32(t); err != nil {
			return usageError("--as f32: %v", err)
		}
		dtype = safetensors.F32
	}
	raw := fl.raw || hasExt(fl.output, ".bin", ".raw")
	var descr string
	if !raw {
		var ok bool
		if descr, ok = npy.Descr(dtype); !ok {
			advice := "write the raw bytes (--raw, or an OUT ending in .bin)"
			switch dtype {
			case safetensors.BF16, safetensors.F8_E4M3, safetensors.F8_E5M2:
				advice += ", or convert with --as f32"
			}
			return usageError("%s has no NumPy dtype, so it cannot be written as .npy: %s", dtype, advice)
		}
	}
	write := func(w io.Writer) error {
		w = ctxWriter{ctx, w}
		if !raw {
			if err := npy.WriteHeader(w, descr, t.Shape); err != nil {
				return err
			}
		}
		if conv != nil {
			return writeFloat32s(w, conv)
		}
		_, err := t.WriteTo(w)
		return err
	}
	if fl.output == "-" {
		if isTerminal(stdout) {
			return usageError("refusing to write binary data to a terminal: redirect stdout or give -o a file name")
		}
		return exitFor(write(stdout))
	}
	if in, ok := outputIsInput(fl.output, loc, m, t.Name); ok {
		return usageError("%s is %s, which get reads: write the tensor elsewhere (--force never replaces an input)", fl.output, in)
	}
	out, err := atomicfile.Create(fl.output)
	if err != nil {
		return &exitError{Code: exitNoCheck, Err: err}
	}
	defer out.Abort()
	if err := write(out); err != nil {
		return exitFor(err)
	}
	if err := out.Commit(); err != nil {
		return &exitError{Code: exitNoCheck, Err: fmt.Errorf("writing %s: %w", fl.output, err)}
	}
	format := "npy"
	if raw {
		format = "raw"
	}
	fmt.Fprintf(stderr, "wrote %s (%s, %s %s, %s)\n", fl.output, format, dtype, formatShape(t.Shape), plural(t.NumElements(), "value"))
	return nil
}

// ctxWriter stops a long write once its context is cancelled.
type ctxWriter struct {
	ctx context.Context
	w   io.Writer
}

func (c ctxWriter) Write(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.w.Write(p)
}

func hasExt(path string, exts ...string) bool {
	return slices.Contains(exts, strings.ToLower(filepath.Ext(path)))
}

// suggestNames returns up to five tensor names that look like name.
func suggestNames(names []string, name string) []string {
	lower := strings.ToLower(name)
	var out []string
	for _, n := range names {
		l := strings.ToLower(n)
		close := strings.Contains(l, lower) || strings.Contains(lower, l) && len(l) > 2
		if !close && abs(len(l)-len(lower)) <= 2 {
			close = levenshtein.ComputeDistance(l, lower) <= 2 // a typo
		}
		if lower != "" && close {
			out = append(out, display(n))
			if len(out) == 5 {
				break
			}
		}
	}
	return out
}

func abs(n int) int {
	if n < 0 {
		return -n
	}
	return n
}

func writeFloat32s(w io.Writer, v []float32) error {
	buf := make([]byte, 0, min(len(v)*4, 1<<20))
	for _, x := range v {
		buf = binary.LittleEndian.AppendUint32(buf, math.Float32bits(x))
		if len(buf) == cap(buf) {
			if _, err := w.Write(buf); err != nil {
				return err
			}
			buf = buf[:0]
		}
	}
	_, err := w.Write(buf)
	return err
}
