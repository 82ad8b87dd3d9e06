package audit

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"iter"

	"github.com/gosafetensors/safetensors"
	"github.com/gosafetensors/safetensors/compressed"
	"github.com/gosafetensors/safetensors/internal/bug"
	"github.com/gosafetensors/safetensors/internal/fault"
	"github.com/gosafetensors/safetensors/internal/redact"
	"github.com/gosafetensors/safetensors/internal/units"
	"github.com/gosafetensors/safetensors/source"
	"github.com/gosafetensors/safetensors/stats"
	"github.com/gosafetensors/safetensors/torch"
)

// ValidateReport is what validation found in one file or sharded model:
// one element of the array `validate --json` prints (see docs/json.md).
// The pointer fields are null in JSON when they do not apply.
type ValidateReport struct {
	File   string `json:"file"`
	Status Status `json:"status"`
	Valid  bool   `json:"valid"` // Status == OK
	// Error is the full error message, for a file invalid or unreadable.
	Error *string `json:"error"`
	// Variant is the reference implementation's error variant, e.g.
	// "InvalidOffset".
	Variant *string `json:"variant"`
	Tensor  *string `json:"tensor"` // the tensor the error concerns
	// Offset is the absolute byte offset in the file where the problem was
	// found.
	Offset *int64 `json:"offset"`
	// Hint says what the file probably is, in plain words (a Git LFS
	// pointer, an HTML page...).
	Hint        *string  `json:"hint"`
	FileSize    *int64   `json:"file_size"`    // bytes, when the file could be opened
	TensorCount *int     `json:"tensor_count"` // when valid
	DataBytes   *int64   `json:"data_bytes"`   // size of the data section, when valid
	Warnings    []string `json:"warnings"`     // [] when none; with WithFull, NaN/Inf counts
	// Err is the error behind Error, for errors.Is and errors.As (its
	// message is Error's).
	Err error `json:"-"`

	loc string // the location as given, secrets and all
}

// Validate checks the safetensors files and sharded models of loc (see
// [Targets]) and yields one report per file or model, in target order, a
// few at a time ([WithConcurrency]). A location holding nothing to
// validate is reported unreadable, as is one that could not be listed or
// opened.
func Validate(ctx context.Context, loc string, opts ...Option) iter.Seq[*ValidateReport] {
	c, err := buildConfig(opts)
	if err != nil {
		return func(yield func(*ValidateReport) bool) { yield(newValidateReport(loc).unreadable(err)) }
	}
	return func(yield func(*ValidateReport) bool) {
		c, done := c.withPrefixPool(loc)
		defer done()
		n := 0
		for r := range pipeline(ctx, c, c.targets(ctx, loc, ValidateCheck), func(ctx context.Context, t *Target, err error) *ValidateReport {
			if err != nil {
				return newValidateReport(t.Location).unreadable(err)
			}
			return c.validateTarget(ctx, t)
		}, func(err error) *ValidateReport { return newValidateReport(loc).unreadable(cutShort(loc, err)) }) {
			n++
			if !yield(r) {
				return
			}
		}
		if n == 0 {
			yield(newValidateReport(loc).unreadable(&source.IOError{Location: loc, Op: "list", Err: errors.New("no *.safetensors files here")}))
		}
	}
}

// ValidateTarget validates one target.
func ValidateTarget(ctx context.Context, t Target, opts ...Option) *ValidateReport {
	c, err := buildConfig(opts)
	if err != nil {
		t.Release()
		return newValidateReport(t.Location).unreadable(err)
	}
	return c.validateTarget(ctx, &t)
}

// newValidateReport starts the report on loc, whose name shows no secret
// (internal/redact).
func newValidateReport(loc string) *ValidateReport {
	return &ValidateReport{File: redact.Location(loc), Warnings: []string{}, loc: loc}
}

func (c *config) validateTarget(ctx context.Context, t *Target) (r *ValidateReport) {
	defer recoverValidate(&r, t.Location)
	r = newValidateReport(t.Location)
	if err := ctx.Err(); err != nil {
		t.Release()
		return r.unreadable(&source.IOError{Location: t.Location, Op: "open", Err: err})
	}
	o, err := t.open(ctx, c)
	if err != nil {
		return r.unreadable(err)
	}
	return c.validateObject(ctx, r, o)
}

