// Command safetensors inspects, validates and extracts tensors from
// safetensors files, converts PyTorch checkpoints to safetensors without
// running them, and audits checkpoints for code that would run on load.
//
//	safetensors inspect model.safetensors        tensors, parameter counts, metadata
//	safetensors validate *.safetensors           check files, explain what is wrong
//	safetensors get model.safetensors NAME -o x.npy
//	safetensors convert pytorch_model.bin        -> model.safetensors, verified
//	safetensors scan checkpoints/                every global, allowed or not
//
// Results go to stdout, diagnostics to stderr. Exit status, the same for
// every command: 0 ok, 1 problems found in the content (an invalid file, a
// refused checkpoint; for diff, a difference), 2 could not check (an
// unreadable or missing input, a folder with no model, a tensor or filter
// that names nothing, bad usage). See exitRule and docs/cli-conventions.md.
package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/debug"

	"github.com/gosafetensors/safetensors/internal/redact"
	"github.com/spf13/cobra"
)

// version is set at build time with -ldflags "-X main.version=v1.2.3";
// otherwise the module version from the build info is used.
var version = ""

// Exit statuses.
const (
	exitOK       = 0
	exitProblems = 1 // something is wrong with the input
	exitNoCheck  = 2 // the input could not be checked: unreadable, bad usage (see exitRule)
)

var subcommands []func() *cobra.Command

// register adds a subcommand; subcommand files call it from init().
func register(newCmd func() *cobra.Command) {
	subcommands = append(subcommands, newCmd)
}

// exitError makes the process exit with Code after printing Err (if non-nil) to stderr.
type exitError struct {
	Code int
	Err  error
}

func (e *exitError) Error() string {
	if e.Err == nil {
		return fmt.Sprintf("exit status %d", e.Code)
	}
	return e.Err.Error()
}

func (e *exitError) Unwrap() error { return e.Err }

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run executes the command line args, writing results to stdout and
// diagnostics to stderr, and returns the exit status.
func run(args []string, stdout, stderr io.Writer) int {
	// Output is buffered: a 100k-line table must not cost 100k write calls.
	// Commands that report progressively call flush.
	out := &outBuffer{Writer: bufio.NewWriterSize(stdout, 64<<10), under: stdout}
	root := newRootCmd()
	root.SetArgs(args)
	root.SetOut(out)
	root.SetErr(stderr)
	root.SetIn(os.Stdin)
	ctx, stop, caught := handleSignals(context.Background())
	defer stop()
	cmd, err := root.ExecuteContextC(ctx)
	if ferr := out.Flush(); ferr != nil && err == nil {
		err = &exitError{Code: exitNoCheck, Err: fmt.Errorf("writing output: %w", ferr)}
	}
	if err == nil {
		return exitOK // done, even if a signal came meanwhile (serve drains)
	}
	if code := caught(); code != 0 {
		// the command stopped and cleaned up; its error is the echo of
		// the cancellation
		fmt.Fprintf(stderr, "%s interrupted\n", paletteFor(stderr).paint(colorFail, "safetensors:"))
		return code
	}
	prefix := paletteFor(stderr).paint(colorFail, "safetensors:")
	// The last line of defence of the one redaction rule (internal/redact):
	// whatever error reaches here, no URL in it keeps its query or userinfo.
	var ee *exitError
	if errors.As(err, &ee) {
		if ee.Err != nil {
			fmt.Fprintf(stderr, "%s %s\n", prefix, redact.Text(ee.Err.Error()))
		}
		return ee.Code
	}
	fmt.Fprintf(stderr, "%s %s\n", prefix, redact.Text(err.Error()))
	if cmd != nil {
		fmt.Fprintf(stderr, "Run '%s --help' for usage.\n", cmd.CommandPath())
	}
	return exitNoCheck
}

func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:   "safetensors",
		Short: "Inspect, validate, extract, convert, compare and compress safetensors models",
		Long: `safetensors inspects, validates and extracts tensors from safetensors files and
sharded models, local or remote (http(s)://, hf://ORG/REPO, s3://, gs://,
azblob://), converts PyTorch checkpoints to safetensors without running any
pickle code, scans checkpoints for code that would run when they are loaded,
compares, splits, merges and compresses models. Formats are recognised by
content, never by file name.

Results go to stdout, diagnostics to stderr (in colour on a terminal, unless
NO_COLOR is set).

` + exitRule,
		Version:       buildVersion(),
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	addRemoteFlags(root)
	for _, newCmd := range subcommands {
		root.AddCommand(newCmd())
	}
	return root
}

func buildVersion() string {
	if version != "" {
		return version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
		return bi.Main.Version
	}
	return "(devel)"
}

// outBuffer buffers the CLI's output and remembers what it writes to, so
// that commands can tell a terminal from a pipe.
type outBuffer struct {
	*bufio.Writer
	under io.Writer
}

// Underlying returns the writer under the buffer.
func (o *outBuffer) Underlying() io.Writer { return o.under }

// flush writes out buffered output, for commands that report file by file.
func flush(w io.Writer) {
	if f, ok := w.(interface{ Flush() error }); ok {
		f.Flush()
	}
}
