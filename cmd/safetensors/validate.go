package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"strings"

	"github.com/gosafetensors/safetensors"
	"github.com/gosafetensors/safetensors/internal/sniff"
	"github.com/gosafetensors/safetensors/source"
	"github.com/spf13/cobra"
)

func init() { register(newValidateCmd) }

type validateFlags struct {
	json  bool
	full  bool
	quiet bool
}

func newValidateCmd() *cobra.Command {
	var fl validateFlags
	cmd := &cobra.Command{
		Use:   "validate LOCATION...",
		Short: "Check safetensors files and sharded models, and explain what is wrong",
		Long: `Validate checks each file's header the way Hugging Face's reference
implementation does (plus duplicate keys, which it rejects), and prints one
line per file: "ok", "FAIL" with the problem (file, tensor, byte offset and
the reference's error variant), or "ERR" when the file could not be read.
When a file is not a safetensors file at all, a hint says what it is: a
truncated download, an HTML or JSON error page, a Git LFS pointer, a
PyTorch checkpoint, a compressed file. Warnings (unknown fields in the
header) are printed as "warn" lines.

LOCATION is a file, a URL (http(s)://, hf://, s3://, gs://, azblob://), a
sharded model's index (every check of a sharded model: shard names plain and
inside the folder, every tensor in the shard the index names and in no
other, no shard tensor missing from the index), a directory (searched
recursively for *.safetensors files and indexes) or a bucket prefix ending
in '/' (every object listed). Files are recognised by content.

Only headers are read unless --full is given, so checking a 100 GB model is
instant. --full also reads all tensor data, proving the file readable end
to end, and warns about NaN and infinite values in float tensors.

Exit status: 0 every file is valid, 1 some file is invalid, 2 some file
could not be read.`,
		Example: `  safetensors validate model-*.safetensors
  safetensors validate --full model.safetensors
  safetensors validate --json models/ | jq '.[] | select(.valid | not)'`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runValidate(cmd, cmd.OutOrStdout(), cmd.ErrOrStderr(), args, fl)
		},
	}
	f := cmd.Flags()
	f.BoolVar(&fl.json, "json", false, "print a JSON array, one object per file (schema in the documentation)")
	f.BoolVar(&fl.full, "full", false, "also read all tensor data and count NaN/Inf values in float tensors")
	f.BoolVarP(&fl.quiet, "quiet", "q", false, "print only problems and warnings, not the ok lines")
	return cmd
}

// validateResult is one element of validate's --json output, an array with
// one object per file:
//
//	{
//	  "file":         string         the path
//	  "status":       string         "ok", "invalid" or "unreadable"
//	  "valid":        bool           status == "ok"
//	  "error":        string|null    the full error message
//	  "variant":      string|null    the reference implementation's error variant, e.g. "InvalidOffset"
//	  "tensor":       string|null    the tensor the error concerns
//	  "offset":       int|null       absolute byte offset in the file where the problem was found
//	  "hint":         string|null    what the file probably is, in plain words (LFS pointer, HTML page, ...)
//	  "file_size":    int|null       bytes, when the file could be opened
//	  "tensor_count": int|null       when valid
//	  "data_bytes":   int|null       size of the data section, when valid
//	  "warnings":     [string]       [] when none; with --full includes NaN/Inf counts
//	}
type validateResult struct {
	File        string   `json:"file"`
	Status      string   `json:"status"`
	Valid       bool     `json:"valid"`
	Error       *string  `json:"error"`
	Variant     *string  `json:"variant"`
	Tensor      *string  `json:"tensor"`
	Offset      *int64   `json:"offset"`
	Hint        *string  `json:"hint"`
	FileSize    *int64   `json:"file_size"`
	TensorCount *int     `json:"tensor_count"`
	DataBytes   *int64   `json:"data_bytes"`
	Warnings    []string `json:"warnings"`
}

const (
	statusOK         = "ok"
	statusInvalid    = "invalid"
	statusUnreadable = "unreadable"
)

