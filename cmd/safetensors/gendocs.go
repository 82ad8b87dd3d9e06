//go:build gendocs

package main

import (
	"os"

	"github.com/gosafetensors/safetensors/cmd/safetensors/internal/clidoc"
	"github.com/spf13/cobra"
)

// gendocs writes the CLI reference (see generate.go). It is a hidden
// command of this build only, so that the reference is rendered from the
// very command tree the binary runs.
func init() {
	register(func() *cobra.Command {
		return &cobra.Command{
			Use:    "gendocs DIR",
			Short:  "Write the CLI reference into DIR",
			Hidden: true,
			Args:   cobra.ExactArgs(1),
			RunE: func(cmd *cobra.Command, args []string) error {
				if err := clidoc.SetEnvironment(os.Setenv); err != nil {
					return err
				}
				return clidoc.Write(newRootCmd(), args[0])
			},
		}
	})
}
