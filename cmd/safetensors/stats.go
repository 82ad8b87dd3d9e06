package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"text/tabwriter"

	"github.com/gosafetensors/safetensors"
	"github.com/gosafetensors/safetensors/stats"
	"github.com/spf13/cobra"
)

func init() { register(newStatsCmd) }

// openInput opens a location for stats, diff and estimate as a Source:
// a file, a sharded model, a PyTorch checkpoint (read inertly), a remote or
// compressed file, through the CLI's one opener.
func openInput(cmd *cobra.Command, location string) (safetensors.Source, error) {
	return openSource(cmd, location)
}

func newStatsCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "stats FILE [NAME...]",
		Short: "Per-tensor min, max, mean, std, zeros, NaN and infinities",
		Long: `stats reads every value of the named tensors (all tensors when no name is
given) once and prints, per tensor, the minimum, maximum, mean and population
standard deviation of its finite values, and how many values are zero, NaN,
+Inf and -Inf. Every float and integer dtype is decoded (F8, F4 and BOOL
included); C64 gets NaN and infinity counts only, F6 nothing. Tensors are
read in bounded chunks on all cores, with a progress bar on a terminal.

Exit status: 0 ok, 1 the file is not a valid safetensors file, 2 it could
not be read or a name is not in it.`,
		Example: `  safetensors stats model.safetensors
  safetensors stats model.safetensors lm_head.weight model.norm.weight
  safetensors stats model.safetensors --json | jq '.[] | select(.nan > 0) | .name'`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runStats(cmd, args[0], args[1:], asJSON)
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print a JSON array, one object per tensor (null for undefined statistics)")
	return cmd
}

// statsJSON is one element of stats --json:
//
//	{"name": string, "dtype": string, "shape": [int], "count": int,
//	 "decoded": bool, "min", "max", "mean", "std": number or null (no finite value, or not decoded),
//	 "finite": int, "zeros": int, "nan": int, "pos_inf": int, "neg_inf": int}
type statsJSON struct {
	Name    string   `json:"name"`
	DType   string   `json:"dtype"`
	Shape   []int64  `json:"shape"`
	Count   int64    `json:"count"`
	Decoded bool     `json:"decoded"`
	Min     *float64 `json:"min"`
	Max     *float64 `json:"max"`
	Mean    *float64 `json:"mean"`
	Std     *float64 `json:"std"`
	Finite  int64    `json:"finite"`
	Zeros   int64    `json:"zeros"`
	NaN     int64    `json:"nan"`
	PosInf  int64    `json:"pos_inf"`
	NegInf  int64    `json:"neg_inf"`
}

// num is v for JSON: null when it is not a finite number.
func num(v float64) *float64 {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return nil
	}
	return &v
}

func runStats(cmd *cobra.Command, file string, names []string, asJSON bool) error {
	src, err := openInput(cmd, file)
	if err != nil {
		return err
	}
	defer src.Close()
	for _, n := range names {
		if _, ok := src.Info(n); !ok {
			return usageError("%s: no tensor named %s", file, display(n))
		}
	}
	var total int64
	list := names
	if len(list) == 0 {
		list = src.Names()
	}
	for _, n := range list {
		info, _ := src.Info(n)
		total += info.Size()
	}
	prog := newProgress(cmd.ErrOrStderr(), "stats "+display(file), total)
	res, err := stats.Compute(cmdContext(cmd), src, names, stats.WithProgress(func(done, _ int64) { prog.update(done) }))
	prog.done()
	if err != nil {
		var fe *safetensors.FormatError
		if errors.As(err, &fe) {
			return &exitError{Code: exitProblems, Err: err}
		}
		return &exitError{Code: exitNoCheck, Err: err}
	}
	w := cmd.OutOrStdout()
	if asJSON {
		out := make([]statsJSON, len(res))
		for i, s := range res {
			out[i] = statsJSON{Name: s.Name, DType: s.DType.String(), Shape: s.Shape, Count: s.Count, Decoded: s.Decoded,
				Min: num(s.Min), Max: num(s.Max), Mean: num(s.Mean), Std: num(s.Std),
				Finite: s.Finite, Zeros: s.Zeros, NaN: s.NaN, PosInf: s.PosInf, NegInf: s.NegInf}
		}
		enc := json.NewEncoder(w)
		enc.SetEscapeHTML(false)
		if len(out) <= 1000 {
			enc.SetIndent("", "  ")
		}
		return enc.Encode(out)
	}
	printStats(w, res)
	return nil
}

// fmtStat writes a statistic with 6 significant digits; "-" when undefined.
func fmtStat(v float64) string {
	if math.IsNaN(v) {
		return "-"
	}
	return strconv.FormatFloat(v, 'g', 6, 64)
}

func printStats(w io.Writer, res []stats.Stats) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "name\tdtype\tshape\tmin\tmax\tmean\tstd\tzeros\tNaN\t+Inf\t-Inf\t")
	var nan, inf int64
	for _, s := range res {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", display(truncate(s.Name, 60)), s.DType, formatShape(s.Shape),
			fmtStat(s.Min), fmtStat(s.Max), fmtStat(s.Mean), fmtStat(s.Std),
			groupDigits(s.Zeros), groupDigits(s.NaN), groupDigits(s.PosInf), groupDigits(s.NegInf))
		nan += s.NaN
		inf += s.Inf()
	}
	tw.Flush()
	fmt.Fprintf(w, "%d tensors; %s NaN, %s infinite values\n", len(res), groupDigits(nan), groupDigits(inf))
}