// validateObject checks one object, which it closes: a safetensors file
// (plain, compressed or remote) against the reference's rules, or a
// sharded model's index with every check of a sharded model (shards
// present, names plain, every tensor where the index says and nowhere
// else).
func (c *config) validateObject(ctx context.Context, r *ValidateReport, o *source.Object) (out *ValidateReport) {
	defer recoverValidate(&out, r.loc)
	defer func() {
		if o != nil {
			o.Close()
		}
	}()
	loc, obj := r.File, o
	defer func() {
		// a read failed part-way: a decoder's complaint (a short header,
		// unexpected EOF) is about bytes that never came, so nothing was
		// checked
		if ioErr := obj.Err(); ioErr != nil && !errors.Is(r.Err, ioErr) {
			r.Variant, r.Tensor, r.Offset, r.Hint = nil, nil, nil, nil
			r.TensorCount, r.DataBytes = nil, nil
			r.unreadable(notEveryByte(loc, ioErr))
		}
	}()
	if o.Format == source.Directory {
		return r.unreadable(fmt.Errorf("%s: is a directory", loc))
	}
	size := o.Size
	r.FileSize = &size
	var rd *safetensors.Reader
	switch o.Format {
	case source.Index, source.Compressed:
		m, err := o.Model(ctx, c.source...)
		if err != nil {
			return r.setError(err)
		}
		o = nil // the model owns it
		defer m.Close()
		if err := verifyContainer(ctx, m); err != nil {
			return r.setError(err)
		}
		if m.File != nil {
			rd = m.File
			break
		}
		r.Status, r.Valid = OK, true
		var data int64
		for _, n := range m.Names() {
			info, _ := m.Info(n)
			data += info.Size()
		}
		r.TensorCount, r.DataBytes = ptr(len(m.Names())), ptr(data)
		r.Warnings = append(r.Warnings, m.Sharded.Warnings()...)
		if c.full {
			warns, err := c.readAllData(m, loc, data)
			if err != nil {
				return r.setError(err)
			}
			r.Warnings = append(r.Warnings, warns...)
		}
		return r
	default:
		var err error
		rd, err = safetensors.NewReader(o, o.Size, safetensors.WithName(loc))
		if err != nil {
			r.setError(err)
			if r.Hint == nil {
				if h := o.Explain(err); h != "" {
					r.Hint = ptr(h)
				}
			}
			return r
		}
	}
	if o != nil {
		// valid safetensors, and also what torch.load reads as a checkpoint
		// or a pickle (from byte 0: a header length can begin one): two
		// readers would see two different files
		what := o.Format
		if !what.Checkpoint() {
			reaches, err := torch.Reaches(o, o.Size)
			if err != nil {
				return r.setError(&source.IOError{Location: loc, Op: "read", Err: err})
			}
			if reaches {
				what = source.TorchPickle
			}
		}
		if what.Checkpoint() {
			return r.setError(fmt.Errorf("%s: a polyglot: a valid safetensors file that is also a PyTorch checkpoint (%s) torch.load would read; run safetensors scan on it", loc, what))
		}
	}
	r.Status, r.Valid = OK, true
	r.TensorCount = ptr(len(rd.Tensors))
	r.DataBytes = ptr(rd.DataSize())
	r.Warnings = append(r.Warnings, rd.Warnings...)
	if c.full {
		warns, err := c.readAllData(rd, loc, rd.DataSize())
		if err != nil {
			return r.setError(err)
		}
		r.Warnings = append(r.Warnings, warns...)
	}
	return r
}

// verifyContainer checks a compressed file's whole container
// (compressed.ReaderAt.Verify: the frames against the seek table, then
// every frame decompressed against its size and checksum), for a verdict
// must not contradict what a read of the data will say, and only
// decompression tells a swapped, duplicated or corrupted frame whose sizes
// fit. It costs about what `zstd -t` does (docs/compressed.md).
func verifyContainer(ctx context.Context, m *source.Model) error {
	if m.Compressed == nil {
		return nil
	}
	return m.Compressed.Verify(ctx)
}

