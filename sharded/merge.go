package sharded

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/gosafetensors/safetensors"
	"github.com/gosafetensors/safetensors/internal/atomicfile"
)

// Merge writes every tensor of src (typically a sharded [Model]) into one
// safetensors file at out, with src's __metadata__ (for a Model, the
// entries all shards agree on; see [Model.Warnings] for the others). The
// file is written to a temporary name beside out, synced and (unless
// [WithVerify](false)) read back and compared with the source (each part
// as soon as it is written, while the rest is copied and synced) before it
// is renamed to out; on any error nothing is left behind. An existing out
// is an error unless [WithOverwrite]. Tensors from a local Model are
// copied inside the kernel (copy_file_range).
func Merge(ctx context.Context, src safetensors.Source, out string, opts ...WriteOption) (*Result, error) {
	o, err := buildWriteOptions(opts)
	if err != nil {
		return nil, err
	}
	if err := checkFree(src, []string{out}, o.overwrite); err != nil {
		return nil, err
	}
	c := &copier{ctx: ctx, src: src, opt: o}
	names := src.Names()
	for _, n := range names {
		info, ok := src.Info(n)
		if !ok {
			return nil, fmt.Errorf("%s: tensor %q: listed but not found", sourceName(src), n)
		}
		c.total, _ = addSize(c.total, info.Size())
	}
	if err := atomicfile.CheckSpace(filepath.Dir(out), c.total); err != nil {
		return nil, err
	}
	f, err := atomicfile.Create(out)
	if err != nil {
		return nil, err
	}
	defer f.Abort()
	// What goes into a pipe or a device (see atomicfile.Create) cannot be
	// read back.
	_, ck, err := c.writeFile(f.File, out, names, src.Meta(), o.verify && !f.Direct(), true)
	if err != nil {
		return nil, fmt.Errorf("%s: writing %s: %w", sourceName(src), out, err)
	}
	var check func() error
	if ck != nil {
		check = ck.finish
	}
	if err := f.CommitAfter(check); err != nil {
		return nil, fmt.Errorf("%s: writing %s: %w", sourceName(src), out, err)
	}
	res := &Result{Files: []string{out}, Bytes: c.total}
	if w, ok := src.(interface{ Warnings() []string }); ok {
		res.Warnings = w.Warnings()
	}
	return res, nil
}
