package source

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"

	"github.com/gosafetensors/safetensors"
	"github.com/gosafetensors/safetensors/compressed"
	"github.com/gosafetensors/safetensors/convert"
	"github.com/gosafetensors/safetensors/internal/atomicfile"
	"github.com/gosafetensors/safetensors/sharded"
	"github.com/gosafetensors/safetensors/torch"
)

// Model is a location opened as tensors: one safetensors file (local,
// remote or compressed), a sharded model (a directory, an index, a Hub
// repository), or a PyTorch checkpoint read as the file converting it would
// write. It implements safetensors.Source; the fields say which kind it is,
// for callers that show more than tensors.
type Model struct {
	safetensors.Source

	Name   string
	Format Format
	Object *Object // the file or object opened; nil for a local directory

	File       *safetensors.Reader  // a single safetensors file (its header, warnings)
	Sharded    *sharded.Model       // a directory or an index (shards, warnings)
	Checkpoint *convert.Source      // a PyTorch checkpoint
	Compressed *compressed.ReaderAt // a compressed file, under File

	closers  []io.Closer
	warnings []string          // beyond those of File and Sharded
	meta     map[string]string // __metadata__ beyond the Source's
}

// Meta returns the model's __metadata__: the file's, the entries a sharded
// model's shards agree on (and, for a sharded checkpoint, every alias its
// shards dropped on conversion, removed -> kept).
func (m *Model) Meta() map[string]string {
	out := m.Source.Meta()
	maps.Copy(out, m.meta)
	return out
}

// InputFiles returns the local files the model reads: every local file it
// opened (a file, an index, a checkpoint) and those of its shards. A
// command that writes refuses an output that is one of them
// (safetensors.ErrOutputIsInput).
func (m *Model) InputFiles() []atomicfile.Input {
	var out []atomicfile.Input
	for _, c := range m.closers {
		if o, ok := c.(*Object); ok && o.file != nil {
			if st, err := o.file.Stat(); err == nil {
				out = append(out, atomicfile.Input{Name: o.Name, Info: st})
			}
		}
	}
	if m.Object != nil && m.Object.file != nil {
		if st, err := m.Object.file.Stat(); err == nil {
			out = append(out, atomicfile.Input{Name: m.Object.Name, Info: st})
		}
	}
	if m.Sharded != nil {
		out = append(out, m.Sharded.InputFiles()...)
	}
	return out
}

// Close releases everything the model holds.
func (m *Model) Close() error {
	var err error
	if m.Source != nil {
		err = m.Source.Close()
	}
	for i := len(m.closers) - 1; i >= 0; i-- {
		if cerr := m.closers[i].Close(); err == nil {
			err = cerr
		}
	}
	m.closers = nil
	return err
}

// OpenModel opens loc (see [Open]) as tensors. Errors are *IOError when
// the bytes could not be read, *ContentError (or the decoder's format
// error) when they were read and are not a model.
func OpenModel(ctx context.Context, loc string, opts ...Option) (*Model, error) {
	o, err := Open(ctx, loc, opts...)
	if err != nil {
		return nil, err
	}
	m, err := o.Model(ctx, opts...)
	if err != nil {
		o.Close()
		return nil, err
	}
	return m, nil
}

// Model reads the object as tensors; the Model owns the object from then
// on (on error the caller still does).
func (o *Object) Model(ctx context.Context, opts ...Option) (*Model, error) {
	c, err := buildConfig(opts)
	if err != nil {
		return nil, err
	}
	return o.model(ctx, &c)
}

func (o *Object) model(ctx context.Context, c *config) (*Model, error) {
	m := &Model{Name: o.Name, Format: o.Format, Object: o}
	if w := NameMismatch(o.Name, o.Format); w != "" {
		m.warnings = append(m.warnings, o.Name+": "+w)
	}
	switch o.Format {
	case Directory:
		return openDir(ctx, o.Name, c)
	case Safetensors:
		r, err := o.safetensors(c)
		if err != nil {
			return nil, classify(o, c.headerLimit(err))
		}
		m.Source, m.File = r, r
		if o.file == nil {
			m.closers = append(m.closers, o)
		}
		return m, nil
	case Index:
		if err := o.indexModel(ctx, c, m); err != nil {
			return nil, classify(o, err)
		}
		return m, nil
	case Compressed:
		// through the decompressor registered with the root package, as
		// safetensors.Open would read it
		ra, n, err := o.openContainer(c)
		if err != nil {
			return nil, classify(o, c.headerLimit(err))
		}
		r, err := safetensors.NewReader(ra, n, c.headerOptions(o.Name)...)
		if err != nil {
			return nil, classify(o, c.headerLimit(err))
		}
		m.Source, m.File = r, r
		m.Compressed, _ = ra.(*compressed.ReaderAt)
		m.closers = append(m.closers, o)
		return m, nil
	}
	// A checkpoint, or unknown content that may still be a pickle stream
	// (protocols 0 and 1 have no magic).
	ck, err := torch.NewReader(o, o.Size, o.Name, c.torch...)
	if err != nil {
		err = classify(o, err)
		if o.Format == Unknown && !IsIOError(err) && !errors.Is(err, torch.ErrNotAllowed) && !errors.Is(err, torch.ErrUnsupported) {
			return nil, &ContentError{Location: o.Name, Format: o.Format, Msg: "not a safetensors file, a sharded model index or a PyTorch checkpoint", Hint: o.Hint, Err: err}
		}
		return nil, err
	}
	// Tensors are read lazily, a slice reads only its bytes: no cap on
	// what zero-stride views expand to is needed to bound memory.
	copts := []convert.PlanOption{convert.WithMaxOutputBytes(convert.NoOutputCap)}
	if c.torchKey != "" {
		copts = append(copts, convert.WithKey(c.torchKey))
	}
	cs, err := convert.NewSource(ck, o.Name, copts...)
	if err != nil {
		return nil, classify(o, err)
	}
	m.Source, m.Checkpoint = cs, cs
	m.closers = append(m.closers, o)
	m.warnings = append(m.warnings, expandedViews(o.Name, cs)...)
	return m, nil
}

