package sharded

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"iter"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/gosafetensors/safetensors"
	"github.com/gosafetensors/safetensors/internal/bug"
	"github.com/gosafetensors/safetensors/internal/detect"
	"golang.org/x/sync/errgroup"
)

// DefaultConcurrency is how many shard headers are read at once.
const DefaultConcurrency = 8

// OpenOption configures [Open], [OpenDir] and [OpenIndex].
type OpenOption func(*openOptions) error

type openOptions struct {
	concurrency int
	maxShards   int
}

// DefaultMaxShards bounds how many shards an index may name: each costs a
// file or a request, so a hostile index must not ask for millions. The
// largest public checkpoints have a few hundred.
const DefaultMaxShards = 10_000

// WithMaxShards sets how many distinct shards an index may name (default
// [DefaultMaxShards]); at least 1.
func WithMaxShards(n int) OpenOption {
	return func(o *openOptions) error {
		if n < 1 {
			return fmt.Errorf("%w: max shards %d, want at least 1", ErrOption, n)
		}
		o.maxShards = n
		return nil
	}
}

// WithConcurrency sets how many shards are opened (their headers read) at
// once; at least 1.
func WithConcurrency(n int) OpenOption {
	return func(o *openOptions) error {
		if n < 1 {
			return fmt.Errorf("%w: concurrency %d, want at least 1", ErrOption, n)
		}
		o.concurrency = n
		return nil
	}
}

func buildOpenOptions(opts []OpenOption) (openOptions, error) {
	o := openOptions{concurrency: DefaultConcurrency, maxShards: DefaultMaxShards}
	for _, opt := range opts {
		if opt == nil {
			return o, fmt.Errorf("%w: nil OpenOption", ErrOption)
		}
		if err := opt(&o); err != nil {
			return o, err
		}
	}
	return o, nil
}

// ShardInfo summarizes one shard of a model.
type ShardInfo struct {
	Name       string // file name, as the index gives it
	Tensors    int    // number of tensors
	Bytes      int64  // tensor data bytes
	Parameters int64  // elements over all its tensors
}

type shard struct {
	ShardInfo
	src safetensors.Source
}

type location struct {
	shard int // index into Model.shards
	info  safetensors.TensorInfo
}

// Model is a set of tensors stored in one or more safetensors files,
// checked against its index when it has one. It implements
// [safetensors.Source]: Names is sorted, All iterates shard by shard (in
// shard name order), each in file order. A Model is safe for concurrent
// reads; Close it when done.
type Model struct {
	name     string // the index (or the single file), for messages
	index    *Index // nil for a single file
	shards   []*shard
	tensors  map[string]location
	names    []string
	meta     map[string]string
	warnings []string
	closers  []func() error
}

var _ safetensors.Source = (*Model)(nil)

