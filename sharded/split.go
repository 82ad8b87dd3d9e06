package sharded

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/gosafetensors/safetensors"
	"github.com/gosafetensors/safetensors/internal/atomicfile"
)

// ShardName returns the Hub's name for shard i (0-based) of n:
// model-00001-of-00003.safetensors; one shard is model.safetensors.
func ShardName(i, n int) string {
	if n == 1 {
		return SingleName
	}
	return fmt.Sprintf("model-%05d-of-%05d.safetensors", i+1, n)
}

// PlanShards groups tensor names into shards by the Hugging Face Hub's
// greedy rule (huggingface_hub split_state_dict_into_shards_factory):
// tensors are taken in the order given; one that would push the current
// shard past limit starts a new shard; one larger than limit by itself gets
// a shard of its own, placed where the Hub places it, at the position it
// is met, before the shard being filled. size gives a tensor's bytes. At
// least one shard is returned, empty when there are no names.
func PlanShards(names []string, size func(string) int64, limit int64) [][]string {
	var shards [][]string
	var cur []string
	var curSize int64
	for _, n := range names {
		s := size(n)
		if s > limit {
			shards = append(shards, []string{n})
			continue
		}
		if curSize+s > limit {
			shards = append(shards, cur)
			cur, curSize = nil, 0
		}
		cur = append(cur, n)
		curSize += s
	}
	if len(cur) > 0 || len(shards) == 0 {
		shards = append(shards, cur)
	}
	return shards
}

