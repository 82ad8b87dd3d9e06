package convert

import (
	"fmt"
	"math"
	"slices"

	"github.com/gosafetensors/safetensors"
	"github.com/gosafetensors/safetensors/torch"
)

// ErrOption is wrapped by the error a function of this package returns for
// an invalid option value (a nil [Option], an empty key, an empty or
// repeated name, a nil progress function, a cap below 1 other than -1,
// digests without verification); nothing is read or written then.
// It is safetensors.ErrOption, the sentinel every package of the module
// wraps.
var ErrOption = safetensors.ErrOption

// NoOutputCap, given to [WithMaxOutputBytes], lifts the cap on the tensor
// data written.
const NoOutputCap = -1

// Options come in two kinds, so that none is ever silently ignored: a
// [PlanOption] says what a conversion writes (which entry, which aliases,
// how much at most, how the checkpoint is read), a [WriteOption] how the
// output is written (verified, overwriting, with progress). Functions that
// plan take PlanOptions ([NewPlan], [PlanFile], [NewSource]), [Plan.Write]
// takes WriteOptions, and the functions that do both ([File],
// [FromReaderAt], [Dir]) take either as an [Option]. Without options a
// conversion unwraps the state dict it finds, drops aliases of identical
// views by convert.py's rule, caps the output at 64 times the stored bytes
// (or 1 GiB), refuses to overwrite and verifies the output.
type Option interface {
	apply(*planOptions, *writeOptions) error
}

// PlanOption configures what a conversion writes; see [Option].
type PlanOption func(*planOptions) error

// WriteOption configures how a conversion's output is written; see
// [Option].
type WriteOption func(*writeOptions) error

func (o PlanOption) apply(p *planOptions, _ *writeOptions) error {
	if o == nil {
		return fmt.Errorf("%w: nil PlanOption", ErrOption)
	}
	return o(p)
}

func (o WriteOption) apply(_ *planOptions, w *writeOptions) error {
	if o == nil {
		return fmt.Errorf("%w: nil WriteOption", ErrOption)
	}
	return o(w)
}

type planOptions struct {
	key             string
	prefer, discard []string
	keepAliases     bool
	maxOutput       int64 // 0: the default cap; NoOutputCap: none
	torch           []torch.Option
}

type writeOptions struct {
	verify         bool
	verifyFromCopy bool
	digests        bool
	overwrite      bool
	progress       func(written, total int64)
}

// buildOptions applies options of both kinds and checks them together.
func buildOptions(opts []Option) (planOptions, writeOptions, error) {
	p, w := planOptions{}, writeOptions{verify: true}
	for _, o := range opts {
		if o == nil {
			return p, w, fmt.Errorf("%w: nil Option", ErrOption)
		}
		if err := o.apply(&p, &w); err != nil {
			return p, w, err
		}
	}
	if err := p.check(); err != nil {
		return p, w, err
	}
	return p, w, w.check()
}

func buildPlanOptions(opts []PlanOption) (planOptions, error) {
	var p planOptions
	for _, o := range opts {
		if err := o.apply(&p, nil); err != nil {
			return p, err
		}
	}
	return p, p.check()
}

func buildWriteOptions(opts []WriteOption) (writeOptions, error) {
	w := writeOptions{verify: true}
	for _, o := range opts {
		if err := o.apply(nil, &w); err != nil {
			return w, err
		}
	}
	return w, w.check()
}

func (p *planOptions) check() error {
	for _, n := range p.prefer {
		if slices.Contains(p.discard, n) {
			return fmt.Errorf("%w: %q is both preferred and discarded", ErrOption, n)
		}
	}
	return nil
}

func (w *writeOptions) check() error {
	if w.digests && !w.verify {
		return fmt.Errorf("%w: WithDigests needs verification: the digests are computed while the output is read back", ErrOption)
	}
	return nil
}

// WithKey unwraps this entry of the checkpoint (a dotted path such as
// "state_dict", "model" or "ema"); its prefix is stripped from the names,
// and a key that names no entry is an [ErrInput] error when planning.
// Without it, "state_dict" or "model_state_dict" is unwrapped, or "model"
// or "module" when the checkpoint looks like a training checkpoint (every
// weight under it, something else beside it), else the root is converted.
// Optimizer state is skipped unless the key lies inside it. The key must
// not be empty.
func WithKey(key string) PlanOption {
	return func(o *planOptions) error {
		if key == "" {
			return fmt.Errorf("%w: WithKey: empty key (leave the option out to unwrap the state dict automatically)", ErrOption)
		}
		o.key = key
		return nil
	}
}

// WithPrefer names tensors to keep among identical aliases, as convert.py's
// preferred_names: a preferred name wins, then any name not discarded (see
// [WithDiscard]), then the bytewise smallest. Names add up over several
// calls; an empty name, a name given twice, or a name also discarded is an
// error. Names that are not tensors of the checkpoint are not errors here
// (the CLI refuses them after planning).
func WithPrefer(names ...string) PlanOption {
	return func(o *planOptions) error {
		l, err := addNames("WithPrefer", o.prefer, names)
		o.prefer = l
		return err
	}
}

