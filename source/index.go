package source

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"sync"

	"github.com/gosafetensors/safetensors"
	"github.com/gosafetensors/safetensors/convert"
	"github.com/gosafetensors/safetensors/internal/bug"
	"github.com/gosafetensors/safetensors/sharded"
	"golang.org/x/sync/errgroup"
)

// shardConcurrency is how many shards are opened (headers, a checkpoint's
// pickle) at once.
const shardConcurrency = sharded.DefaultConcurrency

// indexModel reads the object as a sharded model's index and opens the
// shards it names beside it, each by its content: safetensors files (plain
// or compressed) or PyTorch checkpoints, read as the files converting them
// would write. The index of a sharded checkpoint
// (pytorch_model.bin.index.json) is then read as the index converting the
// folder would write: its weight_map follows what the converted shards
// hold (tied aliases dropped), and where it disagrees with them the shards
// win and the model says so in its warnings, as convert does.
func (o *Object) indexModel(ctx context.Context, c *config, m *Model) (err error) {
	idx, err := o.readIndex()
	if err != nil {
		return err
	}
	if err := idx.Validate(o.Name); err != nil {
		return err
	}
	names := idx.Shards()
	if len(names) > sharded.DefaultMaxShards {
		return &sharded.IndexError{Index: o.Name, Msg: fmt.Sprintf("names %d shards, more than the limit of %d", len(names), sharded.DefaultMaxShards), Err: sharded.ErrInvalidIndex}
	}
	open := o.Sibling
	var dir *sharded.DirOpener
	if o.file != nil && o.dir == nil {
		// Shards of a local index are opened through the directory's
		// root: nothing outside it is read, whatever the links say.
		if dir, err = sharded.NewDirOpener(filepath.Dir(o.Name)); err != nil {
			return &IOError{Location: o.Name, Op: "open", Err: err}
		}
		open = func(ctx context.Context, rel string) (*Object, error) {
			return dirObject(dir, filepath.Dir(o.Name), rel)
		}
		defer func() {
			if err != nil {
				dir.Close()
			}
		}()
	}
	shards, err := openShards(ctx, o.Name, names, open, c)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			shards.closeRest()
		}
	}()
	if reports := shards.checkpoints(); reports != nil {
		x, warnings, err := convert.IndexFor(idx, reports, func(s string) string { return s })
		if err != nil {
			return fmt.Errorf("%s: %w", o.Name, err)
		}
		idx = x
		for _, w := range warnings {
			m.warnings = append(m.warnings, o.Name+": "+w)
		}
		// Each converted shard records the aliases it dropped (removed ->
		// kept) in its own __metadata__: the model holds them all.
		m.meta = map[string]string{}
		for _, r := range reports {
			for _, a := range r.Removed {
				m.meta[a.Name] = a.Kept
			}
		}
	}
	sm, err := sharded.OpenIndex(ctx, idx, o.Name, shards)
	if err != nil {
		return err
	}
	m.Source, m.Sharded = sm, sm
	m.closers = append(m.closers, o)
	if dir != nil {
		m.closers = append(m.closers, dir)
	}
	return nil
}

// readIndex reads and parses the whole object as an index, bounded by
// sharded.DefaultMaxIndexSize.
func (o *Object) readIndex() (*sharded.Index, error) {
	if o.Size > sharded.DefaultMaxIndexSize {
		return nil, &ContentError{Location: o.Name, Format: Index, Msg: fmt.Sprintf("index of %d bytes is larger than the %d allowed", o.Size, sharded.DefaultMaxIndexSize)}
	}
	b := make([]byte, o.Size)
	if n, err := o.ReadAt(b, 0); err != nil && !(errors.Is(err, io.EOF) && int64(n) == o.Size) {
		return nil, &IOError{Location: o.Name, Op: "read", Err: err}
	}
	return sharded.ParseIndex(b, o.Name)
}

// openedShards are shards opened by content before the index is checked,
// handed to sharded.OpenIndex as its Opener.
type openedShards struct {
	mu     sync.Mutex
	models map[string]*Model
}

// openShards opens every named shard concurrently. Remote readers keep
// the context they are opened with for every later read, and the shards
// outlive the open: they get its values, not its cancellation.
func openShards(ctx context.Context, index string, names []string, open func(context.Context, string) (*Object, error), c *config) (*openedShards, error) {
	s := &openedShards{models: make(map[string]*Model, len(names))}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(shardConcurrency)
	for _, name := range names {
		g.Go(func() (err error) {
			defer bug.Catch(&err, index+": opening shard "+name)
			if err := gctx.Err(); err != nil {
				return err
			}
			o, err := open(context.WithoutCancel(gctx), name)
			if err != nil {
				return fmt.Errorf("%s: shard %s: %w", index, name, err)
			}
			m, err := o.shard(gctx, c)
			if err != nil {
				o.Close()
				return fmt.Errorf("%s: shard %s: %w", index, name, err)
			}
			s.mu.Lock()
			s.models[name] = m
			s.mu.Unlock()
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		s.closeRest()
		if cerr := ctx.Err(); cerr != nil && !errors.Is(err, cerr) {
			err = fmt.Errorf("%s: %w", index, cerr)
		}
		return nil, err
	}
	return s, nil
}

// shard reads a shard as tensors: a safetensors file, plain or
// compressed, or a checkpoint. An index or a folder is not a shard.
func (o *Object) shard(ctx context.Context, c *config) (*Model, error) {
	switch o.Format {
	case Index, Directory:
		return nil, &ContentError{Location: o.Name, Format: o.Format, Msg: "a shard must be a safetensors file or a PyTorch checkpoint, not " + o.Format.describe()}
	}
	return o.model(ctx, c)
}

// checkpoints returns what converting each shard writes when any shard is
// a checkpoint, else nil (a safetensors index is checked as it is).
func (s *openedShards) checkpoints() map[string]*convert.Report {
	s.mu.Lock()
	defer s.mu.Unlock()
	var reports map[string]*convert.Report
	for _, m := range s.models {
		if m.Checkpoint != nil {
			reports = map[string]*convert.Report{}
			break
		}
	}
	if reports == nil {
		return nil
	}
	for name, m := range s.models {
		r := &convert.Report{}
		if m.Checkpoint != nil {
			r = m.Checkpoint.Report()
		} else {
			for _, n := range m.Names() {
				info, _ := m.Info(n)
				r.Tensors = append(r.Tensors, convert.TensorReport{Name: n, DType: info.DType.String(), Shape: info.Shape})
			}
		}
		reports[name] = r
	}
	return reports
}

// OpenShard hands over a shard opened before; sharded.OpenIndex owns it
// from then on.
func (s *openedShards) OpenShard(ctx context.Context, name string) (safetensors.Source, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m, ok := s.models[name]
	if !ok {
		return nil, fmt.Errorf("shard %s was not opened", name)
	}
	delete(s.models, name)
	if m.Checkpoint != nil {
		return &convertedShard{m}, nil
	}
	return m, nil
}

// convertedShard is a checkpoint shard whose __metadata__ leaves out the
// aliases it dropped: the model records those for all shards, where the
// shards would disagree about them.
type convertedShard struct{ *Model }

func (s *convertedShard) Meta() map[string]string {
	meta := s.Model.Meta()
	for _, a := range s.Checkpoint.Report().Removed {
		delete(meta, a.Name)
	}
	return meta
}

// closeRest closes the shards not handed over.
func (s *openedShards) closeRest() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for name, m := range s.models {
		m.Close()
		delete(s.models, name)
	}
}
