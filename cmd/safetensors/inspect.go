package main

import (
	"cmp"
	"fmt"
	"io"
	"maps"
	"path"
	"slices"
	"strings"

	"github.com/gosafetensors/safetensors"
	"github.com/gosafetensors/safetensors/inspect"
	"github.com/spf13/cobra"
)

func init() { register(newInspectCmd) }

type inspectFlags struct {
	json    bool
	sort    string
	filters []string
	summary bool
	long    bool
	tree    bool
	quiet   bool
}

func newInspectCmd() *cobra.Command {
	var fl inspectFlags
	cmd := &cobra.Command{
		Use:   "inspect LOCATION",
		Short: "List tensors, parameter counts and metadata of a model",
		Long: `Inspect lists the tensors of a model (name, dtype, shape, parameters,
bytes) in name order (h.2 before h.10), then totals like the Hugging Face Hub's: parameters
exact and rounded (137M, 8.03B), parameters and bytes per dtype, the header
size and the metadata. Only headers are read.

LOCATION is a safetensors file (plain or compressed), a sharded model (a
directory, or its model.safetensors.index.json: one line per shard, then
model totals), a URL (http(s)://, hf://ORG/REPO[@REV][/FILE], s3://, gs://,
azblob://), or a PyTorch checkpoint (zip or legacy), read by the same inert
decoder as convert and listed as the file converting it would write: nothing
in it is executed, and a checkpoint that refers to anything but plain
tensors is refused. Formats are recognised by content, never by name.

Exit status (as for every command, see safetensors --help): 0 ok, 1 the
content is not a valid model, 2 it could not be read, holds no model, or
--filter matches no tensor.`,
		Example: `  safetensors inspect model.safetensors
  safetensors inspect model.safetensors --filter '*.layers.0.*' --sort size
  safetensors inspect model.safetensors --summary
  safetensors inspect model.safetensors --json | jq .total_parameters
  safetensors inspect --tree hf://org/model
  safetensors inspect -q model.safetensors | grep attn`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runInspect(cmd, cmd.OutOrStdout(), args[0], fl)
		},
	}
	f := cmd.Flags()
	f.BoolVar(&fl.json, "json", false, "print one JSON object (schema in the documentation)")
	f.StringVar(&fl.sort, "sort", "name", "order of the tensor list: name (numbers in names compared as numbers: h.2 before h.10), offset (file order; shard by shard), size (largest first)")
	f.StringArrayVar(&fl.filters, "filter", nil, "list only tensors whose name contains `PATTERN`, or matches it as a glob when it has * ? or [ (repeatable: any may match); totals cover the listed tensors")
	f.BoolVarP(&fl.summary, "summary", "s", false, "print only the totals and metadata, not the tensor list")
	f.BoolVarP(&fl.long, "long", "l", false, "also show each tensor's data_offsets (and shard)")
	f.BoolVar(&fl.tree, "tree", false, "group tensors by dotted prefix, numbered layers collapsed, parameters per group")
	f.BoolVarP(&fl.quiet, "quiet", "q", false, "print only the tensor names, one per line")
	return cmd
}

// dtypeTotal accumulates one dtype's share.
type dtypeTotal struct {
	dtype         safetensors.DType
	params, bytes int64
}

func runInspect(cmd *cobra.Command, w io.Writer, file string, fl inspectFlags) error {
	if err := fl.check(); err != nil {
		return err
	}
	f, err := openInspected(cmd, file)
	if err != nil {
		return err
	}
	tensors, err := fl.pick(f.Tensors)
	if err != nil {
		return err
	}
	switch {
	case fl.quiet:
		var b strings.Builder
		for _, t := range tensors {
			b.WriteString(display(t.Name))
			b.WriteByte('\n')
		}
		_, err := io.WriteString(w, b.String())
		return err
	case fl.json:
		return f.Report(file, tensors).WriteJSON(w)
	}
	var b strings.Builder
	switch {
	case fl.summary || len(tensors) == 0:
	case fl.tree:
		writeTree(&b, tensors)
		b.WriteByte('\n')
	default:
		writeTensorTable(&b, tensors, fl.long && f.Offsets, f.bytes)
		b.WriteByte('\n')
	}
	writeTotals(&b, paletteFor(w), file, f, tensors, len(fl.filters) > 0)
	_, err = io.WriteString(w, b.String())
	return err
}

// check refuses flag values that make no sense, before anything is read.
func (fl *inspectFlags) check() error {
	switch fl.sort {
	case "offset", "name", "size":
	default:
		return usageError("--sort %q: want name, offset or size", fl.sort)
	}
	for _, p := range fl.filters {
		if _, err := path.Match(p, ""); err != nil {
			return usageError("--filter %q: %v", p, err)
		}
	}
	return nil
}

