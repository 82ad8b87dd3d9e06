package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"

	"github.com/gosafetensors/safetensors"
	"github.com/gosafetensors/safetensors/diff"
	"github.com/gosafetensors/safetensors/internal/units"
	"github.com/spf13/cobra"
)

func init() { register(newDiffCmd) }

type diffFlags struct {
	epsilon    float64
	namesOnly  bool
	json       bool
	ignoreMeta bool
}

func newDiffCmd() *cobra.Command {
	var fl diffFlags
	cmd := &cobra.Command{
		Use:   "diff A B",
		Short: "Compare the tensors and metadata of two files",
		Long: `diff lists tensors only in A, only in B, and in both with a different dtype
or shape; for the others it compares the data: identical bytes, or else the
largest absolute and relative difference and how many elements differ by more
than --epsilon, computed in float64 from every float and integer dtype (tensors
of different dtypes but the same shape are compared by value). Metadata
differences are listed too. Data is streamed in bounded chunks on all cores.

Exit status: 0 equal (within --epsilon), 1 different, 2 a file could not be
read or is not valid.`,
		Example: `  safetensors diff model.safetensors converted.safetensors
  safetensors diff a.safetensors b.safetensors --epsilon 1e-3
  safetensors diff a.safetensors b.safetensors --names-only --json`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runDiff(cmd, args[0], args[1], fl)
		},
	}
	f := cmd.Flags()
	f.Float64Var(&fl.epsilon, "epsilon", 0, "largest absolute difference still counted as equal")
	f.BoolVar(&fl.namesOnly, "names-only", false, "compare names, dtypes, shapes and metadata only; read no tensor data")
	f.BoolVar(&fl.json, "json", false, "print one JSON object (schema in the documentation)")
	f.BoolVar(&fl.ignoreMeta, "ignore-metadata", false, "metadata differences are listed but do not make the files different")
	return cmd
}

// diffJSON is the --json output of diff:
//
//	{"a": string, "b": string, "equal": bool,
//	 "only_a": [string], "only_b": [string],
//	 "tensors": [  only those that are not identical
//	   {"name": string, "alias_a", "alias_b": string (when set),
//	    "dtype_a", "dtype_b": string, "shape_a", "shape_b": [int],
//	    "compared": bool, "identical": bool, "count": int, "differing": int,
//	    "max_abs": number, exact for integer tensors, or "inf", "max_rel": number or "inf"}],
//	 "identical": int  tensors identical byte for byte,
//	 "metadata": {"only_a": {k: v}, "only_b": {k: v}, "changed": {k: [a, b]}}}
type diffJSON struct {
	A         string           `json:"a"`
	B         string           `json:"b"`
	Equal     bool             `json:"equal"`
	OnlyA     []string         `json:"only_a"`
	OnlyB     []string         `json:"only_b"`
	Tensors   []diffTensorJSON `json:"tensors"`
	Identical int              `json:"identical"`
	Metadata  diff.Meta        `json:"metadata"`
}

type diffTensorJSON struct {
	Name      string     `json:"name"`
	AliasA    string     `json:"alias_a,omitempty"`
	AliasB    string     `json:"alias_b,omitempty"`
	DTypeA    string     `json:"dtype_a"`
	DTypeB    string     `json:"dtype_b"`
	ShapeA    []int64    `json:"shape_a"`
	ShapeB    []int64    `json:"shape_b"`
	Compared  bool       `json:"compared"`
	Identical bool       `json:"identical"`
	Count     int64      `json:"count"`
	Differing int64      `json:"differing"`
	MaxAbs    jsonNumber `json:"max_abs"`
	MaxRel    jsonNumber `json:"max_rel"`
}

func runDiff(cmd *cobra.Command, fileA, fileB string, fl diffFlags) error {
	opts := []diff.Option{diff.WithEpsilon(fl.epsilon)}
	if fl.namesOnly {
		opts = append(opts, diff.WithNamesOnly())
	}
	a, err := openInput(cmd, fileA)
	if err != nil {
		return asNoCheck(err)
	}
	defer a.Close()
	b, err := openInput(cmd, fileB)
	if err != nil {
		return asNoCheck(err)
	}
	defer b.Close()
	var total int64
	for _, s := range []safetensors.Source{a, b} {
		for _, n := range s.Names() {
			info, _ := s.Info(n)
			total += info.Size()
		}
	}
	prog := newProgress(cmd.ErrOrStderr(), "diff", total)
	r, err := diff.Compare(cmdContext(cmd), a, b, append(opts, diff.WithProgress(func(done, _ int64) { prog.update(done) }))...)
	prog.done()
	if errors.Is(err, diff.ErrOption) {
		return usageError("%v", err)
	}
	if err != nil {
		return &exitError{Code: exitNoCheck, Err: withViewHint(err)}
	}
	equal := r.TensorsEqual() && (fl.ignoreMeta || r.Meta.Equal())
	w := cmd.OutOrStdout()
	if fl.json {
		out := diffJSON{A: fileA, B: fileB, Equal: equal, OnlyA: orEmpty(r.OnlyA), OnlyB: orEmpty(r.OnlyB), Tensors: []diffTensorJSON{}, Metadata: r.Meta}
		for _, t := range r.Tensors {
			if t.Identical {
				out.Identical++
				continue
			}
			maxAbs := floatJSON(t.MaxAbs)
			if t.Integer {
				maxAbs = jsonNumber(strconv.FormatUint(t.MaxAbsInt, 10))
			}
			out.Tensors = append(out.Tensors, diffTensorJSON{Name: t.Name, AliasA: t.AliasA, AliasB: t.AliasB, DTypeA: t.DTypeA.String(), DTypeB: t.DTypeB.String(),
				ShapeA: t.ShapeA, ShapeB: t.ShapeB, Compared: t.Compared, Identical: t.Identical, Count: t.Count,
				Differing: t.Differing, MaxAbs: maxAbs, MaxRel: floatJSON(t.MaxRel)})
		}
		enc := json.NewEncoder(w)
		enc.SetEscapeHTML(false)
		enc.SetIndent("", "  ")
		if err := enc.Encode(out); err != nil {
			return err
		}
	} else {
		printDiff(w, r, fl)
	}
	if !equal {
		return &exitError{Code: exitProblems}
	}
	return nil
}

