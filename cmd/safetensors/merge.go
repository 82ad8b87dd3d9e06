package main

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/gosafetensors/safetensors"
	"github.com/gosafetensors/safetensors/sharded"
)

func init() { register(newMergeCmd) }

func newMergeCmd() *cobra.Command {
	var fl shardFlags
	cmd := &cobra.Command{
		Use:   "merge INDEX|DIR OUT",
		Short: "Merge a sharded model into one safetensors file",
		Long: `Merge the shards of a model (its model.safetensors.index.json, or the
directory holding it) into one safetensors file OUT. The index is checked
against the shards first: a tensor missing from its shard, in two shards or
absent from the weight_map, and shard names that leave the directory, are
refused. __metadata__ entries all shards agree on are kept; the others are
reported. OUT is written under a temporary name, read back and compared with
the shards, and renamed into place only if it matches.

Exit status: 0 written, 1 invalid input, 2 could not read or write (or OUT
exists: use --force).`,
		Example: `  safetensors merge shards/ model.safetensors
  safetensors merge shards/model.safetensors.index.json model.safetensors -f`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runShardJob(cmd, args[0], "merge", func(ctx context.Context, src safetensors.Source, opts []sharded.WriteOption) (*sharded.Result, error) {
				return sharded.Merge(ctx, src, args[1], opts...)
			}, fl)
		},
	}
	addShardFlags(cmd, &fl)
	return cmd
}
