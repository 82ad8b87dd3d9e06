package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/gosafetensors/safetensors/audit"
	"github.com/gosafetensors/safetensors/source"
	"github.com/gosafetensors/safetensors/torch"
)

func init() { register(newScanCmd) }

type scanFlags struct {
	json, jsonl bool
	allow       []string
}

func newScanCmd() *cobra.Command {
	var fl scanFlags
	cmd := &cobra.Command{
		Use:   "scan LOCATION...",
		Short: "Audit PyTorch checkpoints and pickles for code that would run on load",
		Long: `Audit files without loading them: every pickle in a PyTorch checkpoint (zip or
legacy), or a bare pickle, is decoded by an inert interpreter and every global
it references is checked against the converter's allowlist. Opcodes that would
call code and container problems (duplicate or mismatched zip entries,
encryption flags, hidden pickles, tar and zip polyglots, unexplained trailing
bytes) are reported too. A safetensors file cannot carry code: it is
validated, and if it is also a tar archive torch.load would open, its members
are scanned like a checkpoint's.

Files are recognised by content, never by name. LOCATION is a file, a
directory (searched recursively for ` + strings.Join(audit.ModelExtensions(), " ") + `
files and anything whose content is a checkpoint, a pickle or safetensors), a
URL (http(s)://, hf://, s3://, gs://, azblob://) or a bucket prefix ending in
'/' (every object listed and checked, four at a time). A remote checkpoint is
audited by reading its zip directory and pickles, not its storages.

Verdicts: clean, invalid (corrupt or not a checkpoint), unsupported (valid
torch constructs with no safetensors form), dangerous (a global not on the
allowlist, or an opcode that would run code), error (unreadable). --allow
MODULE.NAME (repeatable) treats a global beyond the allowlist as allowed
(argparse.Namespace, numpy.core.multiarray.scalar...): nothing is ever run
either way, and the report says which allowed globals a file used
("user_allowed" in JSON), so clean without --allow keeps its meaning.
--allow takes inert data classes: a function (but numpy's scalar and
_reconstruct), a module, or a name in a module that runs, imports or loads
code or opens files (torch.load, torch.storage._load_from_bytes, pydoc,
yaml, dill, copyreg, logging...) is a usage error naming why; a BUILD that
sets a dunder name (__setstate__...) on an allowed object is dangerous (see
docs/security/scan.md).
--json prints an array of {path, format, verdict, globals[{module, name,
entry, offset, verdict, reason}], dangerous_opcodes[{opcode, entry, offset,
target}], problems[], error}; for a bucket prefix, or with --jsonl, one such
object per line as each file is done.

Exit status: 0 every file clean, 1 something dangerous, not allowed or
invalid found, 2 a file could not be read (and nothing worse was found).`,
		Example: `  safetensors scan pytorch_model.bin
  safetensors scan --json ~/checkpoints/
  safetensors scan --json s3://registry/uploads/`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runScan(cmd, cmd.OutOrStdout(), cmd.ErrOrStderr(), args, fl)
		},
	}
	cmd.Flags().BoolVar(&fl.json, "json", false, "print the results as a JSON array (JSON lines for a bucket prefix)")
	cmd.Flags().BoolVar(&fl.jsonl, "jsonl", false, "print one JSON object per line as each file is done")
	cmd.Flags().StringArrayVar(&fl.allow, "allow", nil, "treat this global as allowed, e.g. argparse.Namespace (repeatable); the report lists the ones a file used")
	return cmd
}

