package main

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"slices"
	"strconv"
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
		Use:   "get FILE NAME",
		Short: "Print a tensor's values or extract it to a .npy or raw file",
		Long: `Get reads one tensor, or a slice of it, from a safetensors file.

Without -o it prints the values (up to --limit of them) as nested lists, like
numpy; a larger tensor is described instead. With -o OUT it writes a NumPy
.npy file, or the raw little-endian bytes when OUT ends in .bin or .raw or
--raw is given; "-o -" writes to stdout (not to a terminal). Output files
appear atomically: complete or not at all.

NumPy has no dtype for BF16 and the 8-, 6- and 4-bit floats: write those
raw, or convert them with --as f32.

--slice takes Python subscript syntax, one item per dimension: "0:2,:,-1",
"::2", "3" (a single index drops the dimension). Only the selected bytes
are read.`,
		Example: `  safetensors get model.safetensors lm_head.weight --slice '0:2,:5'
  safetensors get model.safetensors lm_head.weight -o lm_head.npy
  safetensors get model.safetensors embed.weight --as f32 -o embed.npy
  safetensors get model.safetensors embed.weight -o embed.bin`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runGet(cmd, cmd.OutOrStdout(), cmd.ErrOrStderr(), args[0], args[1], fl)
		},
	}
	f := cmd.Flags()
	f.StringVar(&fl.slice, "slice", "", "select part of the tensor, e.g. '0:2,:,-1'")
	f.StringVarP(&fl.output, "output", "o", "", "write the tensor to `OUT` (.npy, or raw bytes for .bin/.raw; - for stdout)")
	f.BoolVar(&fl.raw, "raw", false, "write raw little-endian bytes instead of .npy")
	f.StringVar(&fl.as, "as", "", "convert the values first; only f32 is supported (from F16, BF16, F8_E4M3, F8_E5M2, F64 and integers)")
	f.Int64Var(&fl.limit, "limit", 1000, "print the values only when there are at most `N` of them")
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
	t, err := m.Tensor(name)
	if errors.Is(err, safetensors.ErrTensorNotFound) {
		// a tied weight removed on conversion is served from the name kept
		if kept, ok := m.Meta()[name]; ok {
			if kt, kerr := m.Tensor(kept); kerr == nil {
				fmt.Fprintf(stderr, "note: %s was written once as %s (tied weights; __metadata__ records %s: %s)\n", display(name), display(kept), display(name), display(kept))
				t, err = kt, nil
			}
		}
	}
	if err != nil {
		if errors.Is(err, safetensors.ErrTensorNotFound) {
			if s := suggestNames(m.Names(), name); len(s) > 0 {
				err = fmt.Errorf("%w\n  did you mean: %s", err, strings.Join(s, ", "))
			}
			// a name that is not there is a usage mistake, not a verdict
			return &exitError{Code: exitNoCheck, Err: err}
		}
		return exitFor(err)
	}
	if len(idx) > 0 {
		if t, err = t.Slice(idx...); err != nil {
			if source.IsIOError(err) {
				return &exitError{Code: exitNoCheck, Err: err}
			}
			return usageError("%v", err)
		}
	}

	// conv holds converted values; data then comes from it, not t.
	var conv []float32
	dtype := t.DType
	if fl.as == "f32" {
		if conv, err = safetensors.ToFloat32(t); err != nil {
			return usageError("--as f32: %v", err)
		}
		dtype = safetensors.F32
	}

	if fl.output == "" {
		return printTensor(stdout, stderr, t, conv, fl.limit)
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
		if err := write(stdout); err != nil {
			return exitFor(err)
		}
		return nil
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

// printTensor prints the values as nested lists when there are at most
// limit of them, and otherwise describes the tensor.
func printTensor(stdout, stderr io.Writer, t *safetensors.Tensor, conv []float32, limit int64) error {
	n := t.NumElements()
	dtype := t.DType
	if conv != nil {
		dtype = safetensors.F32
	}
	if n > limit {
		fmt.Fprintf(stdout, "%s: %s %s (%s, %s)\n", display(t.Name), dtype, formatShape(t.Shape), plural(n, "value"), humanBytes(n*int64(dtype.Bits())/8))
		fmt.Fprintf(stderr, "too many values to print (--limit %d): extract the tensor with -o FILE.npy, or print a part with --slice\n", limit)
		return nil
	}
	vals, err := formatValues(t, conv)
	if err != nil {
		return err
	}
	_, err = io.WriteString(stdout, nested(vals, t.Shape)+"\n")
	return err
}

// formatValues spells each element: floats in the shortest form that reads
// back exactly, booleans as True/False like numpy.
func formatValues(t *safetensors.Tensor, conv []float32) ([]string, error) {
	if conv != nil {
		return mapValues(conv, fmtFloat32), nil
	}
	switch t.DType {
	case safetensors.F32:
		return viewValues(t, fmtFloat32)
	case safetensors.F64:
		return viewValues(t, func(v float64) string { return fmtFloat(v, 64) })
	case safetensors.F16, safetensors.BF16, safetensors.F8_E4M3, safetensors.F8_E5M2:
		v, err := safetensors.ToFloat32(t)
		if err != nil {
			return nil, err
		}
		return mapValues(v, fmtFloat32), nil
	case safetensors.BOOL:
		return viewValues(t, func(v uint8) string {
			if v != 0 {
				return "True"
			}
			return "False"
		})
	case safetensors.U8:
		return viewValues(t, func(v uint8) string { return strconv.FormatUint(uint64(v), 10) })
	case safetensors.I8:
		return viewValues(t, func(v int8) string { return strconv.FormatInt(int64(v), 10) })
	case safetensors.I16:
		return viewValues(t, func(v int16) string { return strconv.FormatInt(int64(v), 10) })
	case safetensors.U16:
		return viewValues(t, func(v uint16) string { return strconv.FormatUint(uint64(v), 10) })
	case safetensors.I32:
		return viewValues(t, func(v int32) string { return strconv.FormatInt(int64(v), 10) })
	case safetensors.U32:
		return viewValues(t, func(v uint32) string { return strconv.FormatUint(uint64(v), 10) })
	case safetensors.I64:
		return viewValues(t, func(v int64) string { return strconv.FormatInt(v, 10) })
	case safetensors.U64:
		return viewValues(t, func(v uint64) string { return strconv.FormatUint(v, 10) })
	case safetensors.C64:
		return viewValues(t, func(v complex64) string {
			im := fmtFloat(float64(imag(v)), 32)
			if !strings.HasPrefix(im, "-") {
				im = "+" + im
			}
			return "(" + fmtFloat(float64(real(v)), 32) + im + "j)"
		})
	}
	return nil, usageError("cannot print values of dtype %s: extract the raw bytes with -o FILE.bin", t.DType)
}

func viewValues[T safetensors.Number](t *safetensors.Tensor, f func(T) string) ([]string, error) {
	v, err := safetensors.As[T](t)
	if err != nil {
		return nil, err
	}
	return mapValues(v, f), nil
}

func mapValues[T any](v []T, f func(T) string) []string {
	out := make([]string, len(v))
	for i, x := range v {
		out[i] = f(x)
	}
	return out
}

func fmtFloat32(v float32) string { return fmtFloat(float64(v), 32) }

// fmtFloat spells a float like numpy: nan, inf, -inf, else the shortest
// decimal that reads back exactly.
func fmtFloat(v float64, bits int) string {
	switch {
	case math.IsNaN(v):
		return "nan"
	case math.IsInf(v, 1):
		return "inf"
	case math.IsInf(v, -1):
		return "-inf"
	}
	return strconv.FormatFloat(v, 'g', -1, bits)
}

// nested lays out values of the given shape as nested lists, numpy style:
//
//	[[1, 2, 3],
//	 [4, 5, 6]]
//
// with values right-aligned to a common width and a blank line between
// blocks of three and more dimensions. A scalar prints as its value.
func nested(vals []string, shape []int64) string {
	if len(shape) == 0 {
		if len(vals) == 0 {
			return "[]"
		}
		return vals[0]
	}
	w := 0
	for _, v := range vals {
		w = max(w, len(v))
	}
	var b strings.Builder
	pos := 0
	var rec func(d int)
	rec = func(d int) {
		b.WriteByte('[')
		for i := int64(0); i < shape[d]; i++ {
			if i > 0 {
				if d == len(shape)-1 {
					b.WriteString(", ")
				} else {
					b.WriteByte(',')
					b.WriteString(strings.Repeat("\n", len(shape)-1-d))
					b.WriteString(strings.Repeat(" ", d+1))
				}
			}
			if d == len(shape)-1 {
				v := vals[pos]
				pos++
				b.WriteString(strings.Repeat(" ", w-len(v)))
				b.WriteString(v)
			} else {
				rec(d + 1)
			}
		}
		b.WriteByte(']')
	}
	rec(0)
	return b.String()
}
