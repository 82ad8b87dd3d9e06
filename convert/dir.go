package convert

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/gosafetensors/safetensors/internal/atomicfile"
	"github.com/gosafetensors/safetensors/sharded"
	"github.com/gosafetensors/safetensors/torch"
)

// checkpointExts are the file extensions Dir converts when there is no
// index.
var checkpointExts = []string{".bin", ".pt", ".pth", ".ckpt"}

// trainerFiles are pickles a Hugging Face Trainer checkpoint directory holds
// beside the weights; they are not weights and are not converted.
var trainerFiles = []string{"training_args.bin", "optimizer.pt", "optimizer.bin", "scheduler.pt", "scaler.pt"}

// OutputName returns the safetensors file name for a checkpoint file name,
// following Hugging Face's naming: pytorch_model.bin -> model.safetensors,
// pytorch_model-00001-of-00002.bin -> model-00001-of-00002.safetensors,
// anything else <stem>.safetensors. Only the base name is changed.
func OutputName(path string) string {
	dir, base := filepath.Split(path)
	if rest, ok := strings.CutPrefix(base, "pytorch_model"); ok {
		base = "model" + rest
	}
	ext := filepath.Ext(base)
	if slices.Contains(checkpointExts, strings.ToLower(ext)) {
		base = strings.TrimSuffix(base, ext)
	}
	return filepath.Join(dir, base+".safetensors")
}

// IndexOutputName returns the index name for a checkpoint index name:
// pytorch_model.bin.index.json -> model.safetensors.index.json.
func IndexOutputName(path string) string {
	return OutputName(strings.TrimSuffix(path, ".index.json")) + ".index.json"
}

// DirReport describes the conversion of a directory.
type DirReport struct {
	Input, Output string    // directories
	Files         []*Report // one per converted checkpoint
	Indexes       []string  // index files written
	Ignored       []string  // files in Input that were not converted (trainer state)
	Warnings      []string  // index entries that disagree with the shards
	Bytes         int64     // tensor data bytes over all files
}

type dirJob struct {
	name    string // base name in the input directory
	in, out string
	ckpt    *torch.Checkpoint
	plan    *Plan
}

type indexJob struct {
	in, out string
	src     *sharded.Index // the checkpoint's index
	shards  []string       // checkpoint base names, sorted
}

// Dir converts the checkpoints in the directory in to safetensors files in
// outDir (which may be in). With a *.bin.index.json (or .pt/.pth/.ckpt)
// index, its shards are converted and a safetensors index written, with
// weight_map renamed to the new shard names, dropped aliases removed and
// total_size recomputed; else pytorch_model.bin if present; else every
// *.bin, *.pt, *.pth and *.ckpt except a Trainer's optimizer and argument
// pickles. Every input is read and planned before anything is written;
// if a write fails, or ctx is cancelled (the error then wraps ctx's), the
// outputs already written by this call are removed. The options apply to
// every file (WithProgress counts over all of them); an invalid one is an
// error wrapping [ErrOption], before anything is read.
func Dir(ctx context.Context, in, outDir string, opts ...Option) (*DirReport, error) {
	popt, wopt, err := buildOptions(opts)
	if err != nil {
		return nil, err
	}
	rep := &DirReport{Input: in, Output: outDir}
	todo, indexes, err := dirInputs(in, outDir, rep)
	if err != nil {
		return nil, err
	}
	// Read and plan everything first: a refused shard stops the conversion
	// before anything is written.
	jobs, err := planDir(ctx, in, outDir, todo, popt)
	defer func() {
		for _, j := range jobs {
			j.ckpt.Close()
		}
	}()
	if err != nil {
		return nil, err
	}
	if !wopt.overwrite {
		for _, j := range jobs {
			if _, err := os.Lstat(j.out); err == nil {
				return nil, fmt.Errorf("%w: %s", ErrExists, j.out)
			}
		}
		for _, ij := range indexes {
			if _, err := os.Lstat(ij.out); err == nil {
				return nil, fmt.Errorf("%w: %s", ErrExists, ij.out)
			}
		}
	}
	// No output may replace any input (a shard, an index), even with
	// overwriting: each is checked against all of them, not only its own.
	var inputs []atomicfile.Input
	for _, j := range jobs {
		inputs = append(inputs, atomicfile.Inputs(j.in)...)
	}
	for _, ij := range indexes {
		inputs = append(inputs, atomicfile.Inputs(ij.in)...)
	}
	for _, j := range jobs {
		if in, ok := atomicfile.OutputIsInput(j.out, inputs); ok {
			return nil, fmt.Errorf("%w: output %s is the input %s", ErrOutputIsInput, j.out, in.Name)
		}
	}
	for _, ij := range indexes {
		if in, ok := atomicfile.OutputIsInput(ij.out, inputs); ok {
			return nil, fmt.Errorf("%w: output %s is the input %s", ErrOutputIsInput, ij.out, in.Name)
		}
	}
	if err := os.MkdirAll(outDir, 0o777); err != nil {
		return nil, err
	}
	if err := writeDir(ctx, jobs, indexes, wopt, rep); err != nil {
		return nil, err
	}
	return rep, nil
}

