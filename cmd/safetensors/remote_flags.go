package main

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/gosafetensors/safetensors/remote"
	"github.com/gosafetensors/safetensors/source"
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
	root.PersistentPreRunE = func(cmd *cobra.Command, args []string) error {
		var opts []source.Option
		if trust, _ := cmd.Flags().GetBool("trust-server"); trust {
			opts = append(opts, source.WithRemote(remote.WithTrustUnvalidated(true)))
		}
		if len(opts) > 0 {
			cmd.SetContext(context.WithValue(cmdContext(cmd), sourceOptionsKey{}, opts))
		}
		return nil
	}
}

// sourceOptions returns the options of the global flags for opening a
// location, from the command's context.
func sourceOptions(ctx context.Context) []source.Option {
	opts, _ := ctx.Value(sourceOptionsKey{}).([]source.Option)
	return opts
}