// pick returns the tensors to show: those --filter selects (a filter that
// selects none is an error), in --sort order. Names sort as a person reads
// them (h.2 before h.10).
func (fl *inspectFlags) pick(all []safetensors.TensorInfo) ([]safetensors.TensorInfo, error) {
	tensors := selectTensors(all, fl.filters)
	if len(fl.filters) > 0 && len(tensors) == 0 && len(all) > 0 {
		return nil, noMatch(fl.filters, all)
	}
	switch fl.sort {
	case "name":
		tensors = inspect.ByName(tensors)
	case "size":
		slices.SortStableFunc(tensors, func(a, b safetensors.TensorInfo) int { return cmp.Compare(b.Size(), a.Size()) })
	}
	return tensors, nil
}

// writeTotals writes the totals, like the Hub's "Model size: 8.03B params,
// Tensor type: BF16": where the tensors are, how many, parameters and
// bytes (by dtype), the header, the metadata and the warnings.
func writeTotals(b *strings.Builder, p palette, file string, f *inspected, tensors []safetensors.TensorInfo, filtered bool) {
	writeWhere(b, file, f)
	if filtered {
		fmt.Fprintf(b, "tensors     %s of %s match\n", groupDigits(int64(len(tensors))), groupDigits(int64(len(f.Tensors))))
	} else {
		fmt.Fprintf(b, "tensors     %s\n", groupDigits(int64(len(tensors))))
	}
	totalParams, totalBytes, totals := dtypeTotals(tensors, f.bytes)
	fmt.Fprintf(b, "parameters  %s\n", withExact(humanCount(totalParams), totalParams))
	fmt.Fprintf(b, "bytes       %s\n", withExact(humanBytes(totalBytes), totalBytes))
	if len(totals) > 0 {
		rows := [][]string{}
		for _, d := range totals {
			pct := "-"
			if totalParams > 0 {
				pct = fmt.Sprintf("%.1f%%", 100*float64(d.params)/float64(totalParams))
			}
			rows = append(rows, []string{d.dtype.String(), humanCount(d.params) + " params", groupDigits(d.params), pct, humanBytes(d.bytes)})
		}
		b.WriteString("by dtype\n")
		writeColumns(b, "  ", rows, []bool{false, true, true, true, true})
	}
	if f.HeaderSize > 0 {
		fmt.Fprintf(b, "header      %s bytes, data starts at byte %s\n", groupDigits(f.HeaderSize), groupDigits(8+f.HeaderSize))
	}
	writeMetadata(b, f.Metadata)
	for _, warn := range f.Warnings {
		fmt.Fprintf(b, "%s %s\n", p.paint(colorWarn, "warning:"), display(warn))
	}
}

// writeWhere writes where the tensors are: the shards of a sharded model,
// a compressed file's sizes, a checkpoint's format, and the notes.
func writeWhere(b *strings.Builder, file string, f *inspected) {
	switch {
	case f.Format == "sharded":
		fmt.Fprintf(b, "model       %s: %s, %s of tensor data\n", display(file), plural(int64(len(f.Shards)), "shard"), humanBytes(f.FileSize))
		rows := [][]string{}
		for _, sh := range f.Shards {
			rows = append(rows, []string{display(sh.Name), plural(int64(sh.Tensors), "tensor"), humanCount(sh.Parameters) + " params", humanBytes(sh.Bytes)})
		}
		writeColumns(b, "  ", rows, []bool{false, true, true, true})
	case f.DataSize > 0:
		fmt.Fprintf(b, "file        %s (%s, %s uncompressed, %.2f of the original)\n", display(file), humanBytes(f.FileSize), humanBytes(f.DataSize), float64(f.FileSize)/float64(f.DataSize))
		fmt.Fprintf(b, "format      %s: tensors and slices are read by decompressing only the frames that hold them\n", f.Format)
	default:
		fmt.Fprintf(b, "file        %s (%s)\n", display(file), humanBytes(f.FileSize))
	}
	if strings.HasPrefix(f.Format, "pytorch-") {
		fmt.Fprintf(b, "format      PyTorch checkpoint (%s), read without running it; `safetensors convert` makes a safetensors file\n", strings.TrimPrefix(f.Format, "pytorch-"))
	}
	for _, n := range f.notes {
		fmt.Fprintf(b, "note        %s\n", n)
	}
}

// dtypeTotals sums parameters and bytes, overall and by dtype (the dtype
// with the most parameters first).
func dtypeTotals(tensors []safetensors.TensorInfo, size func(safetensors.TensorInfo) int64) (params, bytes int64, totals []*dtypeTotal) {
	byDType := map[safetensors.DType]*dtypeTotal{}
	for _, t := range tensors {
		n := t.NumElements()
		params += n
		bytes += size(t)
		d := byDType[t.DType]
		if d == nil {
			d = &dtypeTotal{dtype: t.DType}
			byDType[t.DType] = d
			totals = append(totals, d)
		}
		d.params += n
		d.bytes += size(t)
	}
	slices.SortFunc(totals, func(a, b *dtypeTotal) int {
		return cmp.Or(cmp.Compare(b.params, a.params), cmp.Compare(b.bytes, a.bytes), cmp.Compare(a.dtype, b.dtype))
	})
	return params, bytes, totals
}