// Split writes the tensors of src into outDir as shards of at most the
// limit set by [WithMaxShardSize] (default 5 GB) plus an index, by the
// Hub's rule (see [PlanShards], tensors in name order), each shard with the
// source's __metadata__. If everything fits in one shard, it writes
// model.safetensors and no index.
//
// It writes all files or none: each goes to a temporary name in outDir,
// is synced and (unless [WithVerify](false)) read back and compared with
// the source (each part as soon as it is written); only then are all
// renamed into place, the index last (an index being replaced is removed
// before the first rename, so that a crash during the renames leaves no
// index rather than the old index over a mix of new and old shards). An
// existing output is an error unless [WithOverwrite]. A directory that
// holds the other form (model.safetensors when writing shards, an index
// when writing one file) is refused whatever the options, since loaders
// would pick the stale file. Tensors from a local [Model] are copied
// inside the kernel (copy_file_range); memory use does not depend on the
// tensors' sizes.
func Split(ctx context.Context, src safetensors.Source, outDir string, opts ...WriteOption) (*Result, error) {
	o, err := buildWriteOptions(opts)
	if err != nil {
		return nil, err
	}
	names := src.Names()
	c := &copier{ctx: ctx, src: src, opt: o}
	sizes := make(map[string]int64, len(names))
	for _, n := range names {
		info, ok := src.Info(n)
		if !ok {
			return nil, fmt.Errorf("%s: tensor %q: listed but not found", sourceName(src), n)
		}
		sizes[n] = info.Size()
		c.total, _ = addSize(c.total, info.Size())
	}
	plan := PlanShards(names, func(n string) int64 { return sizes[n] }, o.maxShardSize)
	paths := make([]string, len(plan))
	for i := range plan {
		paths[i] = filepath.Join(outDir, ShardName(i, len(plan)))
	}
	other := filepath.Join(outDir, SingleName)
	if len(plan) == 1 {
		other = filepath.Join(outDir, IndexName)
	} else {
		paths = append(paths, filepath.Join(outDir, IndexName))
	}
	if err := checkFree(src, paths, o.overwrite); err != nil {
		return nil, err
	}
	if _, err := os.Lstat(other); err == nil {
		return nil, fmt.Errorf("%w: %s is there already and loaders would read it instead of the new files; remove it or choose another directory", ErrExists, other)
	}
	dirs, err := atomicfile.MkdirAll(outDir)
	if err != nil {
		return nil, err
	}
	defer dirs.Undo() // after a failure, no empty directory is left behind
	if err := atomicfile.CheckSpace(outDir, c.total); err != nil {
		return nil, err
	}

	var pending []*atomicfile.File
	var syncs []chan error // one per shard: its fsync, run while the next is written
	waitSyncs := func() error {
		var first error
		for _, ch := range syncs {
			if err := <-ch; first == nil {
				first = err
			}
		}
		syncs = nil
		return first
	}
	abort := func() {
		waitSyncs()
		for _, f := range pending {
			f.Abort()
		}
	}
	meta := src.Meta()
	idx := NewIndex()
	for i, shard := range plan {
		f, err := atomicfile.Create(paths[i])
		if err != nil {
			abort()
			return nil, err
		}
		pending = append(pending, f)
		// Each shard is synced while the next is written; only the last
		// one's writeback is started during its copy (starting it early
		// for the others only makes the copy contend with it).
		h, ck, err := c.writeFile(f.File, paths[i], shard, meta, o.verify && !f.Direct(), i == len(plan)-1)
		if err == nil {
			ch := make(chan error, 1)
			go func() { ch <- f.File.Sync() }()
			syncs = append(syncs, ch)
			if ck != nil {
				err = ck.finish()
			}
		}
		if err != nil {
			abort()
			return nil, fmt.Errorf("%s: writing %s: %w", sourceName(src), paths[i], err)
		}
		for _, info := range h.Tensors {
			if err := idx.Add(filepath.Base(paths[i]), info); err != nil {
				abort()
				return nil, err
			}
		}
	}
	res := &Result{Files: paths, Bytes: c.total}
	if w, ok := src.(interface{ Warnings() []string }); ok {
		res.Warnings = w.Warnings()
	}
	if len(plan) > 1 {
		f, err := writeIndexTemp(idx, paths[len(paths)-1])
		if err != nil {
			abort()
			return nil, err
		}
		pending = append(pending, f)
		res.Index = idx
	}
	if err := waitSyncs(); err != nil {
		abort()
		return nil, fmt.Errorf("%s: syncing the shards: %w", outDir, err)
	}
	// Everything is written, synced and checked: give the files their
	// names, the index last so that no index ever names a shard not yet
	// there. An index being replaced is removed (durably) before the first
	// rename: otherwise a crash between two renames would leave the old
	// index over a mix of new and old shards, which loads without an error
	// when the shard names and tensor names are the same. What a crash can
	// still leave is shards (some new, some old) and no index, which
	// loaders refuse, plus hidden temporary files.
	if res.Index != nil && !pending[len(pending)-1].Direct() {
		if err := removeDurably(paths[len(paths)-1]); err != nil {
			abort()
			return nil, err
		}
	}
	// One group: all of the files renamed or (on a failure) none, and the
	// directory synced once, not once per shard.
	if err := atomicfile.CommitAll(pending, beforeCommit); err != nil {
		abort()
		return nil, err
	}
	dirs.Keep()
	return res, nil
}

// beforeCommit, when set by a test, is called before each file of a
// split is renamed into place: the state a crash there would leave.
var beforeCommit func(path string)

// removeDurably removes path if it exists and syncs its directory.
func removeDurably(path string) error {
	if err := os.Remove(path); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		return err
	}
	if d, err := os.Open(filepath.Dir(path)); err == nil {
		d.Sync()
		d.Close()
	}
	return nil
}

// writeIndexTemp writes the index to a temporary file beside path, checks
// that it parses back to the same weight map, and syncs it.
func writeIndexTemp(idx *Index, path string) (*atomicfile.File, error) {
	b, err := idx.Marshal()
	if err != nil {
		return nil, err
	}
	back, err := ParseIndex(b, path)
	if err != nil || len(back.WeightMap) != len(idx.WeightMap) || back.TotalSize != idx.TotalSize {
		return nil, errors.Join(fmt.Errorf("%w: %s: the index does not parse back", ErrVerify, path), err)
	}
	f, err := atomicfile.Create(path)
	if err != nil {
		return nil, err
	}
	if _, err := f.Write(b); err != nil {
		f.Abort()
		return nil, err
	}
	if err := f.File.Sync(); err != nil {
		f.Abort()
		return nil, err
	}
	return f, nil
}
