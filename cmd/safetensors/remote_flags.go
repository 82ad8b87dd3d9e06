package main

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/gosafetensors/safetensors/remote"
	"github.com/gosafetensors/safetensors/source"
	"github.com/gosafetensors/safetensors/torch"
)

// sourceOptionsKey carries, in a command's context, the options every
// location it opens gets from the global flags.
type sourceOptionsKey struct{}

// addRemoteFlags adds the global flags that configure remote reading to
// root; every command that opens a location sees them (sourceOptions).
func addRemoteFlags(root *cobra.Command) {
	root.PersistentFlags().Bool("trust-server", false,
		"read HTTP objects whose server sends no strong validator (a strong ETag, or a Last-Modified\n"+
			"older than a minute) with more than one request: only for servers whose files cannot change\n"+
			"while they are read (otherwise refused: a replaced file would be read as a mix of two)")
	root.PersistentFlags().String("expand-views", "",
		"read a PyTorch checkpoint's expanded views (expand, stride 0) and overlapping views (many\n"+
			"slices of one storage): a few stored bytes standing for many, up to `SIZE` in all beyond\n"+
			"its stored bytes, e.g. 300GiB; alone, up to 64x the checkpoint's size or 64MiB (without it,\n"+
			"up to the checkpoint's own size: beyond, they are refused)")
	root.PersistentFlags().Lookup("expand-views").NoOptDefVal = "auto"
	root.PersistentPreRunE = func(cmd *cobra.Command, args []string) error {
		var opts []source.Option
		if trust, _ := cmd.Flags().GetBool("trust-server"); trust {
			opts = append(opts, source.WithRemote(remote.WithTrustUnvalidated(true)))
		}
		ctx := cmdContext(cmd)
		if f := cmd.Flags().Lookup("expand-views"); f != nil && f.Changed {
			n := int64(torch.ExpandedViewsProportional)
			if v := f.Value.String(); v != "auto" {
				var err error
				if n, err = parseSize(v); err != nil || n < 1 {
					return usageError("--expand-views %q: want a size such as 300GiB, or no value (64x the checkpoint's size or 64MiB)", v)
				}
			}
			topts := []torch.Option{torch.WithExpandedViews(n)}
			opts = append(opts, source.WithTorch(topts...))
			ctx = context.WithValue(ctx, torchOptionsKey{}, topts)
		}
		if len(opts) > 0 {
			ctx = context.WithValue(ctx, sourceOptionsKey{}, opts)
		}
		cmd.SetContext(ctx)
		return nil
	}
}

// torchOptionsKey carries, in a command's context, the options of the
// global flags for the PyTorch checkpoints a command opens itself.
type torchOptionsKey struct{}

// torchOptions returns the options of the global flags for opening a
// PyTorch checkpoint, from the command's context.
func torchOptions(ctx context.Context) []torch.Option {
	opts, _ := ctx.Value(torchOptionsKey{}).([]torch.Option)
	return opts
}

// sourceOptions returns the options of the global flags for opening a
// location, from the command's context.
func sourceOptions(ctx context.Context) []source.Option {
	opts, _ := ctx.Value(sourceOptionsKey{}).([]source.Option)
	return opts
}
