package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/gosafetensors/safetensors"
	"github.com/gosafetensors/safetensors/torch"
)

func init() { register(newScanCmd) }

// scanExts are scanned in directories by name; other files are scanned when
// their first bytes look like a zip archive or a pickle.
var scanExts = []string{".bin", ".pt", ".pth", ".ckpt", ".pkl", ".pickle", ".safetensors"}

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

func newScanCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "scan PATH...",
		Short: "Audit PyTorch checkpoints and pickles for code that would run on load",
		Long: `Audit files without loading them: every pickle in a PyTorch checkpoint (zip or
legacy), or a bare pickle, is decoded by an inert interpreter and every global
it references is checked against the converter's allowlist. Opcodes that would
call code and container problems (duplicate or mismatched zip entries,
encryption flags, hidden pickles, truncation) are reported too. A
.safetensors file cannot carry code; it is validated instead.

Directories are searched recursively for ` + strings.Join(scanExts, " ") + `
files and anything that looks like a zip archive or a pickle.

Verdicts: clean, invalid (corrupt or not a checkpoint), unsupported (valid
torch constructs with no safetensors form), dangerous (a global not on the
allowlist, or an opcode that would run code), error (unreadable).
--json prints an array of {path, format, verdict, globals[{module, name,
entry, offset, verdict, reason}], dangerous_opcodes[{opcode, entry, offset,
target}], problems[], error}.

Exit status: 0 every file clean, 1 something dangerous, not allowed or
invalid found, 2 a file could not be read (and nothing worse was found).`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runScan(cmd.OutOrStdout(), cmd.ErrOrStderr(), args, asJSON)
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the results as a JSON array")
	return cmd
}

func runScan(stdout, stderr io.Writer, paths []string, asJSON bool) error {
	var results []scanResult
	for _, p := range paths {
		files, err := scanTargets(p)
		if err != nil {
			results = append(results, scanResult{Path: p, Format: "unknown", Verdict: verdictError, Error: err.Error()})
			continue
		}
		if len(files) == 0 {
			fmt.Fprintf(stderr, "note: %s: no checkpoint, pickle or safetensors file found\n", p)
		}
		for _, f := range files {
			r := scanOne(f)
			results = append(results, r)
			if !asJSON {
				printScan(stdout, r)
				flush(stdout)
			}
		}
	}
	if asJSON {
		if results == nil {
			results = []scanResult{}
		}
		b, err := json.MarshalIndent(results, "", "  ")
		if err != nil {
			return err
		}
		stdout.Write(append(b, '\n'))
	}
	code := exitOK
	for _, r := range results {
		switch r.Verdict {
		case verdictInvalid, verdictUnsupported, verdictDangerous:
			code = exitProblems
		case verdictError:
			if code == exitOK {
				code = exitNoCheck
			}
		}
	}
	if !asJSON {
		for _, r := range results {
			if r.Verdict == verdictError {
				fmt.Fprintf(stderr, "safetensors: %s: %s\n", r.Path, r.Error)
			}
		}
	}
	if code != exitOK {
		return &exitError{Code: code}
	}
	return nil
}

// scanTargets expands p: a file is scanned whatever its name; a directory
// is walked (symbolic links are not followed) for files worth scanning.
func scanTargets(p string) ([]string, error) {
	st, err := os.Stat(p)
	if err != nil {
		return nil, err
	}
	if !st.IsDir() {
		return []string{p}, nil
	}
	var files []string
	err = filepath.WalkDir(p, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.Type().IsRegular() {
			return nil
		}
		if slices.Contains(scanExts, strings.ToLower(filepath.Ext(path))) || looksScannable(path) {
			files = append(files, path)
		}
		return nil
	})
	return files, err
}

// looksScannable reports whether a file starts like a zip archive or a
// pickle (protocol 2+ has a PROTO opcode; protocol 0/1 files are only found
// by extension).
func looksScannable(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return true // report the error
	}
	defer f.Close()
	var b [4]byte
	n, _ := io.ReadFull(f, b[:])
	head := b[:n]
	return bytes.HasPrefix(head, []byte("PK\x03\x04")) || bytes.HasPrefix(head, []byte("PK\x05\x06")) ||
		(len(head) >= 2 && head[0] == 0x80 && head[1] >= 2 && head[1] <= 5)
}

func scanOne(path string) scanResult {
	r := scanResult{Path: path, Globals: []scanGlobal{}, DangerousOpcodes: []scanOpcode{}, Problems: []string{}}
	if strings.EqualFold(filepath.Ext(path), ".safetensors") {
		r.Format = "safetensors"
		f, err := safetensors.Open(path)
		if err == nil {
			f.Close()
			r.Verdict = verdictClean
			return r
		}
		var fe *safetensors.FormatError
		if !errors.As(err, &fe) {
			r.Verdict, r.Error = verdictError, err.Error()
			return r
		}
		r.Verdict = verdictInvalid
		r.Problems = append(r.Problems, err.Error())
		if h := hintFor(path, err); h != "" {
			r.Problems = append(r.Problems, "hint: "+h)
		}
		return r
	}
	rep, err := torch.ScanFile(path)
	if err != nil {
		r.Format, r.Verdict, r.Error = "unknown", verdictError, err.Error()
		return r
	}
	r.Format = rep.Format
	r.Problems = append(r.Problems, rep.Problems...)
	if rep.Truncated {
		r.Problems = append(r.Problems, "too many findings: the lists are truncated")
	}
	dangerous, unsupported := false, false
	inert := map[string]bool{} // torch names refused only for having no safetensors form
	for _, g := range rep.Globals {
		if g.Verdict == "unsupported" {
			inert[g.Module+"."+g.Name] = true
		}
	}
	for _, g := range rep.Globals {
		r.Globals = append(r.Globals, scanGlobal{Module: g.Module, Name: g.Name, Entry: g.Entry, Offset: g.Offset, Verdict: g.Verdict, Reason: g.Reason})
		switch {
		case g.Allowed:
		case g.Verdict == "unsupported":
			unsupported = true
		default:
			dangerous = true
		}
	}
	for _, o := range rep.DangerousOpcodes {
		// Calling an inert torch rebuild function (quantized, sparse) is
		// what torch.load does with it; that makes the file unsupported,
		// not dangerous.
		if inert[o.Target] {
			unsupported = true
		} else {
			dangerous = true
		}
		r.DangerousOpcodes = append(r.DangerousOpcodes, scanOpcode{Opcode: o.Opcode, Entry: o.Entry, Offset: o.Offset, Target: o.Target})
	}
	switch {
	case dangerous:
		r.Verdict = verdictDangerous
	case unsupported:
		r.Verdict = verdictUnsupported
	case len(r.Problems) > 0:
		r.Verdict = verdictInvalid
	default:
		r.Verdict = verdictClean
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