func runValidate(cmd *cobra.Command, stdout, stderr io.Writer, args []string, fl validateFlags) error {
	ctx := cmdContext(cmd)
	var results []validateResult
	invalid, unreadable := false, false
	record := func(r validateResult) {
		switch r.Status {
		case statusInvalid:
			invalid = true
		case statusUnreadable:
			unreadable = true
		}
		if fl.json {
			results = append(results, r)
		} else {
			printResult(stdout, &r, fl.quiet)
			flush(stdout)
		}
	}
	for _, arg := range args {
		files, err := expandTargets(ctx, arg, validateWanted)
		if err == nil && len(files) == 0 {
			err = &source.IOError{Location: arg, Op: "list", Err: errors.New("no *.safetensors files here")}
		}
		if err != nil {
			r := validateResult{File: arg}
			r.setUnreadable(err)
			record(r)
			continue
		}
		for _, file := range files {
			record(validateOne(ctx, file, fl.full, stderr))
		}
	}
	if fl.json {
		if results == nil {
			results = []validateResult{}
		}
		enc := json.NewEncoder(stdout)
		enc.SetEscapeHTML(false)
		enc.SetIndent("", "  ")
		if err := enc.Encode(results); err != nil {
			return err
		}
	}
	if code := exitCodeFor(invalid, unreadable); code != exitOK {
		return &exitError{Code: code}
	}
	return nil
}

// validateWanted picks, in a directory or bucket prefix, what validate
// checks: safetensors files and sharded-model indexes, by name or content.
func validateWanted(name string) bool {
	lower := strings.ToLower(name)
	if source.KindOf(name) != source.LocalPath {
		lower, _, _ = strings.Cut(lower, "?")
	}
	if strings.HasSuffix(lower, ".safetensors") || strings.HasSuffix(lower, ".safetensors.index.json") {
		return true
	}
	if source.KindOf(name) != source.LocalPath {
		return false
	}
	format, ok := detectLocal(name)
	return ok && format == source.Safetensors
}

// validateOne checks one location: a safetensors file (plain, compressed
// or remote) against the reference's rules, or a sharded model's index
// with every check of a sharded model (shards present, names plain, every
// tensor where the index says and nowhere else).
func validateOne(ctx context.Context, loc string, full bool, stderr io.Writer) validateResult {
	r := validateResult{File: loc, Warnings: []string{}}
	o, err := source.Open(ctx, loc, sourceOptions(ctx)...)
	if err != nil {
		r.setUnreadable(err)
		return r
	}
	defer o.Close()
	if o.Format == source.Directory {
		r.setUnreadable(fmt.Errorf("%s: is a directory", loc))
		return r
	}
	size := o.Size
	r.FileSize = &size
	var rd *safetensors.Reader
	switch o.Format {
	case source.Index, source.Compressed:
		m, err := o.Model(ctx)
		if err != nil {
			r.setError(err)
			return r
		}
		o = nil // the model owns it
		defer m.Close()
		if m.File != nil {
			rd = m.File
			break
		}
		r.Status, r.Valid = statusOK, true
		var data int64
		for _, n := range m.Names() {
			info, _ := m.Info(n)
			data += info.Size()
		}
		r.TensorCount, r.DataBytes = ptr(len(m.Names())), ptr(data)
		r.Warnings = append(r.Warnings, m.Sharded.Warnings()...)
		if full {
			warns, err := readAllData(m, loc, data, stderr)
			if err != nil {
				r.setError(err)
				return r
			}
			r.Warnings = append(r.Warnings, warns...)
		}
		return r
	default:
		rd, err = safetensors.NewReader(o, o.Size, safetensors.WithName(loc))
		if err != nil {
			r.setError(err)
			if r.Hint == nil {
				if h := sniff.Explain(o, o.Size, err); h != "" {
					r.Hint = ptr(h)
				}
			}
			return r
		}
	}
	if o != nil && o.Format.Checkpoint() {
		// valid safetensors, and also what torch.load reads as a checkpoint:
		// two readers would see two different files
		r.setError(fmt.Errorf("%s: a polyglot: a valid safetensors file that is also a PyTorch checkpoint (%s) torch.load would read; run safetensors scan on it", loc, o.Format))
		return r
	}
	r.Status, r.Valid = statusOK, true
	r.TensorCount = ptr(len(rd.Tensors))
	r.DataBytes = ptr(rd.DataSize())
	r.Warnings = append(r.Warnings, rd.Warnings...)
	if full {
		warns, err := readAllData(rd, loc, rd.DataSize(), stderr)
		if err != nil {
			r.setError(err)
			return r
		}
		r.Warnings = append(r.Warnings, warns...)
	}
	return r
}

