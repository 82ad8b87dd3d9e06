package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/gosafetensors/safetensors"
	"github.com/gosafetensors/safetensors/internal/sniff"
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
		Use:   "validate FILE|DIR...",
		Short: "Check that files are valid safetensors files and explain what is wrong",
		Long: `Validate checks each file's header the way Hugging Face's reference
implementation does (plus duplicate keys, which it rejects), and prints one
line per file: "ok", "FAIL" with the problem (file, tensor, byte offset and
the reference's error variant), or "ERR" when the file could not be read.
When a file is not a safetensors file at all, a hint says what it is: a
truncated download, an HTML or JSON error page, a Git LFS pointer, a
PyTorch checkpoint, a compressed file. Warnings (unknown fields in the
header) are printed as "warn" lines. A directory is searched recursively
for *.safetensors files.

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
			return runValidate(cmd.OutOrStdout(), cmd.ErrOrStderr(), args, fl)
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

func runValidate(stdout, stderr io.Writer, args []string, fl validateFlags) error {
	var results []validateResult
	code := exitOK
	for _, arg := range args {
		files, err := expandArg(arg)
		if err != nil {
			files = nil
			r := validateResult{File: arg}
			r.setUnreadable(err)
			results = append(results, r)
			code = max(code, exitNoCheck)
			if !fl.json {
				printResult(stdout, &r, fl.quiet)
			}
		}
		for _, file := range files {
			r := validateFile(file, fl.full, stderr)
			switch r.Status {
			case statusInvalid:
				code = max(code, exitProblems)
			case statusUnreadable:
				code = max(code, exitNoCheck)
			}
			if fl.json {
				results = append(results, r)
			} else {
				printResult(stdout, &r, fl.quiet)
				flush(stdout)
			}
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
	if code != exitOK {
		return &exitError{Code: code}
	}
	return nil
}

// expandArg returns arg itself, or for a directory the *.safetensors files
// under it, sorted.
func expandArg(arg string) ([]string, error) {
	st, err := os.Stat(arg)
	if err != nil || !st.IsDir() {
		return []string{arg}, nil // validateFile reports the error
	}
	var files []string
	err = filepath.WalkDir(arg, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasSuffix(d.Name(), ".safetensors") {
			files = append(files, p)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("%s: no *.safetensors files in this directory", arg)
	}
	slices.Sort(files)
	return files, nil
}

func validateFile(file string, full bool, stderr io.Writer) validateResult {
	r := validateResult{File: file, Warnings: []string{}}
	f, err := os.Open(file)
	if err != nil {
		r.setUnreadable(err)
		return r
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		r.setUnreadable(err)
		return r
	}
	if st.IsDir() {
		r.setUnreadable(fmt.Errorf("%s: is a directory", file))
		return r
	}
	size := st.Size()
	r.FileSize = &size
	rd, err := safetensors.NewReader(f, size, safetensors.WithName(file))
	if err != nil {
		var fe *safetensors.FormatError
		if !errors.As(err, &fe) {
			r.setUnreadable(err)
			return r
		}
		r.Status = statusInvalid
		r.Error = ptr(err.Error())
		if v := fe.Variant(); v != "" {
			r.Variant = ptr(v)
		}
		if fe.Tensor != "" {
			r.Tensor = ptr(fe.Tensor)
		}
		if fe.Offset >= 0 {
			r.Offset = ptr(fe.Offset)
		}
		if h := sniff.Explain(f, size, err); h != "" {
			r.Hint = ptr(h)
		}
		return r
	}
	r.Status, r.Valid = statusOK, true
	r.TensorCount = ptr(len(rd.Tensors))
	r.DataBytes = ptr(rd.DataSize())
	r.Warnings = append(r.Warnings, rd.Warnings...)
	if full {
		warns, err := readAllData(f, rd, file, stderr)
		if err != nil {
			r.Valid = false
			r.TensorCount, r.DataBytes = nil, nil
			r.setUnreadable(err)
			return r
		}
		r.Warnings = append(r.Warnings, warns...)
	}
	return r
}

// readAllData reads every tensor's bytes, returning warnings about NaN and
// infinite values, or the first read error.
func readAllData(f *os.File, rd *safetensors.Reader, file string, stderr io.Writer) ([]string, error) {
	const chunk = 4 << 20
	buf := make([]byte, chunk)
	prog := newProgress(stderr, "validate "+display(file), rd.DataSize())
	defer prog.done()
	var warns []string
	base := rd.DataOffset()
	for _, t := range rd.Tensors {
		var c nonFinite
		for off := t.DataOffsets[0]; off < t.DataOffsets[1]; {
			n := min(int64(chunk), t.DataOffsets[1]-off)
			m, err := f.ReadAt(buf[:n], base+off)
			if int64(m) < n {
				if err == nil || errors.Is(err, io.EOF) {
					err = io.ErrUnexpectedEOF
				}
				return nil, fmt.Errorf("%s: tensor %q: reading %d bytes at byte %d: %w", file, t.Name, n, base+off, err)
			}
			if hasFloatBits(t.DType) {
				c.add(t.DType, buf[:n])
			}
			off += n
			prog.update(off)
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
