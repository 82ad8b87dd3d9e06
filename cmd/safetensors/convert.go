package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/gosafetensors/safetensors/convert"
	"github.com/gosafetensors/safetensors/source"
	"github.com/gosafetensors/safetensors/torch"
)

func init() { register(newConvertCmd) }

type convertFlags struct {
	key         string
	prefer      []string
	discard     []string
	keepAliases bool
	noVerify    bool
	force       bool
	dryRun      bool
	maxOutput   string
	json        bool
	sha256      bool
	allow       []string
}

func newConvertCmd() *cobra.Command {
	var fl convertFlags
	cmd := &cobra.Command{
		Use:   "convert IN [OUT]",
		Short: "Convert a PyTorch checkpoint (.bin .pt .pth .ckpt) to safetensors, without running it",
		Long: `Convert a PyTorch checkpoint to safetensors. The pickle is decoded by an
inert interpreter with an allowlist: nothing in the file is ever executed, and
a file that would run code is refused, naming the offending global.

IN is a checkpoint file or a directory. OUT defaults to the Hugging Face name
beside IN: pytorch_model.bin -> model.safetensors,
pytorch_model-00001-of-00002.bin -> model-00001-of-00002.safetensors, X.pt ->
X.safetensors. For a directory, its pytorch_model*.bin.index.json shards are
converted and model.safetensors.index.json written (else pytorch_model.bin,
else every .bin/.pt/.pth/.ckpt); OUT is then an output directory.

The state dict is unwrapped from training checkpoints ("state_dict", or
"model" beside optimizer state; --key picks another entry). Optimizer state
and non-tensor values are skipped and listed. Tied weights (names that are the
identical view of one storage) are written once, as Hugging Face's convert.py
does, and recorded in __metadata__ as removed -> kept; every other view is
written as its own contiguous tensor. The output is re-read and compared byte
for byte with the source before it appears under its name.

Exit status: 0 converted, 1 refused (dangerous, unsupported or corrupt
input), 2 could not read or write (or the output exists: use --force).`,
		Example: `  safetensors convert pytorch_model.bin
  safetensors convert checkpoint.ckpt model.safetensors --key state_dict
  safetensors convert old-model/ converted/          # shards and index
  safetensors convert hf://org/old-model/pytorch_model.bin model.safetensors
  safetensors convert -n --json model.pt | jq '.[0].removed'`,
		Args: cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			out := ""
			if len(args) == 2 {
				out = args[1]
			}
			return runConvert(cmd, cmd.OutOrStdout(), cmd.ErrOrStderr(), args[0], out, fl)
		},
	}
	f := cmd.Flags()
	f.StringVar(&fl.key, "key", "", "convert this entry of the checkpoint (e.g. state_dict, model, ema)")
	f.StringArrayVar(&fl.prefer, "prefer", nil, "among tied names, keep this one (repeatable)")
	f.StringArrayVar(&fl.discard, "discard", nil, "among tied names, do not keep this one (repeatable)")
	f.BoolVar(&fl.keepAliases, "keep-aliases", false, "write every tied name as its own copy")
	f.BoolVar(&fl.noVerify, "no-verify", false, "do not read the output back and compare it byte for byte with the source")
	f.BoolVarP(&fl.force, "force", "f", false, "overwrite existing outputs")
	f.BoolVarP(&fl.dryRun, "dry-run", "n", false, "show what would be written, write nothing")
	f.BoolVar(&fl.json, "json", false, "print a JSON report on stdout instead of the summary line (schema in the documentation)")
	f.BoolVar(&fl.sha256, "sha256", false, "record each written tensor's SHA-256 (shown with --json)")
	f.StringArrayVar(&fl.allow, "allow", nil, "allow this global beyond the allowlist, e.g. argparse.Namespace (repeatable; nothing is ever run, what it builds is skipped)")
	f.StringVar(&fl.maxOutput, "max-output", "", "cap on the tensor data written, e.g. 200GiB, or -1 for none (default: 64x the stored bytes or 1GiB, whichever is more; zero-stride views can expand a tiny file)")
	return cmd
}

