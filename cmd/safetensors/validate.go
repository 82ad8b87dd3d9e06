package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/gosafetensors/safetensors/audit"
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
instant. A compressed file is the exception: its whole container is checked
(every frame against the seek table, then decompressed and checked against
its size and checksum, as zstd -t does), for only that tells a swapped,
duplicated or damaged frame, which every read of the data refuses.
--full also reads all tensor data, proving the file readable end to end,
and warns about NaN and infinite values in float tensors.

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

func runValidate(cmd *cobra.Command, stdout, stderr io.Writer, args []string, fl validateFlags) error {
	ctx := cmdContext(cmd)
	opts := []audit.Option{audit.WithFull(fl.full), audit.WithSource(sourceOptions(ctx)...)}
	if fl.full {
		// one file at a time: each shows its own progress line
		opts = append(opts, audit.WithConcurrency(1), audit.WithProgress(func(loc string, total int64) (func(int64), func()) {
			prog := newProgress(stderr, "validate "+display(loc), total)
			return prog.update, prog.done
		}))
	}
	var arr *audit.ReportWriter[*audit.ValidateReport]
	if fl.json {
		arr = audit.NewValidateWriter(stdout)
	}
	invalid, unreadable := false, false
	for _, arg := range args {
		for r := range audit.Validate(ctx, arg, opts...) {
			switch r.Status {
			case audit.StatusInvalid:
				invalid = true
			case audit.Unreadable:
				unreadable = true
			}
			if fl.json {
				if err := arr.Write(r); err != nil {
					return err
				}
			} else {
				printResult(stdout, r, fl.quiet)
				flush(stdout)
			}
		}
	}
	if fl.json {
		if err := arr.Close(); err != nil {
			return err
		}
	}
	if code := exitCodeFor(invalid, unreadable); code != exitOK {
		return &exitError{Code: code}
	}
	return nil
}

// printResult writes the text form of one result:
//
//	ok   m.safetensors (12 tensors, 1.2 GiB)
//	FAIL m.safetensors: tensor "b": ... (InvalidOffset at byte 61)
//	FAIL m.safetensors: this is an HTML page, not a model: ...
//	     details: header length ... (HeaderTooLarge at byte 0)
//	ERR  m.safetensors: no such file or directory
//	warn m.safetensors: ...
func printResult(w io.Writer, r *audit.ValidateReport, quiet bool) {
	p := paletteFor(w)
	switch r.Status {
	case audit.OK:
		if !quiet {
			fmt.Fprintf(w, "%s   %s (%s, %s)\n", p.paint(colorOK, "ok"), display(r.File), plural(int64(*r.TensorCount), "tensor"), humanBytes(*r.FileSize))
		}
	case audit.StatusInvalid:
		if r.Hint != nil {
			// the diagnosis first (an HTML page, an incomplete download),
			// then what the format check said
			fmt.Fprintf(w, "%s %s: %s\n     details: %s\n", p.paint(colorFail, "FAIL"), display(r.File), oneLine(*r.Hint), oneLine(strings.TrimPrefix(*r.Error, r.File+": ")))
			break
		}
		fmt.Fprintf(w, "%s %s\n", p.paint(colorFail, "FAIL"), oneLine(*r.Error))
	default:
		fmt.Fprintf(w, "%s  %s\n", p.paint(colorFail, "ERR"), oneLine(*r.Error))
		if r.Hint != nil {
			fmt.Fprintf(w, "     hint: %s\n", *r.Hint)
		}
	}
	for _, warn := range r.Warnings {
		fmt.Fprintf(w, "%s %s: %s\n", p.paint(colorWarn, "warn"), display(r.File), oneLine(warn))
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