// setError records an error: unreadable for I/O failures, invalid (with the
// reference's variant, the tensor, the offset and a hint) for the rest.
func (r *ValidateReport) setError(err error) *ValidateReport {
	r.Valid = false
	r.TensorCount, r.DataBytes = nil, nil
	if unjudged(err) {
		return r.unreadable(err)
	}
	r.Status, r.Err = StatusInvalid, redact.Error(err, r.loc)
	r.Error = ptr(r.Err.Error())
	var fe *safetensors.FormatError
	if errors.As(err, &fe) {
		if v := fe.Variant(); v != "" {
			r.Variant = ptr(v)
		}
		if fe.Tensor != "" {
			r.Tensor = ptr(fe.Tensor)
		}
		if fe.Offset >= 0 {
			r.Offset = ptr(fe.Offset)
		}
	}
	var ce *compressed.Error
	if r.Offset == nil && errors.As(err, &ce) && ce.Offset >= 0 {
		r.Offset = ptr(ce.Offset) // in the compressed file
	}
	if h := source.Hint(err); h != "" {
		r.Hint = ptr(h)
		var ce *source.ContentError
		if errors.As(err, &ce) {
			r.Error = ptr(redact.Message(ce.Detail(), r.loc))
		}
	}
	return r
}

// recoverValidate is recoverScan for validation: a panic is reported
// unreadable (not checked), with an error wrapping safetensors.ErrInternal.
func recoverValidate(r **ValidateReport, loc string) {
	if p := recover(); p != nil {
		*r = newValidateReport(loc).unreadable(bug.Recovered("validating "+redact.Location(loc), p))
	}
}

// unreadable records an error that kept the file from being checked.
func (r *ValidateReport) unreadable(err error) *ValidateReport {
	r.Status, r.Valid, r.Err = Unreadable, false, redact.Error(err, r.loc)
	msg := r.Err.Error()
	var pe *fs.PathError
	if errors.As(err, &pe) && pe.Path == r.loc {
		msg = redact.Message(r.File+": "+pe.Err.Error(), r.loc)
	}
	r.Error = ptr(msg)
	if r.Warnings == nil {
		r.Warnings = []string{}
	}
	return r
}

// readAllData reads every tensor's bytes, returning warnings about NaN and
// infinite values, or the first read error.
func (c *config) readAllData(src safetensors.Source, file string, total int64) ([]string, error) {
	const chunk = 4 << 20
	buf := make([]byte, chunk)
	update, finish := func(int64) {}, func() {}
	if c.progress != nil {
		update, finish = c.progress(file, total)
	}
	defer finish()
	var warns []string
	var done int64
	for t, err := range src.All() {
		if err != nil {
			return nil, err
		}
		var nan, inf int64
		size := t.Size()
		for off := int64(0); off < size; {
			n := min(int64(chunk), size-off)
			var m int
			// a mapped file truncated underneath faults: a failure to read
			err := fault.Catch(func() (err error) { m, err = t.ReadAt(buf[:n], off); return err })
			if int64(m) < n {
				if err == nil || err == io.EOF { // not errors.Is: a network error may wrap io.EOF
					err = io.ErrUnexpectedEOF
				}
				return nil, fmt.Errorf("%s: tensor %q: reading %d bytes at byte %d of its data: %w", file, t.Name, n, off, err)
			}
			if hasFloatBits(t.DType) {
				b := buf[:n]
				if s := t.DType.Size(); s > 0 {
					b = b[:len(b)/s*s]
				}
				if nf, err := stats.CountNonFinite(t.DType, b); err == nil {
					nan += nf.NaN
					inf += nf.Inf()
				}
			}
			off += n
			done += n
			update(done)
		}
		if nan > 0 || inf > 0 {
			warns = append(warns, fmt.Sprintf("tensor %s: %s NaN and %s infinite of %s values",
				display(t.Name), units.Digits(nan), units.Digits(inf), units.Digits(t.NumElements())))
		}
	}
	return warns, nil
}

// hasFloatBits reports whether values of dtype d can be NaN or infinite:
// floats of 8 bits and more, and complex values (F4 and F6 encode neither).
func hasFloatBits(d safetensors.DType) bool { return d.IsFloat() && d.Bits() >= 8 || d.IsComplex() }

func ptr[T any](v T) *T { return &v }
