package main

import (
	"context"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"sync/atomic"
	"syscall"

	"github.com/gosafetensors/safetensors"
	"github.com/gosafetensors/safetensors/internal/atomicfile"
	"github.com/gosafetensors/safetensors/sharded"
	"github.com/gosafetensors/safetensors/source"
	"github.com/spf13/cobra"
	"golang.org/x/term"
)

// openLocation opens a location (a path, a directory, an index, an http(s)
// URL, hf://, s3://, gs://, azblob://) as tensors through the one opener.
// Errors carry the exit status: 2 when the bytes could not be read, 1 when
// they were read and are not a model.
func openLocation(cmd *cobra.Command, loc string, opts ...source.Option) (*source.Model, error) {
	ctx := cmdContext(cmd)
	m, err := source.OpenModel(ctx, loc, append(sourceOptions(ctx), opts...)...)
	if err != nil {
		return nil, exitFor(err)
	}
	return m, nil
}

// openSource is openLocation for commands that need only the tensors.
func openSource(cmd *cobra.Command, loc string) (safetensors.Source, error) {
	m, err := openLocation(cmd, loc)
	if err != nil {
		return nil, err
	}
	return m, nil
}

// cmdContext is the command's context (cancelled on SIGINT/SIGTERM).
func cmdContext(cmd *cobra.Command) context.Context {
	if cmd != nil && cmd.Context() != nil {
		return cmd.Context()
	}
	return context.Background()
}

// handleSignals makes SIGINT, SIGTERM and SIGHUP (a closed terminal)
// cancel ctx: every command then stops between two reads or writes,
// removes what it was writing and clears its progress line, and caught
// returns the status a shell reports for the signal (130, 143, 129; 0
// when none came). A second signal ends the process at once, whatever is
// left.
func handleSignals(ctx context.Context) (_ context.Context, stop func(), caught func() int) {
	ctx, cancel := context.WithCancel(ctx)
	ch := make(chan os.Signal, 2)
	signal.Notify(ch, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	var code atomic.Int32
	done := make(chan struct{})
	go func() {
		for {
			select {
			case s := <-ch:
				if code.Load() != 0 {
					os.Exit(int(code.Load()))
				}
				code.Store(int32(signalStatus(s)))
				cancel()
			case <-done:
				return
			}
		}
	}()
	return ctx, func() {
		signal.Stop(ch)
		close(done)
		cancel()
	}, func() int { return int(code.Load()) }
}

// signalStatus is the exit status a shell reports for a process a signal
// ended: 128 plus its number.
func signalStatus(s os.Signal) int {
	switch s {
	case syscall.SIGTERM:
		return 143
	case syscall.SIGHUP:
		return 129
	}
	return 130
}

// isTerminal reports whether w, or the file under the CLI's output buffer,
// is a terminal.
func isTerminal(w io.Writer) bool {
	if u, ok := w.(interface{ Underlying() io.Writer }); ok {
		w = u.Underlying()
	}
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// checkOverwrite is the one rule of every command that writes: an existing
// regular file is replaced only with --force. A FIFO or a device
// (/dev/stdout) is written into, never replaced. "" and "-" are stdout.
// outputIsInput reports whether the existing file out is one that reading
// tensor from m (opened from loc) uses: the location itself (a file, an
// index, through any symbolic or hard link), the model's index in a
// directory, or the file holding the tensor. Replacing it would destroy
// the input, so even --force does not.
func outputIsInput(out, loc string, m *source.Model, tensor string) (string, bool) {
	inputs := append(atomicfile.Inputs(loc, filepath.Join(loc, sharded.IndexName)), atomicfile.InputsOf(m)...)
	if f, _, ok := m.TensorFile(tensor); ok {
		if st, err := f.Stat(); err == nil {
			inputs = append(inputs, atomicfile.Input{Name: f.Name(), Info: st})
		}
	}
	in, ok := atomicfile.OutputIsInput(out, inputs)
	return in.Name, ok
}

func checkOverwrite(out string, force bool) error {
	if out == "" || out == "-" || force {
		return nil
	}
	if st, err := os.Stat(out); err == nil && st.Mode().IsRegular() {
		return usageError("%s exists: use --force to overwrite it", out)
	}
	if st, err := os.Lstat(out); err == nil && st.Mode()&os.ModeSymlink != 0 {
		if _, err := os.Stat(out); err != nil {
			return usageError("%s is a symbolic link to nothing: use --force to replace it", out)
		}
	}
	return nil
}