// WithDiscard names tensors not to keep among identical aliases, as
// convert.py's discard_names; see [WithPrefer].
func WithDiscard(names ...string) PlanOption {
	return func(o *planOptions) error {
		l, err := addNames("WithDiscard", o.discard, names)
		o.discard = l
		return err
	}
}

func addNames(opt string, list, names []string) ([]string, error) {
	for _, n := range names {
		switch {
		case n == "":
			return list, fmt.Errorf("%w: %s: empty name", ErrOption, opt)
		case slices.Contains(list, n):
			return list, fmt.Errorf("%w: %s: %q given twice", ErrOption, opt, n)
		}
		list = append(list, n)
	}
	return list, nil
}

// WithKeepAliases writes every name as its own copy instead of dropping
// aliases of identical views (default false).
func WithKeepAliases(yes bool) PlanOption {
	return func(o *planOptions) error { o.keepAliases = yes; return nil }
}

// WithVerify turns the read-back check off or on (on by default): before
// the output gets its name, it is re-read and every tensor compared byte
// for byte with a fresh read of its source view.
func WithVerify(yes bool) WriteOption {
	return func(o *writeOptions) error { o.verify = yes; return nil }
}

// WithVerifyFromCopy makes verification compare each output tensor, read
// back in full, with a hash of the bytes copied into it (maphash, under a
// seed of the conversion's) instead of a second read of its source view
// (default false): for a checkpoint that is expensive to read twice, a
// remote one above all, where the second read is a second download.
func WithVerifyFromCopy(yes bool) WriteOption {
	return func(o *writeOptions) error { o.verifyFromCopy = yes; return nil }
}

// WithDigests records each output tensor's SHA-256 in the report
// (TensorReport.SHA256), computed during verification, about 0.7 s of CPU
// per GiB; verification itself compares bytes and needs no digest.
// Digests with [WithVerify](false) are an error.
func WithDigests(yes bool) WriteOption {
	return func(o *writeOptions) error { o.digests = yes; return nil }
}

// WithOverwrite lets outputs replace existing files. Without it, an
// existing output is an [ErrExists] error and nothing is written.
func WithOverwrite(yes bool) WriteOption {
	return func(o *writeOptions) error { o.overwrite = yes; return nil }
}

// WithProgress calls fn as tensor data is written with the bytes written so
// far and the total (over all files for [Dir]), possibly from another
// goroutine but never concurrently. fn must not be nil.
func WithProgress(fn func(written, total int64)) WriteOption {
	return func(o *writeOptions) error {
		if fn == nil {
			return fmt.Errorf("%w: WithProgress: nil function", ErrOption)
		}
		o.progress = fn
		return nil
	}
}

// WithMaxOutputBytes caps the tensor data written: a plan for more is an
// [*OutputCapError]. Views with zero strides (expand) let a few bytes of
// storage stand for terabytes of output, so by default the output may be
// at most 64 times the storage bytes the checkpoint holds, or 1 GiB,
// whichever is more. n must be at least 1, or [NoOutputCap] (-1) for no
// cap.
func WithMaxOutputBytes(n int64) PlanOption {
	return func(o *planOptions) error {
		if n < 1 && n != NoOutputCap {
			return fmt.Errorf("%w: WithMaxOutputBytes(%d): want at least 1 byte, or NoOutputCap (-1)", ErrOption, n)
		}
		o.maxOutput = n
		return nil
	}
}

// WithReaderOptions passes options to torch.NewReader for the checkpoints
// [File], [FromReaderAt], [PlanFile] and [Dir] open (for example
// torch.WithLimits); an invalid one is an error wrapping torch.ErrOption.
// The functions that take a checkpoint already open ([NewPlan],
// [PlanCheckpoint], [NewSource]) refuse them (ErrOption): they read
// nothing.
func WithReaderOptions(opts ...torch.Option) PlanOption {
	return func(o *planOptions) error {
		for _, t := range opts {
			if t == nil {
				return fmt.Errorf("%w: WithReaderOptions: nil torch.Option", ErrOption)
			}
		}
		o.torch = append(o.torch, opts...)
		return nil
	}
}

// WithAllow is WithReaderOptions(torch.WithAllow(globals...)): the
// checkpoints File, FromReaderAt, PlanFile and Dir open may use these
// globals beyond the
// allowlist (argparse.Namespace, numpy scalars and arrays...). Nothing is
// imported or called; what they build is skipped like any value that is
// not a tensor (Report.Skipped, kind "object"), and an allowed object
// holding a tensor is refused. See torch.WithAllow for the names refused.
func WithAllow(globals ...string) PlanOption {
	return WithReaderOptions(torch.WithAllow(globals...))
}

// outputCap returns the largest output the options allow for a checkpoint
// whose storages hold stored bytes.
func (o *planOptions) outputCap(stored int64) int64 {
	switch {
	case o.maxOutput == NoOutputCap:
		return math.MaxInt64
	case o.maxOutput > 0:
		return o.maxOutput
	case stored > math.MaxInt64/64:
		return math.MaxInt64
	}
	return max(64*stored, 1<<30)
}
