package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/gosafetensors/safetensors"
	"github.com/gosafetensors/safetensors/sharded"
)

func init() { register(newSplitCmd) }

// openModel opens what split and merge read (a safetensors file, a
// directory, an index, local or remote) through the CLI's opener. Tests
// replace it to inject failures.
var openModel = func(cmd *cobra.Command, location string) (safetensors.Source, error) {
	// *source.Model copies local tensors with copy_file_range
	// (sharded.FileBacked), whether one file or shards.
	return openSource(cmd, location)
}

type shardFlags struct {
	maxShardSize string
	force        bool
	noVerify     bool
}

func newSplitCmd() *cobra.Command {
	var fl shardFlags
	cmd := &cobra.Command{
		Use:   "split IN OUTDIR",
		Short: "Split a model into Hugging Face shards with an index",
		Long: `Split a safetensors model (a file, a directory or an index) into shards of at
most --max-shard-size tensor bytes, named model-00001-of-0000N.safetensors,
plus model.safetensors.index.json, by the Hugging Face Hub's rule: tensors in
name order, a new shard when the next tensor would overflow the current one, a
tensor larger than the limit alone in its own shard. Every shard carries the
input's __metadata__. If everything fits in one shard, OUTDIR/model.safetensors
is written and no index.

Sizes: plain bytes, or KB MB GB TB (powers of 1000) and KiB MiB GiB TiB
(powers of 1024). The files are written under temporary names, read back and
compared with the input, and renamed into place only when all are good: a
failed split leaves nothing behind.

Exit status: 0 written, 1 invalid input, 2 could not read or write (or an
output exists: use --force).`,
		Example: `  safetensors split model.safetensors shards/ --max-shard-size 2GB
  safetensors split merged.safetensors out/ --max-shard-size 500MiB -f`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			limit, err := sharded.ParseSize(fl.maxShardSize)
			if err != nil {
				return usageError("--max-shard-size: %v", err)
			}
			return runShardJob(cmd, args[0], "split", func(ctx context.Context, src safetensors.Source, opts []sharded.WriteOption) (*sharded.Result, error) {
				return sharded.Split(ctx, src, args[1], append(opts, sharded.WithMaxShardSize(limit))...)
			}, fl)
		},
	}
	f := cmd.Flags()
	f.StringVar(&fl.maxShardSize, "max-shard-size", "5GB", "largest shard, in tensor bytes (5GB, 500MB, 2GiB, 1048576)")
	addShardFlags(cmd, &fl)
	return cmd
}

func addShardFlags(cmd *cobra.Command, fl *shardFlags) {
	f := cmd.Flags()
	f.BoolVarP(&fl.force, "force", "f", false, "replace existing output files")
	f.BoolVar(&fl.noVerify, "no-verify", false, "do not read the output back and compare it with the input")
}

// runShardJob opens the input, runs a split or merge with progress on a
// terminal, and prints the files written.
func runShardJob(cmd *cobra.Command, in, verb string, job func(context.Context, safetensors.Source, []sharded.WriteOption) (*sharded.Result, error), fl shardFlags) error {
	ctx := cmdContext(cmd)
	stdout, stderr := cmd.OutOrStdout(), cmd.ErrOrStderr()
	src, err := openModel(cmd, in)
	if err != nil {
		var ee *exitError
		if errors.As(err, &ee) {
			return err
		}
		return shardProblem(err)
	}
	defer src.Close()
	var total int64
	for _, n := range src.Names() {
		if info, ok := src.Info(n); ok {
			total += info.Size()
		}
	}
	bar := newProgress(stderr, verb, total)
	opts := []sharded.WriteOption{
		sharded.WithOverwrite(fl.force),
		sharded.WithVerify(!fl.noVerify),
		sharded.WithProgress(func(done, _ int64) { bar.update(done) }),
	}
	res, err := job(ctx, src, opts)
	bar.done()
	if err != nil {
		return shardProblem(err)
	}
	printShardResult(stdout, stderr, res)
	return nil
}

func printShardResult(stdout, stderr io.Writer, res *sharded.Result) {
	for _, w := range res.Warnings {
		fmt.Fprintf(stderr, "warning: %s\n", w)
	}
	for _, f := range res.Files {
		fmt.Fprintln(stdout, f)
	}
	flush(stdout)
}

// shardProblem maps an error to the exit status by the one rule
// (exitFor), saying how to replace an output in the way.
func shardProblem(err error) error {
	if errors.Is(err, sharded.ErrExists) {
		err = fmt.Errorf("%w; use --force to replace it", err)
	}
	return exitFor(err)
}
