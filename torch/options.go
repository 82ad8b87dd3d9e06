package torch

import (
	"fmt"

	"github.com/gosafetensors/safetensors"
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
	return o, nil
}