// asNoCheck makes any failure to open an input exit 2: for diff, exit 1
// means "the files differ".
func asNoCheck(err error) error {
	var ee *exitError
	if errors.As(err, &ee) {
		return &exitError{Code: exitNoCheck, Err: ee.Err}
	}
	return &exitError{Code: exitNoCheck, Err: err}
}

func orEmpty(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func printDiff(w io.Writer, r *diff.Result, fl diffFlags) {
	for _, n := range r.OnlyA {
		fmt.Fprintf(w, "only in A: %s\n", display(n))
	}
	for _, n := range r.OnlyB {
		fmt.Fprintf(w, "only in B: %s\n", display(n))
	}
	var identical, within, different int
	for _, t := range r.Tensors {
		name := display(t.Name)
		switch {
		case t.AliasA != "":
			fmt.Fprintf(w, "tied weight: %s is stored as %s in A (its __metadata__ records %s: %s)\n", name, display(t.AliasA), name, display(t.AliasA))
		case t.AliasB != "":
			fmt.Fprintf(w, "tied weight: %s is stored as %s in B (its __metadata__ records %s: %s)\n", name, display(t.AliasB), name, display(t.AliasB))
		}
		switch {
		case t.ShapeDiffers():
			fmt.Fprintf(w, "shape differs: %s %s %s -> %s %s\n", name, t.DTypeA, formatShape(t.ShapeA), t.DTypeB, formatShape(t.ShapeB))
			different++
		case t.Identical:
			identical++
		case t.DTypeDiffers() && !t.Compared:
			fmt.Fprintf(w, "dtype differs: %s %s -> %s (values not comparable)\n", name, t.DTypeA, t.DTypeB)
			different++
		case t.DTypeDiffers() && t.Count == 0:
			fmt.Fprintf(w, "dtype differs: %s %s -> %s (empty tensor: no values to compare)\n", name, t.DTypeA, t.DTypeB)
			different++
		case t.DTypeDiffers() && t.Differing == 0:
			fmt.Fprintf(w, "dtype differs: %s %s -> %s; the values are equal (%s, max abs diff %s)\n", name, t.DTypeA, t.DTypeB,
				plural(t.Count, "element"), fmtMaxAbs(t))
			different++
		case !t.Compared:
		case t.Differing > 0:
			different++
			prefix := ""
			if t.DTypeDiffers() {
				prefix = fmt.Sprintf("dtype %s -> %s, ", t.DTypeA, t.DTypeB)
			}
			fmt.Fprintf(w, "values differ: %s: %s%s of %s elements, max abs diff %s, max rel diff %s\n", name, prefix,
				groupDigits(t.Differing), groupDigits(t.Count), fmtMaxAbs(t), fmtDiff(t.MaxRel))
		default:
			within++
			if fl.epsilon > 0 {
				fmt.Fprintf(w, "within epsilon: %s: max abs diff %s\n", name, fmtMaxAbs(t))
			}
		}
	}
	for _, k := range sortedKeys(r.Meta.OnlyA) {
		fmt.Fprintf(w, "metadata only in A: %s=%s\n", display(k), display(r.Meta.OnlyA[k]))
	}
	for _, k := range sortedKeys(r.Meta.OnlyB) {
		fmt.Fprintf(w, "metadata only in B: %s=%s\n", display(k), display(r.Meta.OnlyB[k]))
	}
	for _, k := range sortedKeys(r.Meta.Changed) {
		v := r.Meta.Changed[k]
		fmt.Fprintf(w, "metadata differs: %s: %s -> %s\n", display(k), display(v[0]), display(v[1]))
	}
	if fl.namesOnly {
		fmt.Fprintf(w, "%d in both (data not compared), %d only in A, %d only in B\n", len(r.Tensors), len(r.OnlyA), len(r.OnlyB))
		return
	}
	fmt.Fprintf(w, "%d in both: %d identical, %d equal within epsilon, %d different; %d only in A, %d only in B\n",
		len(r.Tensors), identical, within, different, len(r.OnlyA), len(r.OnlyB))
}

func fmtDiff(v float64) string { return strconv.FormatFloat(v, 'g', 6, 64) }

// fmtMaxAbs writes a tensor's largest absolute difference: exact for
// integer tensors.
func fmtMaxAbs(t diff.Tensor) string {
	if t.Integer {
		return units.DigitsU(t.MaxAbsInt)
	}
	return fmtDiff(t.MaxAbs)
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