// writeMetadata writes __metadata__ sorted by key, long values cut.
func writeMetadata(b *strings.Builder, meta map[string]string) {
	if len(meta) == 0 {
		return
	}
	b.WriteString("metadata\n")
	for _, k := range slices.Sorted(maps.Keys(meta)) {
		v := meta[k]
		shown := truncate(display(v), 200)
		if shown != display(v) {
			shown += fmt.Sprintf(" (%s bytes; --json shows all)", groupDigits(int64(len(v))))
		}
		fmt.Fprintf(b, "  %s = %s\n", display(k), shown)
	}
}

// selectTensors returns a copy of the tensors whose names match any filter
// (all of them when there are no filters).
func selectTensors(all []safetensors.TensorInfo, filters []string) []safetensors.TensorInfo {
	if len(filters) == 0 {
		return slices.Clone(all)
	}
	var out []safetensors.TensorInfo
	for _, t := range all {
		for _, p := range filters {
			if matchName(p, t.Name) {
				out = append(out, t)
				break
			}
		}
	}
	return out
}

// noMatch is the error for filters that match none of the tensors: a
// usage mistake (exit 2), with the glob that would have matched when the
// pattern was anchored by mistake (a glob must match the whole name).
func noMatch(filters []string, all []safetensors.TensorInfo) error {
	quoted := make([]string, len(filters))
	for i, p := range filters {
		quoted[i] = "'" + display(p) + "'"
	}
	msg := fmt.Sprintf("--filter %s matches none of the %s", strings.Join(quoted, ", "), plural(int64(len(all)), "tensor"))
	for _, p := range filters {
		if !strings.ContainsAny(p, "*?[") {
			continue
		}
		wide := "*" + strings.Trim(p, "*") + "*"
		for _, t := range all {
			if matchName(wide, t.Name) {
				return usageError("%s\n  a glob matches the whole name: did you mean --filter '%s' (it matches %s)?", msg, display(wide), display(t.Name))
			}
		}
	}
	return usageError("%s\n  tensors are named like %s", msg, display(all[0].Name))
}

// matchName matches a glob when the pattern has glob characters, else a
// substring.
func matchName(pattern, name string) bool {
	if strings.ContainsAny(pattern, "*?[") {
		ok, _ := path.Match(pattern, name)
		return ok
	}
	return strings.Contains(name, pattern)
}

// writeTensorTable writes one row per tensor, columns aligned.
func writeTensorTable(b *strings.Builder, tensors []safetensors.TensorInfo, long bool, size func(safetensors.TensorInfo) int64) {
	header := []string{"NAME", "DTYPE", "SHAPE", "PARAMS", "BYTES"}
	right := []bool{false, false, false, true, true}
	if long {
		header = append(header, "OFFSETS")
		right = append(right, false)
	}
	rows := make([][]string, 0, len(tensors)+1)
	rows = append(rows, header)
	for _, t := range tensors {
		row := []string{display(t.Name), t.DType.String(), formatShape(t.Shape), groupDigits(t.NumElements()), humanBytes(size(t))}
		if long {
			row = append(row, fmt.Sprintf("[%d, %d]", t.DataOffsets[0], t.DataOffsets[1]))
		}
		rows = append(rows, row)
	}
	writeColumns(b, "", rows, right)
}

// writeColumns writes rows as aligned columns separated by two spaces,
// right-aligning the columns marked in right. The last column is not padded
// when left-aligned.
func writeColumns(b *strings.Builder, indent string, rows [][]string, right []bool) {
	var widths []int
	for _, r := range rows {
		for i, c := range r {
			if i >= len(widths) {
				widths = append(widths, 0)
			}
			widths[i] = max(widths[i], width(c))
		}
	}
	for _, r := range rows {
		b.WriteString(indent)
		for i, c := range r {
			if i > 0 {
				b.WriteString("  ")
			}
			switch {
			case right[i]:
				padLeft(b, c, widths[i])
			case i == len(r)-1:
				b.WriteString(c)
			default:
				padRight(b, c, widths[i])
			}
		}
		b.WriteByte('\n')
	}
}

// withExact appends the exact count in parentheses when the rounded form
// differs from it ("1.60K (1,600)", but "99", not "99 (99)").
func withExact(rounded string, n int64) string {
	exact := groupDigits(n)
	if rounded == exact || rounded == exact+" B" {
		return rounded
	}
	return rounded + " (" + exact + ")"
}