func runScan(cmd *cobra.Command, stdout, stderr io.Writer, locs []string, fl scanFlags) error {
	if err := checkAllowFlag(fl.allow); err != nil {
		return err
	}
	ctx := cmdContext(cmd)
	// A bucket prefix is printed as JSON lines even with --json; the array
	// of the other locations then follows them, so it waits. Otherwise the
	// array is written as the files are done.
	anyPrefix := false
	for _, loc := range locs {
		anyPrefix = anyPrefix || audit.IsBucketPrefix(loc)
	}
	var arr *audit.ReportWriter[*audit.ScanReport]
	if fl.json && !fl.jsonl && !anyPrefix {
		arr = audit.NewScanWriter(stdout)
	}
	var held []*audit.ScanReport
	var counts [audit.Error + 1]int
	var errs []string
	total, anyArray := 0, false
	for _, loc := range locs {
		lines := fl.jsonl || (fl.json && audit.IsBucketPrefix(loc))
		anyArray = anyArray || !lines
		n := 0
		for r := range audit.Scan(ctx, loc, audit.WithSource(sourceOptions(ctx)...), audit.WithTorch(torch.WithAllow(fl.allow...))) {
			n++
			counts[r.Verdict]++
			if r.Verdict == audit.Error {
				errs = append(errs, r.Error)
			}
			switch {
			case lines:
				b, _ := json.Marshal(r)
				stdout.Write(append(b, '\n'))
				flush(stdout)
			case !fl.json:
				printScan(stdout, r)
				flush(stdout)
			case arr != nil:
				if err := arr.Write(r); err != nil {
					return err
				}
			default:
				held = append(held, r)
			}
		}
		total += n
	}
	switch {
	case arr != nil:
		if err := arr.Close(); err != nil {
			return err
		}
	case fl.json && !fl.jsonl && (total == 0 || anyArray):
		w := audit.NewScanWriter(stdout)
		for _, r := range held {
			if err := w.Write(r); err != nil {
				return err
			}
		}
		if err := w.Close(); err != nil {
			return err
		}
	}
	code := exitCodeFor(counts[audit.Invalid]+counts[audit.Unsupported]+counts[audit.Dangerous] > 0, counts[audit.Error] > 0)
	if !fl.json && !fl.jsonl {
		for _, e := range errs {
			fmt.Fprintf(stderr, "safetensors: %s\n", e)
		}
		fmt.Fprintf(stdout, "scanned %s: %d clean, %d dangerous, %d unsupported, %d invalid, %d errors\n",
			plural(int64(total), "file"), counts[audit.Clean], counts[audit.Dangerous], counts[audit.Unsupported], counts[audit.Invalid], counts[audit.Error])
	}
	if code != exitOK {
		return &exitError{Code: code}
	}
	return nil
}

// checkAllowFlag refuses --allow names the library would refuse, before
// anything is read (torch.Scan checks its options first).
func checkAllowFlag(allow []string) error {
	if len(allow) == 0 {
		return nil
	}
	if _, err := torch.Scan(bytes.NewReader(nil), 0, "", torch.WithAllow(allow...)); errors.Is(err, torch.ErrOption) {
		return usageError("--allow: %v", err)
	}
	return nil
}

// exitCodeFor is the one exit rule of every checking command: 1 if
// anything was found invalid or dangerous, else 2 if anything could not be
// checked, else 0.
func exitCodeFor(problems, unreadable bool) int {
	switch {
	case problems:
		return exitProblems
	case unreadable:
		return exitNoCheck
	}
	return exitOK
}

func printScan(w io.Writer, r *audit.ScanReport) {
	p := paletteFor(w)
	if r.Verdict == audit.Error {
		fmt.Fprintf(w, "%s: %s\n", r.Path, p.paint(colorFail, "error"))
		return
	}
	c := colorFail
	switch r.Verdict {
	case audit.Clean:
		c = colorOK
	case audit.Unsupported:
		c = colorWarn
	}
	fmt.Fprintf(w, "%s: %s (%s)\n", display(r.Path), p.paint(c, r.Verdict.String()), r.Format)
	// Allowed globals are listed once each; the others at every use.
	seen := map[string]bool{}
	var allowed []string
	for _, g := range r.Globals {
		name := g.Module + "." + g.Name
		if g.Verdict == audit.Allowed {
			if !seen[name] {
				seen[name] = true
				allowed = append(allowed, name)
			}
			continue
		}
		reason := ""
		if g.Reason != "" {
			reason = ": " + g.Reason
		}
		fmt.Fprintf(w, "  %-11s %s at %s offset %d%s\n", g.Verdict.String(), display(name), display(g.Entry), g.Offset, reason)
	}
	for _, name := range allowed {
		by := ""
		if slices.Contains(r.UserAllowed, name) {
			by = " (by --allow)"
		}
		fmt.Fprintf(w, "  %-11s %s%s\n", "allowed", display(name), by)
	}
	for _, o := range r.DangerousOpcodes {
		target := ""
		if o.Target != "" {
			target = " on " + display(o.Target)
		}
		fmt.Fprintf(w, "  %-11s %s%s at %s offset %d\n", "runs code", o.Opcode, target, display(o.Entry), o.Offset)
	}
	for _, p := range r.Problems {
		fmt.Fprintf(w, "  %-11s %s\n", "problem", display(p))
	}
	if warn := source.NameMismatch(r.Path, sourceFormat[r.Format]); warn != "" {
		fmt.Fprintf(w, "  %-11s %s\n", p.paint(colorWarn, "warning"), warn)
	}
}

// sourceFormat is the opener's name for a format scan found, for
// source.NameMismatch.
var sourceFormat = map[audit.Format]source.Format{
	audit.FormatSafetensors: source.Safetensors, audit.FormatCompressed: source.Compressed,
	audit.FormatZip: source.TorchZip, audit.FormatLegacy: source.TorchPickle, audit.FormatTar: source.TorchPickle,
	audit.FormatPickle: source.TorchPickle, audit.FormatIndex: source.Index,
}