// Open opens a local model: a directory (see [OpenDir]), an index file or
// a single safetensors file. A file is told an index or a safetensors file
// by its content (as source.Detect tells every format), never by its name:
// an index under any name opens, and a safetensors file named *.json is
// read as one.
func Open(ctx context.Context, path string, opts ...OpenOption) (*Model, error) {
	if _, err := buildOpenOptions(opts); err != nil {
		return nil, err
	}
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if st.IsDir() {
		return OpenDir(ctx, path, opts...)
	}
	if !st.Mode().IsRegular() { // a FIFO would block the open
		return nil, fmt.Errorf("%w: %s is not a regular file (%s)", ErrNoModel, path, st.Mode().Type())
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	if st, err = f.Stat(); err != nil { // the file opened, not the name stated
		f.Close()
		return nil, err
	}
	format, _, _, err := detect.Detect(f, st.Size())
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if format != detect.Index {
		ls, err := openLocal(f, path)
		if err != nil {
			return nil, err
		}
		return Single(path, ls), nil
	}
	defer f.Close()
	idx, err := readIndexFrom(f, path)
	if err != nil {
		return nil, err
	}
	d, err := NewDirOpener(filepath.Dir(path))
	if err != nil {
		return nil, err
	}
	m, err := OpenIndex(ctx, idx, path, d, opts...)
	if err != nil {
		d.Close()
		return nil, err
	}
	m.closers = append(m.closers, d.Close)
	return m, nil
}

// OpenDir opens the model in a local directory: model.safetensors if
// present (as transformers loads it), else model.safetensors.index.json,
// else the directory's only *.safetensors.index.json, else its only
// *.safetensors file. Files are opened through a [DirOpener], so nothing
// outside the directory is read.
func OpenDir(ctx context.Context, dir string, opts ...OpenOption) (*Model, error) {
	d, err := NewDirOpener(dir)
	if err != nil {
		return nil, err
	}
	m, err := openDir(ctx, d, dir, opts)
	if err != nil {
		d.Close()
		return nil, err
	}
	m.closers = append(m.closers, d.Close)
	return m, nil
}

func openDir(ctx context.Context, d *DirOpener, dir string, opts []OpenOption) (*Model, error) {
	if _, err := buildOpenOptions(opts); err != nil {
		return nil, err
	}
	ents, err := fs.ReadDir(d.root.FS(), filepath.ToSlash(filepath.Join(d.sub, ".")))
	if err != nil {
		return nil, err
	}
	var indexes, files []string
	for _, e := range ents {
		switch n := e.Name(); {
		case strings.HasPrefix(n, "."):
		case strings.HasSuffix(n, ".safetensors.index.json"):
			indexes = append(indexes, n)
		case strings.HasSuffix(n, ".safetensors"):
			files = append(files, n)
		}
	}
	pick := func() (name string, isIndex bool, err error) {
		switch {
		case slices.Contains(files, SingleName):
			return SingleName, false, nil
		case slices.Contains(indexes, IndexName):
			return IndexName, true, nil
		case len(indexes) == 1:
			return indexes[0], true, nil
		case len(indexes) > 1:
			return "", false, fmt.Errorf("%w: %s holds %d indexes (%s); name one", ErrNoModel, dir, len(indexes), strings.Join(indexes, ", "))
		case len(files) == 1:
			return files[0], false, nil
		case len(files) > 1:
			return "", false, fmt.Errorf("%w: %s holds %d safetensors files and no index; name one", ErrNoModel, dir, len(files))
		}
		return "", false, fmt.Errorf("%w: %s holds no *.safetensors file", ErrNoModel, dir)
	}
	name, isIndex, err := pick()
	if err != nil {
		return nil, err
	}
	f, err := d.open(name)
	if err != nil {
		return nil, err
	}
	if !isIndex {
		ls, err := openLocal(f, d.path(name))
		if err != nil {
			return nil, err
		}
		return Single(d.path(name), ls), nil
	}
	defer f.Close()
	idx, err := readIndexFrom(f, d.path(name))
	if err != nil {
		return nil, err
	}
	return OpenIndex(ctx, idx, d.path(name), d, opts...)
}

// Single returns a model of one safetensors source (a file, a remote
// object). The model owns src and closes it.
func Single(name string, src safetensors.Source) *Model {
	m := &Model{name: name, tensors: map[string]location{}}
	sh := &shard{ShardInfo: ShardInfo{Name: name}, src: src}
	m.shards = []*shard{sh}
	for _, n := range src.Names() {
		info, _ := src.Info(n)
		m.tensors[n] = location{info: info}
	}
	m.names = src.Names()
	m.meta = src.Meta()
	sh.summarize(m.names, m.tensors)
	return m
}

func (s *shard) summarize(names []string, locs map[string]location) {
	for _, n := range names {
		info := locs[n].info
		p, _ := numel(info.Shape)
		s.Tensors++
		s.Bytes, _ = addSize(s.Bytes, info.Size())
		s.Parameters, _ = addSize(s.Parameters, p)
	}
}

// OpenIndex opens the shards idx names through op, reading their headers
// concurrently, and checks them against the index: every weight_map entry
// is in its shard under that name, no tensor is in two shards, and every
// tensor of every shard is in the weight_map. name (the index's path or
// URL) starts every error. Metadata that differs between shards, and a
// total_size that is not the sum of the tensors' bytes, are reported by
// [Model.Warnings]. The model does not close op.
func OpenIndex(ctx context.Context, idx *Index, name string, op Opener, opts ...OpenOption) (*Model, error) {
	o, err := buildOpenOptions(opts)
	if err != nil {
		return nil, err
	}
	if err := idx.Validate(name); err != nil {
		return nil, err
	}
	names := idx.Shards()
	if len(names) > o.maxShards {
		return nil, indexErr(ErrInvalidIndex, name, "", "names %d shards, more than the limit of %d (WithMaxShards)", len(names), o.maxShards)
	}
	srcs := make([]safetensors.Source, len(names))
	closeAll := func() {
		for _, s := range srcs {
			if s != nil {
				s.Close()
			}
		}
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(o.concurrency)
	for i, sn := range names {
		g.Go(func() (err error) {
			defer bug.Catch(&err, name+": opening shard "+sn)
			if err := gctx.Err(); err != nil {
				return err
			}
			s, err := op.OpenShard(gctx, sn)
			if err != nil {
				return fmt.Errorf("%s: shard %s: %w", name, sn, err)
			}
			srcs[i] = s
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		closeAll()
		// Report the caller's cancellation, not a shard's echo of it.
		if cerr := ctx.Err(); cerr != nil && !errors.Is(err, cerr) {
			err = fmt.Errorf("%s: %w", name, cerr)
		}
		return nil, err
	}
	m, err := check(idx, name, names, srcs)
	if err != nil {
		closeAll()
		return nil, err
	}
	return m, nil
}

// check builds the model from opened shards, refusing any disagreement
// with the index. Problems are looked for in a fixed order (shards by name,
// tensors by name), so the error reported is the same on every run.
func check(idx *Index, name string, names []string, srcs []safetensors.Source) (*Model, error) {
	m := &Model{name: name, index: idx, tensors: map[string]location{}}
	holder := map[string]int{} // tensor -> first shard holding it
	for i, src := range srcs {
		for _, t := range src.Names() {
			if j, dup := holder[t]; dup {
				return nil, tensorErr(ErrMismatch, name, names[i], t, "also in shard %s: a tensor must be in one shard", names[j])
			}
			holder[t] = i
		}
	}
	for i, src := range srcs {
		sh := &shard{ShardInfo: ShardInfo{Name: names[i]}, src: src}
		m.shards = append(m.shards, sh)
		for _, t := range src.Names() {
			want, ok := idx.WeightMap[t]
			switch {
			case !ok:
				return nil, tensorErr(ErrMismatch, name, names[i], t, "in the shard but not in the weight_map")
			case want != names[i]:
				return nil, tensorErr(ErrMismatch, name, names[i], t, "in this shard, but the weight_map says %s", want)
			}
			info, _ := src.Info(t)
			m.tensors[t] = location{shard: i, info: info}
		}
	}
	for _, t := range slices.Sorted(maps.Keys(idx.WeightMap)) {
		if _, ok := m.tensors[t]; !ok {
			return nil, tensorErr(ErrMismatch, name, idx.WeightMap[t], t, "listed in the weight_map but not in the shard")
		}
	}
	m.names = slices.Sorted(maps.Keys(m.tensors))
	for i, sh := range m.shards {
		sh.summarize(srcs[i].Names(), m.tensors)
	}
	var total int64
	for _, sh := range m.shards {
		total, _ = addSize(total, sh.Bytes)
	}
	if idx.TotalSize >= 0 && idx.TotalSize != total {
		m.warnings = append(m.warnings, fmt.Sprintf("%s: metadata.total_size is %d, the tensors hold %d bytes", name, idx.TotalSize, total))
	}
	m.meta, m.warnings = mergeMeta(name, names, srcs, m.warnings)
	return m, nil
}

// mergeMeta returns the __metadata__ entries every shard agrees on, and a
// warning for each key the shards disagree about or do not all have.
func mergeMeta(name string, names []string, srcs []safetensors.Source, warnings []string) (map[string]string, []string) {
	metas := make([]map[string]string, len(srcs))
	keys := map[string]bool{}
	for i, s := range srcs {
		metas[i] = s.Meta()
		for k := range metas[i] {
			keys[k] = true
		}
	}
	out := map[string]string{}
	for _, k := range slices.Sorted(maps.Keys(keys)) {
		v, ok := metas[0][k]
		agree := ok
		for i := 1; agree && i < len(metas); i++ {
			w, ok := metas[i][k]
			agree = ok && w == v
		}
		if agree {
			out[k] = v
			continue
		}
		var parts []string
		for i, mt := range metas {
			if w, ok := mt[k]; ok {
				parts = append(parts, fmt.Sprintf("%s=%q", names[i], w))
			} else {
				parts = append(parts, names[i]+" has none")
			}
		}
		warnings = append(warnings, fmt.Sprintf("%s: shards disagree on __metadata__ %q (%s); left out of the model's metadata", name, k, strings.Join(parts, ", ")))
	}
	return out, warnings
}

// Name returns the index path (or the single file's) given when opening.
func (m *Model) Name() string { return m.name }

// Index returns the model's index, or nil for a single file.
func (m *Model) Index() *Index { return m.index }

// Shards describes the shards, in name order.
func (m *Model) Shards() []ShardInfo {
	out := make([]ShardInfo, len(m.shards))
	for i, s := range m.shards {
		out[i] = s.ShardInfo
	}
	return out
}

// ShardOf returns the name of the shard that holds the tensor.
func (m *Model) ShardOf(tensor string) (string, bool) {
	l, ok := m.tensors[tensor]
	if !ok {
		return "", false
	}
	return m.shards[l.shard].Name, true
}

// Warnings lists what is odd but not wrong: shards whose __metadata__
// differ, a total_size that is not the tensors' bytes.
func (m *Model) Warnings() []string { return slices.Clone(m.warnings) }

// Names returns every tensor name, sorted.
func (m *Model) Names() []string { return slices.Clone(m.names) }

// Info describes the named tensor; DataOffsets are relative to the data
// section of its shard.
func (m *Model) Info(name string) (safetensors.TensorInfo, bool) {
	l, ok := m.tensors[name]
	return l.info, ok
}

// Tensor returns the named tensor, read from its shard.
func (m *Model) Tensor(name string) (*safetensors.Tensor, error) {
	l, ok := m.tensors[name]
	if !ok {
		return nil, &safetensors.FormatError{File: m.name, Tensor: name, Offset: -1, Msg: "no such tensor", Err: safetensors.ErrTensorNotFound}
	}
	src := m.shards[l.shard].src
	if src == nil {
		return nil, safetensors.ErrClosed
	}
	return src.Tensor(name)
}

// All iterates over every tensor, shard by shard in name order, each shard
// in file order.
func (m *Model) All() iter.Seq2[*safetensors.Tensor, error] {
	return func(yield func(*safetensors.Tensor, error) bool) {
		for _, s := range m.shards {
			if s.src == nil {
				yield(nil, safetensors.ErrClosed)
				return
			}
			for t, err := range s.src.All() {
				if !yield(t, err) || err != nil {
					return
				}
			}
		}
	}
}

// Meta returns the __metadata__ entries all shards agree on.
func (m *Model) Meta() map[string]string {
	out := make(map[string]string, len(m.meta))
	maps.Copy(out, m.meta)
	return out
}

// Close closes every shard.
func (m *Model) Close() error {
	var errs []error
	for _, s := range m.shards {
		if s.src != nil {
			errs = append(errs, s.src.Close())
			s.src = nil
		}
	}
	for _, c := range m.closers {
		errs = append(errs, c())
	}
	m.closers = nil
	return errors.Join(errs...)
}
