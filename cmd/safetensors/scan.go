package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"iter"
	"strings"

	"github.com/spf13/cobra"

	"github.com/gosafetensors/safetensors/source"
	"github.com/gosafetensors/safetensors/torch"
)

func init() { register(newScanCmd) }

// Scan verdicts, from best to worst.
const (
	verdictClean       = "clean"       // nothing to object to
	verdictInvalid     = "invalid"     // not a valid checkpoint / safetensors file (corrupt, truncated, unknown format)
	verdictUnsupported = "unsupported" // inert torch constructs with no safetensors form (quantized, sparse...)
	verdictDangerous   = "dangerous"   // a global that is not allowed, or an opcode that would run code
	verdictError       = "error"       // could not be read
)

// scanResult is one element of `scan --json` output. The schema is stable:
//
//	[{"path": "model.bin",
//	  "format": "zip" | "legacy" | "pickle" | "tar" | "unknown" | "safetensors",
//	  "verdict": "clean" | "invalid" | "unsupported" | "dangerous" | "error",
//	  "globals": [{"module": "posix", "name": "system", "entry": "archive/data.pkl",
//	               "offset": 13, "verdict": "allowed" | "unsupported" | "not allowed",
//	               "reason": "..."}],
//	  "dangerous_opcodes": [{"opcode": "REDUCE", "entry": "...", "offset": 40, "target": "posix.system"}],
//	  "problems": ["..."],
//	  "error": "..."}]
//
// globals lists every global reference in file order (duplicates included);
// offsets are bytes inside entry (a zip member or "pickle N"). error is set
// only with verdict "error"; empty lists are [] rather than null.
type scanResult struct {
	Path             string       `json:"path"`
	Format           string       `json:"format"`
	Verdict          string       `json:"verdict"`
	Globals          []scanGlobal `json:"globals"`
	DangerousOpcodes []scanOpcode `json:"dangerous_opcodes"`
	Problems         []string     `json:"problems"`
	Error            string       `json:"error,omitempty"`
}

type scanGlobal struct {
	Module  string `json:"module"`
	Name    string `json:"name"`
	Entry   string `json:"entry"`
	Offset  int64  `json:"offset"`
	Verdict string `json:"verdict"`
	Reason  string `json:"reason,omitempty"`
}

type scanOpcode struct {
	Opcode string `json:"opcode"`
	Entry  string `json:"entry"`
	Offset int64  `json:"offset"`
	Target string `json:"target,omitempty"`
}

type scanFlags struct{ json, jsonl bool }

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
directory (searched recursively for ` + strings.Join(modelExts, " ") + `
files and anything whose content is a checkpoint, a pickle or safetensors), a
URL (http(s)://, hf://, s3://, gs://, azblob://) or a bucket prefix ending in
'/' (every object listed and checked, four at a time). A remote checkpoint is
audited by reading its zip directory and pickles, not its storages.

Verdicts: clean, invalid (corrupt or not a checkpoint), unsupported (valid
torch constructs with no safetensors form), dangerous (a global not on the
allowlist, or an opcode that would run code), error (unreadable).
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
	return cmd
}