func runConvert(cmd *cobra.Command, stdout, stderr io.Writer, in, out string, fl convertFlags) error {
	ctx := cmdContext(cmd)
	plan, write, err := fl.options()
	if err != nil {
		return err
	}
	if err := checkAllowFlag(fl.allow); err != nil {
		return err
	}
	readOpts := torchOptions(ctx) // for a checkpoint opened here; Dir opens its own
	if len(fl.allow) > 0 {
		readOpts = append(readOpts, torch.WithAllow(fl.allow...))
	}
	if err := checkOutputName(in, out); err != nil {
		return err
	}
	o, err := source.Open(ctx, in, sourceOptions(ctx)...)
	if err != nil {
		return exitFor(err)
	}
	defer o.Close()
	switch o.Format {
	case source.Directory:
		if out == "" {
			out = in
		}
		if fl.dryRun {
			return usageError("--dry-run takes a checkpoint file, not a directory")
		}
		if len(fl.allow) > 0 {
			plan = append(plan, convert.WithAllow(fl.allow...))
		}
		if topts := torchOptions(ctx); len(topts) > 0 {
			plan = append(plan, convert.WithReaderOptions(topts...))
		}
		return convertDir(ctx, stdout, stderr, in, out, append(asOptions(plan), asOptions(write)...), fl.json)
	case source.Safetensors, source.Compressed, source.Index:
		what := map[source.Format]string{source.Safetensors: "a safetensors file", source.Compressed: "a compressed safetensors file",
			source.Index: "the index of a sharded safetensors model"}[o.Format]
		return &exitError{Code: exitProblems, Err: fmt.Errorf("%s is already %s: there is nothing to convert; inspect, validate, split, merge or compress it instead", in, what)}
	}
	if !o.Local() {
		// a second read to verify would be a second download
		write = append(write, convert.WithVerifyFromCopy(true))
	}
	ck, err := openCheckpoint(stderr, in, o, readOpts...)
	if err != nil {
		return err
	}
	defer ck.Close()
	p, err := convert.PlanCheckpoint(ck, in, plan...)
	if err != nil {
		return convertError(err)
	}
	rep := p.Report()
	if err := checkNamesKnown(rep, fl.prefer, fl.discard); err != nil {
		return err
	}
	if out, err = outputFor(in, out); err != nil {
		return err
	}
	if fl.dryRun {
		if fl.json {
			return writeConvertJSON(stdout, rep)
		}
		printPlan(stdout, rep)
		fmt.Fprintf(stdout, "would convert %s -> %s: %s\n", in, out, summary(rep))
		return nil
	}
	bar := newProgress(stderr, "converting "+filepath.Base(in), rep.Bytes)
	if bar != nil {
		write = append(write, convert.WithProgress(func(w, total int64) { bar.setTotal(total); bar.update(w) }))
	}
	rep, err = p.Write(ctx, out, write...)
	bar.done()
	if err != nil {
		if ioErr := o.Err(); ioErr != nil {
			return &exitError{Code: exitNoCheck, Err: fmt.Errorf("%s: %w", in, ioErr)}
		}
		return convertError(err)
	}
	printNotes(stderr, rep)
	noteUnreferenced(stderr, in, ck.Unreferenced)
	if fl.json {
		return writeConvertJSON(stdout, rep)
	}
	fmt.Fprintf(stdout, "converted %s -> %s: %s\n", in, out, summary(rep))
	return nil
}

// options turns the flags into the library's options: what is planned,
// and how it is written.
func (fl *convertFlags) options() ([]convert.PlanOption, []convert.WriteOption, error) {
	plan := []convert.PlanOption{convert.WithKeepAliases(fl.keepAliases)}
	write := []convert.WriteOption{convert.WithVerify(!fl.noVerify), convert.WithOverwrite(fl.force), convert.WithDigests(fl.sha256)}
	if fl.key != "" {
		plan = append(plan, convert.WithKey(fl.key))
	}
	if len(fl.prefer) > 0 {
		plan = append(plan, convert.WithPrefer(fl.prefer...))
	}
	if len(fl.discard) > 0 {
		plan = append(plan, convert.WithDiscard(fl.discard...))
	}
	if fl.maxOutput != "" {
		n, err := parseSize(fl.maxOutput)
		if err != nil {
			return nil, nil, usageError("--max-output: %v", err)
		}
		plan = append(plan, convert.WithMaxOutputBytes(n))
	}
	if fl.sha256 && fl.noVerify {
		return nil, nil, usageError("--sha256 records the digests while the output is read back: it cannot go with --no-verify")
	}
	return plan, write, nil
}

