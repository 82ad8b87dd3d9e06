package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"

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

// statsJSON is one element of stats --json (docs/json.md):
//
//	{"name": string, "dtype": string, "shape": [int], "count": int,
//	 "decoded": bool, "min", "max", "mean", "std": number, "inf", "-inf" or
//	 null (no finite value, or not decoded),
//	 "finite": int, "zeros": int, "nan": int, "pos_inf": int, "neg_inf": int}
//
// min and max of an integer tensor are its exact extremes, as integers.
type statsJSON struct {
	Name    string     `json:"name"`
	DType   string     `json:"dtype"`
	Shape   []int64    `json:"shape"`
	Count   int64      `json:"count"`
	Decoded bool       `json:"decoded"`
	Min     jsonNumber `json:"min"`
	Max     jsonNumber `json:"max"`
	Mean    jsonNumber `json:"mean"`
	Std     jsonNumber `json:"std"`
	Finite  int64      `json:"finite"`
	Zeros   int64      `json:"zeros"`
	NaN     int64      `json:"nan"`
	PosInf  int64      `json:"pos_inf"`
	NegInf  int64      `json:"neg_inf"`
}

// jsonNumber is a number as it goes into JSON output, exactly: a number
// literal, one of the strings "inf", "-inf" and "nan" (JSON has no
// infinity; Python's float() and Go's strconv.ParseFloat read them back),
// or null ("") for a value that is not defined.
type jsonNumber string

// MarshalJSON writes the literal, or null.
func (n jsonNumber) MarshalJSON() ([]byte, error) {
	if n == "" {
		return []byte("null"), nil
	}
	return []byte(n), nil
}

// UnmarshalJSON keeps the literal as it is (tests read the output back).
func (n *jsonNumber) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*n = ""
		return nil
	}
	*n = jsonNumber(b)
	return nil
}

// Float returns the value (NaN for null).
func (n jsonNumber) Float() float64 {
	v, err := strconv.ParseFloat(strings.Trim(string(n), `"`), 64)
	if err != nil {
		return math.NaN()
	}
	return v
}

// floatJSON is v for JSON: the shortest decimal that reads back as v;
// "inf" or "-inf" for an infinity; null for NaN, which the libraries use
// for "not defined".
func floatJSON(v float64) jsonNumber {
	switch {
	case math.IsNaN(v):
		return ""
	case math.IsInf(v, 1):
		return `"inf"`
	case math.IsInf(v, -1):
		return `"-inf"`
	}
	b, _ := json.Marshal(v)
	return jsonNumber(b)
}

// intJSON is an exact integer for JSON.
func intJSON(s string, ok bool) jsonNumber {
	if !ok {
		return ""
	}
	return jsonNumber(s)
}

// minMax returns the minimum and maximum of s for output: exact for an
// integer tensor.
func minMax(s stats.Stats) (jsonNumber, jsonNumber) {
	if s.IsInteger() {
		return intJSON(s.ExactMin()), intJSON(s.ExactMax())
	}
	return floatJSON(s.Min), floatJSON(s.Max)
}

func runStats(cmd *cobra.Command, file string, names []string, asJSON bool) error {
	src, err := openInput(cmd, file)
	if err != nil {
		return err
	}
	defer src.Close()
	for _, n := range names {
		if _, ok := src.Info(n); !ok {
			msg := fmt.Sprintf("%s: no tensor named %s", file, display(n))
			if s := suggestNames(src.Names(), n); len(s) > 0 {
				msg += "\n  did you mean: " + strings.Join(s, ", ")
			}
			return usageError("%s", msg)
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
		return exitFor(err)
	}
	w := cmd.OutOrStdout()
	if asJSON {
		out := make([]statsJSON, len(res))
		for i, s := range res {
			lo, hi := minMax(s)
			out[i] = statsJSON{Name: s.Name, DType: s.DType.String(), Shape: s.Shape, Count: s.Count, Decoded: s.Decoded,
				Min: lo, Max: hi, Mean: floatJSON(s.Mean), Std: floatJSON(s.Std),
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

// fmtExtreme writes a minimum or maximum: exact for an integer tensor.
func fmtExtreme(s stats.Stats, exact func() (string, bool), v float64) string {
	if e, ok := exact(); ok {
		return e
	}
	return fmtStat(v)
}

func printStats(w io.Writer, res []stats.Stats) {
	rows := [][]string{{"name", "dtype", "shape", "min", "max", "mean", "std", "zeros", "NaN", "+Inf", "-Inf"}}
	right := []bool{false, false, false, true, true, true, true, true, true, true, true}
	var nan, inf int64
	for _, s := range res {
		rows = append(rows, []string{display(truncate(s.Name, 60)), s.DType.String(), formatShape(s.Shape),
			fmtExtreme(s, s.ExactMin, s.Min), fmtExtreme(s, s.ExactMax, s.Max), fmtStat(s.Mean), fmtStat(s.Std),
			groupDigits(s.Zeros), groupDigits(s.NaN), groupDigits(s.PosInf), groupDigits(s.NegInf)})
		nan += s.NaN
		inf += s.Inf()
	}
	var b strings.Builder
	writeColumns(&b, "", rows, right)
	io.WriteString(w, b.String())
	fmt.Fprintf(w, "%s; %s NaN, %s infinite values\n", plural(int64(len(res)), "tensor"), groupDigits(nan), groupDigits(inf))
}
