package stats

import (
	"fmt"
	"runtime"

	"github.com/gosafetensors/safetensors"
)

// ErrOption is wrapped by errors about an invalid option value.
var ErrOption = safetensors.ErrOption

// Option configures [Compute].
type Option func(*options) error

type options struct {
	workers  int
	chunk    int64
	progress func(done, total int64)
}

// WithWorkers sets how many tensors' chunks are summarised at once (default
// GOMAXPROCS); n must be at least 1.
func WithWorkers(n int) Option {
	return func(o *options) error {
		if n < 1 {
			return fmt.Errorf("stats: %w: %d workers (at least 1)", ErrOption, n)
		}
		o.workers = n
		return nil
	}
}

// WithChunkSize sets the bytes each worker reads at a time (default 4 MiB),
// between 64 KiB and 1 GiB: memory is about workers x chunk.
func WithChunkSize(n int64) Option {
	return func(o *options) error {
		if n < 64<<10 || n > 1<<30 {
			return fmt.Errorf("stats: %w: chunk size %d (64 KiB to 1 GiB)", ErrOption, n)
		}
		o.chunk = n
		return nil
	}
}

// WithProgress calls f with the bytes summarised so far and the total, from
// one goroutine at a time, after every chunk.
func WithProgress(f func(done, total int64)) Option {
	return func(o *options) error {
		if f == nil {
			return fmt.Errorf("stats: %w: nil progress function", ErrOption)
		}
		o.progress = f
		return nil
	}
}

func buildOptions(opts []Option) (options, error) {
	o := options{workers: runtime.GOMAXPROCS(0), chunk: 4 << 20}
	for _, opt := range opts {
		if opt == nil {
			return o, fmt.Errorf("stats: %w: nil Option", ErrOption)
		}
		if err := opt(&o); err != nil {
			return o, err
		}
	}
	return o, nil
}