func asOptions[O convert.Option](opts []O) []convert.Option {
	out := make([]convert.Option, len(opts))
	for i, o := range opts {
		out[i] = o
	}
	return out
}

// openCheckpoint reads the checkpoint o holds, showing the bytes moved
// meanwhile; a failure to read is exit 2, content that is no checkpoint 1
// with what it looks like.
func openCheckpoint(stderr io.Writer, in string, o *source.Object, opts ...torch.Option) (*torch.Checkpoint, error) {
	stop := showReading(stderr, "reading "+filepath.Base(in), o)
	ck, err := torch.NewReader(o, o.Size, in, opts...)
	stop()
	if err == nil {
		return ck, nil
	}
	if ioErr := o.Err(); ioErr != nil {
		return nil, &exitError{Code: exitNoCheck, Err: fmt.Errorf("%s: %w", in, ioErr)}
	}
	if o.Format == source.Unknown && o.Hint != "" && !errors.Is(err, torch.ErrNotAllowed) {
		return nil, exitFor(&source.ContentError{Location: in, Format: o.Format, Msg: "not a PyTorch checkpoint", Hint: o.Hint})
	}
	return nil, convertError(err)
}

// outputFor is where converting in writes: out, a file of the directory
// out, or (no out) the name convert gives a local input.
func outputFor(in, out string) (string, error) {
	if out == "" {
		if source.KindOf(in) != source.LocalPath {
			return "", usageError("give an output file name for a remote checkpoint")
		}
		return convert.OutputName(in), nil
	}
	if ost, err := os.Stat(out); err == nil && ost.IsDir() {
		return filepath.Join(out, filepath.Base(convert.OutputName(in))), nil
	}
	return out, nil
}

// noteUnreferenced says which zip members conversion ignored because
// nothing refers to them, and points at scan.
func noteUnreferenced(w io.Writer, in string, names []string) {
	if len(names) == 0 {
		return
	}
	shown := names
	more := ""
	if len(shown) > 5 {
		shown, more = shown[:5], fmt.Sprintf(", ... (%d more)", len(names)-5)
	}
	for i, n := range shown {
		shown[i] = display(n)
	}
	fmt.Fprintf(w, "note: %s: not converted: %s no tensor refers to (%s%s); torch.load ignores them too, but look at what they hold (unzip -l %s)\n",
		in, plural(int64(len(names)), "zip member"), strings.Join(shown, ", "), more, in)
}

// checkOutputName refuses an output directory that does not exist, in
// words about the destination.
func checkOutputName(in, out string) error {
	if out == "" {
		return nil
	}
	dir := filepath.Dir(out)
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		return usageError("cannot write %s: directory %s does not exist", out, dir)
	}
	return nil
}

// checkNamesKnown refuses --prefer and --discard names that are not
// tensors of the checkpoint: a typo would otherwise be silently ignored.
func checkNamesKnown(rep *convert.Report, prefer, discard []string) error {
	known := map[string]bool{}
	for _, t := range rep.Tensors {
		known[t.Name], known[t.Source] = true, true
	}
	for _, a := range rep.Removed {
		known[a.Name] = true
	}
	for _, list := range []struct {
		flag  string
		names []string
	}{{"--prefer", prefer}, {"--discard", discard}} {
		for _, n := range list.names {
			if !known[n] {
				msg := fmt.Sprintf("%s %s: no tensor of that name in the checkpoint", list.flag, display(n))
				var names []string
				for k := range known {
					names = append(names, k)
				}
				if s := suggestNames(names, n); len(s) > 0 {
					msg += "\n  did you mean: " + strings.Join(s, ", ")
				}
				return usageError("%s", msg)
			}
		}
	}
	return nil
}

