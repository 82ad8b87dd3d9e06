package torch

import (
	"fmt"
	"strings"

	"github.com/gosafetensors/safetensors"
	"github.com/gosafetensors/safetensors/torch/pickle"
)

// ErrOption is wrapped by the error [Open], [NewReader], [Scan] and
// [ScanFile] return for an invalid option value (a nil [Option], a limit
// below 1); nothing is read then. It is not an [*Error]: the input was
// never looked at.
// It is safetensors.ErrOption, the sentinel every package of the module
// wraps.
var ErrOption = safetensors.ErrOption

// Option configures [Open], [NewReader], [Scan] and [ScanFile]. An invalid
// value makes the call fail with an error wrapping [ErrOption], never
// silently ignored or replaced by a default.
type Option func(*options) error

type options struct {
	limits Limits
	allow  map[string]bool
	expand int64
}

// WithLimits replaces the resource caps ([DefaultLimits] by default). Every
// field must be at least 1: start from DefaultLimits() and change the
// fields you mean to change.
//
//	lim := torch.DefaultLimits()
//	lim.MaxPickleBytes = 4 << 30
//	c, err := torch.Open(path, torch.WithLimits(lim))
func WithLimits(l Limits) Option {
	return func(o *options) error {
		if err := l.validate(); err != nil {
			return err
		}
		o.limits = l
		return nil
	}
}

func buildOptions(opts []Option) (options, error) {
	o := options{limits: DefaultLimits()}
	for _, f := range opts {
		if f == nil {
			return o, fmt.Errorf("%w: nil Option", ErrOption)
		}
		if err := f(&o); err != nil {
			return o, err
		}
	}
	o.limits.userAllow = o.allow
	o.limits.expandViews = o.expand
	return o, nil
}

// WithExpandedViews lets the checkpoint's views read at most maxBytes in
// all beyond the bytes their storages hold, or with
// [ExpandedViewsProportional] 64 times the checkpoint's size or 64 MiB,
// whichever is more, instead of the checkpoint's own size: its expanded
// views ([Tensor.Expanded]: a contiguous form larger than the storage, as
// torch's expand makes) and its views of a storage whose distinct views
// together exceed it (many overlapping slices), counted as
// [Tensor.CheckView] says. Beyond that, reading one (Tensor.WriteTo, View,
// and so every command that reads tensor bytes) is an
// [*ExpandedViewError] or an [*OverlappingViewError]: a few bytes of
// storage can stand for terabytes of output, which torch itself never
// materialises. Inspecting (names, shapes, sizes) needs no option.
// maxBytes must be at least 1 or ExpandedViewsProportional.
func WithExpandedViews(maxBytes int64) Option {
	return func(o *options) error {
		if maxBytes < 1 && maxBytes != ExpandedViewsProportional {
			return fmt.Errorf("%w: WithExpandedViews(%d): want at least 1 byte, or ExpandedViewsProportional (-1)", ErrOption, maxBytes)
		}
		o.expand = maxBytes
		return nil
	}
}

// WithAllow allows globals beyond the allowlist, each named module.name as
// scan reports it (argparse.Namespace for Lightning and fairseq
// hyper-parameters; numpy.core.multiarray.scalar, numpy.dtype,
// numpy.core.multiarray._reconstruct and numpy.ndarray for numpy values).
// Nothing is ever imported or called: what pickle would build from an
// allowed global (a call, NEWOBJ, a BUILD of its instance) becomes an inert
// value, which conversion skips like any other non-tensor. The verdict of
// a file that uses them can then be clean; ScanReport.UserAllowed says which
// were used, so a clean report without the option keeps its meaning. An
// allowed object that holds a tensor is unsupported (the tensor would be
// lost), and so is one whose arguments or BUILD state set a dunder name
// (__setstate__, __reduce_ex__, __dict__...: dangerous, as pickle or
// Python would call or use it). WithAllow takes classes: a name that is
// not a class by Python's convention (CapWords; functions and modules are
// what load or run code: torch.load, pydoc.locate, posixpath.os), except a
// few vetted inert functions and lower-case classes (numpy's scalar and
// _reconstruct, numpy.dtype, builtins.int, collections.defaultdict...); a
// name in a module that imports, runs or loads code or opens files (os,
// subprocess, pickle, copyreg, yaml, dill, torch.serialization,
// torch.storage, torch.fx, logging...), before or after Python 3's
// renaming of protocol 0-2 names (commands.Popen is subprocess.Popen);
// inert torch constructs that have no safetensors form; and anything that
// is not module.name are an error wrapping [ErrOption] that names the
// global and why. docs/security/scan.md lists the rules. Several WithAllow
// options add up.
func WithAllow(globals ...string) Option {
	return func(o *options) error {
		for _, g := range globals {
			if err := checkAllow(g); err != nil {
				return err
			}
			if o.allow == nil {
				o.allow = make(map[string]bool)
			}
			o.allow[g] = true
		}
		return nil
	}
}

func checkAllow(g string) error {
	i := strings.LastIndexByte(g, '.')
	if i <= 0 || i == len(g)-1 || !pickle.Importable(g[:i]) || !pickle.Importable(g[i+1:]) {
		return fmt.Errorf("%w: WithAllow(%q): want module.name (dotted Python identifiers)", ErrOption, g)
	}
	if len(g) > maxKnownGlobal {
		return fmt.Errorf("%w: WithAllow(%q): longer than %d bytes", ErrOption, g, maxKnownGlobal)
	}
	if allowlist[g] != nil {
		return nil // allowed already
	}
	if why, ok := unsupportedGlobals[g]; ok {
		return fmt.Errorf("%w: WithAllow(%q): %s (allowing it would drop that data silently)", ErrOption, g, why)
	}
	module, name := g[:i], g[i+1:]
	if why := allowRefusal(module, name); why != "" {
		return fmt.Errorf("%w: WithAllow(%q): %s; it can never be allowed", ErrOption, g, why)
	}
	if m, n, ok := compatName(module, name); ok {
		if why := allowRefusal(m, n); why != "" {
			return fmt.Errorf("%w: WithAllow(%q): a protocol 0-2 pickle naming it makes Python 3 import %s.%s, and %s; it can never be allowed", ErrOption, g, m, n, why)
		}
	}
	return nil
}