// expandedViews warns of each tensor of cs that is an expanded view
// (torch.Tensor.Expanded): what it stands for, and whether it may be read;
// and, once, of the overlapping views that may not be read
// (torch.OverlappingViewError).
func expandedViews(name string, cs *convert.Source) []string {
	var out []string
	for _, t := range cs.Report().Tensors {
		v := cs.Checkpoint().Lookup(t.Source)
		if v == nil || !v.Expanded() {
			continue
		}
		w := fmt.Sprintf("%s: tensor %q is an expanded view (shape %v, stride %v): %d bytes of storage stand for %d bytes (%.4g times as many); ",
			name, t.Name, v.Shape, v.Stride, v.Storage.NBytes(), v.NBytes(), float64(v.NBytes())/float64(max(v.Storage.NBytes(), 1)))
		var e *torch.ExpandedViewError
		if errors.As(v.CheckView(), &e) {
			w += fmt.Sprintf("reading it is refused: the checkpoint's expanded and overlapping views read %d bytes beyond what their storages hold, more than the %d allowed", e.Total, e.Allowed)
		} else {
			w += "it reads as a contiguous copy of that size"
		}
		out = append(out, w)
	}
	// overlapping views: one warning for the checkpoint, naming the first
	var first *torch.OverlappingViewError
	n := 0
	for _, t := range cs.Report().Tensors {
		var e *torch.OverlappingViewError
		if v := cs.Checkpoint().Lookup(t.Source); v != nil && errors.As(v.CheckView(), &e) {
			if n++; first == nil {
				first = e
			}
		}
	}
	if first != nil {
		out = append(out, fmt.Sprintf("%s: %d tensors (the first %q) are views of storages whose distinct views together are larger than they are (%q: %d views, %d bytes, of %d stored); "+
			"reading them is refused: the checkpoint's expanded and overlapping views read %d bytes beyond what their storages hold, more than the %d allowed",
			name, n, first.Tensor, first.Storage, first.Views, first.ViewBytes, first.StorageBytes, first.Total, first.Allowed))
	}
	return out
}

// Warnings lists what is odd but not wrong about the model: a safetensors
// header's unknown fields, shards whose metadata differ, a checkpoint
// index that disagrees with its shards.
func (m *Model) Warnings() []string {
	var out []string
	switch {
	case m.File != nil:
		out = append(out, m.File.Warnings...)
	case m.Sharded != nil:
		out = append(out, m.Sharded.Warnings()...)
	}
	return append(out, m.warnings...)
}

// openContainer opens a Compressed object's original: through the
// decompressor registered with the root package, or, when the caller
// bounds the header or the original or counts, through compressed.NewReaderAt with
// those bounds, which
// the registry's Open cannot pass (the container parses the original's
// header to check its size: a few KiB of container may hold a 100 MB
// header).
func (o *Object) openContainer(c *config) (io.ReaderAt, int64, error) {
	if c.maxHeader <= 0 && c.expand == nil && c.onDecode == nil {
		return o.container.Open(o, o.Size, o.Name)
	}
	copts := []compressed.ReadOption{compressed.WithName(o.Name)}
	if c.maxHeader > 0 {
		copts = append(copts, compressed.WithMaxHeaderSize(c.maxHeader))
	}
	if c.expand != nil {
		copts = append(copts, compressed.WithMaxSize(c.expand.bound(o.Size)))
	}
	if c.onDecode != nil {
		copts = append(copts, compressed.WithDecodeCounter(c.onDecode))
	}
	ra, err := compressed.NewReaderAt(o, o.Size, copts...)
	if err != nil {
		return nil, 0, c.expandedLimit(err, o.Size)
	}
	return ra, ra.Size(), nil
}

// safetensors reads the object's header: a local file is mapped (the
// *File then owns the descriptor). The object was detected as not
// compressed already, so the root package does not probe again.
func (o *Object) safetensors(c *config) (*safetensors.Reader, error) {
	if o.file != nil {
		f, err := safetensors.NewFile(o.file, c.headerOptions(o.Name)...)
		if err != nil {
			return nil, err
		}
		o.closer = nil // f closes the descriptor
		return &f.Reader, nil
	}
	return safetensors.NewReader(o, o.Size, c.headerOptions(o.Name)...)
}

// TensorFile returns the local file holding the named tensor and the
// tensor's offset in it (sharded.FileBacked), so that split and merge copy
// local tensors inside the kernel.
func (m *Model) TensorFile(name string) (*os.File, int64, bool) {
	if m.Sharded != nil {
		return m.Sharded.TensorFile(name)
	}
	if m.File == nil || m.Compressed != nil || m.Object == nil || m.Object.file == nil {
		return nil, 0, false
	}
	t, err := m.File.Tensor(name)
	if err != nil || t.Offset() < 0 {
		return nil, 0, false
	}
	return m.Object.file, t.Offset(), true
}