func convertDir(ctx context.Context, stdout, stderr io.Writer, in, out string, opts []convert.Option, asJSON bool) error {
	bar := newProgress(stderr, "converting "+filepath.Base(filepath.Clean(in)), 0)
	if bar != nil {
		opts = append(opts, convert.WithProgress(func(w, total int64) { bar.setTotal(total); bar.update(w) }))
	}
	rep, err := convert.Dir(ctx, in, out, opts...)
	bar.done()
	if err != nil {
		return convertError(err)
	}
	for _, f := range rep.Ignored {
		fmt.Fprintf(stderr, "note: not converted: %s\n", filepath.Join(in, f))
	}
	for _, w := range rep.Warnings {
		fmt.Fprintf(stderr, "warning: %s\n", w)
	}
	if asJSON {
		return writeConvertJSON(stdout, rep.Files...)
	}
	for _, r := range rep.Files {
		printNotes(stderr, r)
		fmt.Fprintf(stdout, "converted %s -> %s: %s\n", r.Input, r.Output, summary(r))
	}
	for _, ix := range rep.Indexes {
		fmt.Fprintf(stdout, "wrote %s\n", ix)
	}
	return nil
}

// convertError maps an error to the exit status: 1 for input that is
// refused, 2 for anything that could not be read or written.
func convertError(err error) error {
	if errors.Is(err, convert.ErrOption) {
		// an empty, repeated or contradictory --prefer/--discard name
		return usageError("%s", optionFlagNames.Replace(err.Error()))
	}
	var capErr *convert.OutputCapError
	if errors.As(err, &capErr) {
		err = fmt.Errorf("%w: raise the cap with --max-output SIZE (or -1 for none) if you expect it", err)
	}
	if errors.Is(err, convert.ErrExists) {
		err = fmt.Errorf("%w (use --force to replace it)", err)
	}
	return exitFor(err)
}

// optionFlagNames words convert's option errors as the flags that set them.
var optionFlagNames = strings.NewReplacer("invalid option: ", "", "WithPrefer", "--prefer", "WithDiscard", "--discard", "WithKey", "--key", "WithMaxOutputBytes", "--max-output")

func summary(r *convert.Report) string {
	parts := []string{plural(int64(len(r.Tensors)), "tensor"), humanBytes(r.Bytes)}
	if n := len(r.Removed); n > 0 {
		parts = append(parts, countOf(n, "alias", "aliases")+" removed")
	}
	if n := len(r.Skipped); n > 0 {
		parts = append(parts, countOf(n, "entry", "entries")+" skipped")
	}
	if r.Unwrapped != "" {
		parts = append(parts, "from "+r.Unwrapped)
	}
	switch {
	case r.Verified:
		parts = append(parts, "verified")
	case r.Output != "":
		parts = append(parts, "not verified")
	}
	return strings.Join(parts, ", ")
}

func countOf(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return groupDigits(int64(n)) + " " + many
}

// printNotes lists what was not written as its own tensor, grouped.
func printNotes(w io.Writer, r *convert.Report) {
	for _, a := range r.Removed {
		fmt.Fprintf(w, "note: %s is the same tensor as %s; written once, recorded in __metadata__\n", display(a.Name), display(a.Kept))
	}
	byReason := map[string][]string{}
	var reasons []string
	for _, s := range r.Skipped {
		if _, ok := byReason[s.Reason]; !ok {
			reasons = append(reasons, s.Reason)
		}
		byReason[s.Reason] = append(byReason[s.Reason], display(s.Name))
	}
	for _, reason := range reasons {
		names := byReason[reason]
		more := ""
		if len(names) > 6 {
			more = fmt.Sprintf(", ... (%d more)", len(names)-6)
			names = names[:6]
		}
		fmt.Fprintf(w, "note: skipped %s (%s): %s%s\n", countOf(len(byReason[reason]), "entry", "entries"), reason, strings.Join(names, ", "), more)
	}
}

func printPlan(w io.Writer, r *convert.Report) {
	var rows [][]string
	for _, t := range r.Tensors {
		note := ""
		if t.Name != t.Source {
			note = "from " + display(t.Source)
		}
		if t.Materialized {
			note = strings.TrimSpace(note + " strided view, copied contiguous")
		}
		rows = append(rows, []string{display(t.Name), t.DType, formatShape(t.Shape), humanBytes(t.Bytes), note})
	}
	var b strings.Builder
	writeColumns(&b, "", rows, []bool{false, false, false, true, false})
	io.WriteString(w, b.String())
	printNotes(w, r)
}