func runScan(cmd *cobra.Command, stdout, stderr io.Writer, locs []string, fl scanFlags) error {
	ctx := cmdContext(cmd)
	var results []scanResult
	anyArray := false
	for _, loc := range locs {
		targets, err := expandTargets(ctx, loc, nil)
		if err != nil {
			results = append(results, scanResult{Path: loc, Format: "unknown", Verdict: verdictError, Error: err.Error(),
				Globals: []scanGlobal{}, DangerousOpcodes: []scanOpcode{}, Problems: []string{}})
			continue
		}
		if len(targets) == 0 {
			fmt.Fprintf(stderr, "note: %s: no checkpoint, pickle or safetensors file found\n", loc)
		}
		lines := fl.jsonl || (fl.json && isBucketPrefix(loc))
		anyArray = anyArray || !lines
		for r := range scanAll(ctx, targets) {
			if lines {
				b, _ := json.Marshal(r)
				stdout.Write(append(b, '\n'))
				flush(stdout)
			} else if !fl.json {
				printScan(stdout, r)
				flush(stdout)
			}
			if !lines {
				results = append(results, r)
			} else {
				results = append(results, scanResult{Path: r.Path, Verdict: r.Verdict, Error: r.Error})
			}
		}
	}
	if fl.json && !fl.jsonl && (len(results) == 0 || anyArray) {
		var arr []scanResult
		for _, r := range results {
			if r.Globals != nil {
				arr = append(arr, r)
			}
		}
		if arr == nil {
			arr = []scanResult{}
		}
		b, err := json.MarshalIndent(arr, "", "  ")
		if err != nil {
			return err
		}
		stdout.Write(append(b, '\n'))
	}
	counts := map[string]int{}
	for _, r := range results {
		counts[r.Verdict]++
	}
	code := exitCodeFor(counts[verdictInvalid]+counts[verdictUnsupported]+counts[verdictDangerous] > 0, counts[verdictError] > 0)
	if !fl.json && !fl.jsonl {
		for _, r := range results {
			if r.Verdict == verdictError {
				fmt.Fprintf(stderr, "safetensors: %s\n", r.Error)
			}
		}
		fmt.Fprintf(stdout, "scanned %s: %d clean, %d dangerous, %d unsupported, %d invalid, %d errors\n",
			plural(int64(len(results)), "file"), counts[verdictClean], counts[verdictDangerous], counts[verdictUnsupported], counts[verdictInvalid], counts[verdictError])
	}
	if code != exitOK {
		return &exitError{Code: code}
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

// scanAll scans targets concurrently (bounded) and yields the results in
// order, each as soon as it and those before it are done.
func scanAll(ctx context.Context, targets []string) iter.Seq[scanResult] {
	return func(yield func(scanResult) bool) {
		const workers = 4
		res := make([]chan scanResult, len(targets))
		for i := range res {
			res[i] = make(chan scanResult, 1)
		}
		sem := make(chan struct{}, workers)
		stop := make(chan struct{})
		defer close(stop)
		go func() {
			for i, t := range targets {
				select {
				case sem <- struct{}{}:
				case <-stop:
					return
				}
				go func() {
					defer func() { <-sem }()
					res[i] <- scanOne(ctx, t)
				}()
			}
		}()
		for _, ch := range res {
			if !yield(<-ch) {
				return
			}
		}
	}
}

// scanOne audits one file or object by its content, whatever its name: a
// safetensors file is validated, and every file (safetensors included,
// which torch.load would read as a tar or a pickle if it could) goes
// through the checkpoint scanner, which decodes every pickle torch could
// reach and names every global.
func scanOne(ctx context.Context, loc string) scanResult {
	r := scanResult{Path: loc, Format: "unknown", Globals: []scanGlobal{}, DangerousOpcodes: []scanOpcode{}, Problems: []string{}}
	o, err := source.Open(ctx, loc, sourceOptions(ctx)...)
	if err != nil {
		r.Verdict, r.Error = verdictError, err.Error()
		return r
	}
	defer o.Close()
	if o.Format == source.Directory {
		r.Verdict, r.Error = verdictError, loc+": is a directory"
		return r
	}
	var rep *torch.ScanReport
	var modelErr error
	switch o.Format {
	case source.Safetensors, source.Compressed:
		r.Format = "safetensors"
		if o.Format == source.Compressed {
			r.Format = "safetensors (compressed)"
		}
		m, err := o.Model(ctx)
		if err == nil {
			m.Source.Close()
		} else if source.IsIOError(err) {
			r.Verdict, r.Error = verdictError, err.Error()
			return r
		} else {
			modelErr = err
			r.Problems = append(r.Problems, err.Error())
		}
		// torch.load reads such a file only if it is also a tar archive
		// (the first bytes of a safetensors file or a zstd/lz4 container
		// cannot form a pickle that imports anything): then every member
		// torch would unpickle is scanned.
		if torch.IsTar(o, o.Size) {
			if rep, err = torch.Scan(o, o.Size, loc); err != nil {
				r.Verdict, r.Error = verdictError, err.Error()
				return r
			}
			r.Problems = append(r.Problems, "polyglot: this file is also a tar archive torch.load would read")
		} else {
			rep = &torch.ScanReport{}
		}
	default:
		if rep, err = torch.Scan(o, o.Size, loc); err != nil {
			r.Verdict, r.Error = verdictError, err.Error()
			return r
		}
		r.Format = rep.Format.String()
	}
	r.Problems = append(r.Problems, rep.Problems...)
	if o.Hint != "" {
		r.Problems = append(r.Problems, "hint: "+o.Hint)
	}
	for _, g := range rep.Globals {
		r.Globals = append(r.Globals, scanGlobal{Module: g.Module, Name: g.Name, Entry: g.Entry, Offset: g.Offset, Verdict: g.Verdict, Reason: g.Reason})
	}
	for _, op := range rep.DangerousOpcodes {
		r.DangerousOpcodes = append(r.DangerousOpcodes, scanOpcode{Opcode: op.Opcode, Entry: op.Entry, Offset: op.Offset, Target: op.Target})
	}
	r.Verdict = rep.Verdict()
	if r.Verdict == verdictClean && (modelErr != nil || len(r.Problems) > 0) {
		r.Verdict = verdictInvalid // a safetensors file that does not validate, or a polyglot
	}
	if ioErr := o.Err(); ioErr != nil && r.Verdict != verdictDangerous {
		// a read failed part-way: what was not read was not checked
		r.Verdict, r.Error = verdictError, fmt.Sprintf("%s: reading failed part-way, not every byte was checked: %v", loc, ioErr)
	}
	return r
}

func printScan(w io.Writer, r scanResult) {
	if r.Verdict == verdictError {
		fmt.Fprintf(w, "%s: error\n", r.Path)
		return
	}
	fmt.Fprintf(w, "%s: %s (%s)\n", r.Path, r.Verdict, r.Format)
	// Allowed globals are listed once each; the others at every use.
	seen := map[string]bool{}
	var allowed []string
	for _, g := range r.Globals {
		name := g.Module + "." + g.Name
		if g.Verdict == "allowed" {
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
		fmt.Fprintf(w, "  %-11s %s at %s offset %d%s\n", g.Verdict, display(name), display(g.Entry), g.Offset, reason)
	}
	for _, name := range allowed {
		fmt.Fprintf(w, "  %-11s %s\n", "allowed", display(name))
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
}
