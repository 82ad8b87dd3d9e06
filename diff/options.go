package diff

import (
	"fmt"
	"math"
	"runtime"

	"github.com/gosafetensors/safetensors"
)

// ErrOption is wrapped by errors about an invalid option value (a nil
// Option included). It is safetensors.ErrOption, the sentinel every package
// of the module wraps.
var ErrOption = safetensors.ErrOption

// Option configures [Compare].
type Option func(*options) error

type options struct {
	epsilon   float64
	namesOnly bool
	workers   int
	chunk     int64
	progress  func(done, total int64)
}

// WithEpsilon sets the largest absolute difference two elements may have
// and still count as equal (default 0: any difference counts). It must be
// a finite number >= 0.
func WithEpsilon(eps float64) Option {
	return func(o *options) error {
		if !(eps >= 0) || math.IsInf(eps, 0) {
			return fmt.Errorf("diff: %w: epsilon %v (a finite number >= 0)", ErrOption, eps)
		}
		o.epsilon = eps
		return nil
	}
}

// WithNamesOnly compares names, dtypes, shapes and metadata only: no tensor
// data is read.
func WithNamesOnly() Option {
	return func(o *options) error { o.namesOnly = true; return nil }
}

// WithWorkers sets how many chunks are compared at once (default
// GOMAXPROCS); n must be at least 1.
func WithWorkers(n int) Option {
	return func(o *options) error {
		if n < 1 {
			return fmt.Errorf("diff: %w: %d workers (at least 1)", ErrOption, n)
		}
		o.workers = n
		return nil
	}
}

// WithChunkSize sets roughly how many bytes of each side a worker reads at
// a time (default 4 MiB), between 64 KiB and 1 GiB: memory is about
// 2 x workers x chunk.
func WithChunkSize(n int64) Option {
	return func(o *options) error {
		if n < 64<<10 || n > 1<<30 {
			return fmt.Errorf("diff: %w: chunk size %d (64 KiB to 1 GiB)", ErrOption, n)
		}
		o.chunk = n
		return nil
	}
}

// WithProgress calls f with the bytes (of both sides) compared so far and
// the total, from one goroutine at a time.
func WithProgress(f func(done, total int64)) Option {
	return func(o *options) error {
		if f == nil {
			return fmt.Errorf("diff: %w: nil progress function", ErrOption)
		}
		o.progress = f
		return nil
	}
}

func buildOptions(opts []Option) (options, error) {
	o := options{workers: runtime.GOMAXPROCS(0), chunk: 4 << 20}
	for _, opt := range opts {
		if opt == nil {
			return o, fmt.Errorf("diff: %w: nil Option", ErrOption)
		}
		if err := opt(&o); err != nil {
			return o, err
		}
	}
	return o, nil
}