// dirInputs decides what Dir converts: the shards of the directory's
// checkpoint indexes, else pytorch_model.bin, else every checkpoint but a
// Trainer's state (noted in rep.Ignored).
func dirInputs(in, outDir string, rep *DirReport) (todo []string, indexes []*indexJob, err error) {
	ents, err := os.ReadDir(in)
	if err != nil {
		return nil, nil, err
	}
	var files []string
	for _, e := range ents {
		name := e.Name()
		if !e.Type().IsRegular() {
			continue
		}
		if stem, ok := strings.CutSuffix(name, ".index.json"); ok && slices.Contains(checkpointExts, strings.ToLower(filepath.Ext(stem))) {
			ij, err := readIndex(filepath.Join(in, name))
			if err != nil {
				return nil, nil, err
			}
			ij.out = filepath.Join(outDir, IndexOutputName(name))
			for _, prev := range indexes {
				if prev.out == ij.out {
					return nil, nil, fmt.Errorf("%w: %s and %s would both be written to %s; convert them separately", ErrInput, filepath.Base(prev.in), name, ij.out)
				}
			}
			indexes = append(indexes, ij)
			continue
		}
		if slices.Contains(checkpointExts, strings.ToLower(filepath.Ext(name))) {
			files = append(files, name)
		}
	}
	switch {
	case len(indexes) > 0:
		seen := map[string]bool{}
		for _, ij := range indexes {
			for _, s := range ij.shards {
				if !seen[s] {
					seen[s] = true
					todo = append(todo, s)
				}
			}
		}
		for _, f := range files {
			if !seen[f] {
				rep.Ignored = append(rep.Ignored, f)
			}
		}
	case slices.Contains(files, "pytorch_model.bin"):
		todo = []string{"pytorch_model.bin"}
		for _, f := range files {
			if f != "pytorch_model.bin" {
				rep.Ignored = append(rep.Ignored, f)
			}
		}
	default:
		for _, f := range files {
			if slices.Contains(trainerFiles, f) || strings.HasPrefix(f, "rng_state") {
				rep.Ignored = append(rep.Ignored, f)
			} else {
				todo = append(todo, f)
			}
		}
	}
	if len(todo) == 0 {
		return nil, nil, fmt.Errorf("%w: %s holds no PyTorch checkpoint (*.bin, *.pt, *.pth, *.ckpt)", ErrNoCheckpoint, in)
	}
	return todo, indexes, nil
}

// planDir opens and plans every checkpoint; the jobs returned hold their
// checkpoints open (also on error, for the caller to close).
func planDir(ctx context.Context, in, outDir string, todo []string, opt planOptions) ([]*dirJob, error) {
	jobs := make([]*dirJob, 0, len(todo))
	outs := map[string]bool{}
	for _, name := range todo {
		if err := ctx.Err(); err != nil {
			return jobs, err
		}
		j := &dirJob{name: name, in: filepath.Join(in, name), out: filepath.Join(outDir, OutputName(name))}
		if outs[j.out] {
			return jobs, fmt.Errorf("%w: two inputs would both be written to %s", ErrInput, j.out)
		}
		outs[j.out] = true
		c, err := openCheckpoint(j.in, &opt)
		if err != nil {
			return jobs, err
		}
		j.ckpt = c
		jobs = append(jobs, j)
		if j.plan, err = newPlan(c, opt); err != nil {
			return jobs, withInput(err, j.in)
		}
		j.plan.report.Input = j.in
	}
	return jobs, nil
}

// writeDir writes the planned files, then the indexes; on any failure the
// outputs already written are removed.
func writeDir(ctx context.Context, jobs []*dirJob, indexes []*indexJob, opt writeOptions, rep *DirReport) error {
	var total int64
	for _, j := range jobs {
		total += j.plan.report.Bytes
	}
	var written []string
	fail := func(err error) error {
		for _, w := range written {
			os.Remove(w)
		}
		return cancelled(ctx, err)
	}
	var done int64
	byShard := map[string]*Report{}
	for _, j := range jobs {
		w := opt
		if opt.progress != nil {
			base := done
			w.progress = func(n, _ int64) { opt.progress(base+n, total) }
		}
		w.overwrite = true // checked for every output before writing any
		r, err := j.plan.write(ctx, j.out, w)
		if err != nil {
			return fail(err)
		}
		written = append(written, j.out)
		j.ckpt.Close()
		done += r.Bytes
		rep.Bytes += r.Bytes
		rep.Files = append(rep.Files, r)
		byShard[j.name] = r
	}
	for _, ij := range indexes {
		if err := ctx.Err(); err != nil {
			return fail(err)
		}
		warn, err := ij.write(byShard)
		if err != nil {
			return fail(err)
		}
		written = append(written, ij.out)
		rep.Indexes = append(rep.Indexes, ij.out)
		rep.Warnings = append(rep.Warnings, warn...)
	}
	return nil
}

func readIndex(path string) (*indexJob, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	// The index names files beside it; anything else (a path, "..", a URL)
	// would let an index point the converter at arbitrary files:
	// sharded.ParseIndex refuses those, and duplicate keys, before any
	// shard is opened.
	idx, err := sharded.ParseIndex(b, path)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInput, err)
	}
	return &indexJob{in: path, src: idx, shards: idx.Shards()}, nil
}

// write writes the safetensors index for the converted shards.
func (ij *indexJob) write(byShard map[string]*Report) (warnings []string, err error) {
	x, warnings, err := IndexFor(ij.src, byShard, func(shard string) string { return filepath.Base(byShard[shard].Output) })
	if err != nil {
		return nil, fmt.Errorf("%s: %w", ij.in, err)
	}
	for i, w := range warnings {
		warnings[i] = ij.in + ": " + w
	}
	if err := x.WriteFile(ij.out); err != nil {
		return nil, err
	}
	return warnings, nil
}