// setError records an error: unreadable for I/O failures, invalid (with the
// reference's variant, the tensor, the offset and a hint) for the rest.
func (r *validateResult) setError(err error) {
	r.Valid = false
	r.TensorCount, r.DataBytes = nil, nil
	if source.IsIOError(err) {
		r.setUnreadable(err)
		return
	}
	r.Status = statusInvalid
	r.Error = ptr(err.Error())
	var fe *safetensors.FormatError
	if errors.As(err, &fe) {
		if v := fe.Variant(); v != "" {
			r.Variant = ptr(v)
		}
		if fe.Tensor != "" {
			r.Tensor = ptr(fe.Tensor)
		}
		if fe.Offset >= 0 {
			r.Offset = ptr(fe.Offset)
		}
	}
	if h := source.Hint(err); h != "" {
		r.Hint = ptr(h)
		if i := strings.Index(*r.Error, "\n  hint: "); i >= 0 {
			r.Error = ptr((*r.Error)[:i])
		}
	}
}

// readAllData reads every tensor's bytes, returning warnings about NaN and
// infinite values, or the first read error.
func readAllData(src safetensors.Source, file string, total int64, stderr io.Writer) ([]string, error) {
	const chunk = 4 << 20
	buf := make([]byte, chunk)
	prog := newProgress(stderr, "validate "+display(file), total)
	defer prog.done()
	var warns []string
	var done int64
	for t, err := range src.All() {
		if err != nil {
			return nil, err
		}
		var c nonFinite
		size := t.Size()
		for off := int64(0); off < size; {
			n := min(int64(chunk), size-off)
			m, err := t.ReadAt(buf[:n], off)
			if int64(m) < n {
				if err == nil || errors.Is(err, io.EOF) {
					err = io.ErrUnexpectedEOF
				}
				return nil, fmt.Errorf("%s: tensor %q: reading %d bytes at byte %d of its data: %w", file, t.Name, n, off, err)
			}
			if hasFloatBits(t.DType) {
				c.add(t.DType, buf[:n])
			}
			off += n
			done += n
			prog.update(done)
		}
		if c.nan > 0 || c.inf > 0 {
			warns = append(warns, fmt.Sprintf("tensor %s: %s NaN and %s infinite of %s values",
				display(t.Name), groupDigits(c.nan), groupDigits(c.inf), groupDigits(t.NumElements())))
		}
	}
	return warns, nil
}

// setUnreadable records an error that kept the file from being checked.
func (r *validateResult) setUnreadable(err error) {
	r.Status, r.Valid = statusUnreadable, false
	msg := err.Error()
	var pe *fs.PathError
	if errors.As(err, &pe) && pe.Path == r.File {
		msg = r.File + ": " + pe.Err.Error()
	}
	r.Error = ptr(msg)
	if r.Warnings == nil {
		r.Warnings = []string{}
	}
}

// printResult writes the text form of one result:
//
//	ok   m.safetensors (12 tensors, 1.2 GiB)
//	FAIL m.safetensors: tensor "b": ... (InvalidOffset at byte 61)
//	     hint: ...
//	ERR  m.safetensors: no such file or directory
//	warn m.safetensors: ...
func printResult(w io.Writer, r *validateResult, quiet bool) {
	switch r.Status {
	case statusOK:
		if !quiet {
			fmt.Fprintf(w, "ok   %s (%s, %s)\n", display(r.File), plural(int64(*r.TensorCount), "tensor"), humanBytes(*r.FileSize))
		}
	case statusInvalid:
		fmt.Fprintf(w, "FAIL %s\n", oneLine(*r.Error))
	default:
		fmt.Fprintf(w, "ERR  %s\n", oneLine(*r.Error))
	}
	if r.Hint != nil {
		fmt.Fprintf(w, "     hint: %s\n", *r.Hint)
	}
	for _, warn := range r.Warnings {
		fmt.Fprintf(w, "warn %s: %s\n", display(r.File), oneLine(warn))
	}
}

// oneLine keeps a message from a file on one line.
func oneLine(s string) string {
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return ' '
		}
		return r
	}, s)
}

func ptr[T any](v T) *T { return &v }
