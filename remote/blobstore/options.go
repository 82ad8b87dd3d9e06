package blobstore

import (
	"errors"
	"fmt"

	"github.com/gosafetensors/safetensors/remote"
)

// Defaults of the options.
const (
	DefaultPrefetch    = 100_000 + 8
	DefaultConcurrency = 8
	DefaultMaxObjects  = 100_000
	DefaultMaxConns    = 64
	maxPrefetch        = 64 << 20
)

// An Option configures [Open], [List], [Objects] and [NewPool]; invalid
// values are rejected with an error. A pool's objects and listings take
// the pool's options.
type Option func(*config) error

type config struct {
	prefetch    int64
	concurrency int
	coalesceGap int64
	maxObjects  int // 0: no limit
	maxConns    int
	pool        *Pool
}

// ErrOption reports an invalid option value (a nil Option included). It is
// safetensors.ErrOption, the sentinel every package of the module wraps.
var ErrOption = remote.ErrOption

func buildConfig(opts []Option) (config, error) {
	c := config{prefetch: DefaultPrefetch, concurrency: DefaultConcurrency, coalesceGap: 64 << 10, maxConns: DefaultMaxConns}
	var errs []error
	for _, o := range opts {
		if o == nil {
			errs = append(errs, fmt.Errorf("blobstore: %w: nil Option", ErrOption))
			continue
		}
		if err := o(&c); err != nil {
			errs = append(errs, fmt.Errorf("%w (%w)", err, ErrOption))
		}
	}
	return c, errors.Join(errs...)
}

// WithPrefetch sets the length of the first read, which is kept in memory
// so that a safetensors header under it costs no further request (default
// [DefaultPrefetch]; 1 byte to 64 MiB).
func WithPrefetch(n int64) Option {
	return func(c *config) error {
		if n < 1 || n > maxPrefetch {
			return fmt.Errorf("blobstore: prefetch %d out of range [1, %d]", n, maxPrefetch)
		}
		c.prefetch = n
		return nil
	}
}

// WithConcurrency bounds the range reads in flight for one object and its
// siblings (default [DefaultConcurrency]).
func WithConcurrency(n int) Option {
	return func(c *config) error {
		if n < 1 || n > 1024 {
			return fmt.Errorf("blobstore: concurrency %d out of range [1, 1024]", n)
		}
		c.concurrency = n
		return nil
	}
}

// WithCoalesceGap makes ReadRuns read two runs with one range read when at
// most gap bytes separate them (default 64 KiB: object stores charge per
// request and do not support multi-range reads).
func WithCoalesceGap(gap int64) Option {
	return func(c *config) error {
		if gap < 0 || gap > 64<<20 {
			return fmt.Errorf("blobstore: coalesce gap %d out of range [0, 64 MiB]", gap)
		}
		c.coalesceGap = gap
		return nil
	}
}

// WithMaxObjects bounds how many objects a listing yields before failing
// (default: [DefaultMaxObjects] for [List], which holds them all in memory;
// no bound for [Objects], which streams them).
func WithMaxObjects(n int) Option {
	return func(c *config) error {
		if n < 1 {
			return fmt.Errorf("blobstore: max objects %d must be positive", n)
		}
		c.maxObjects = n
		return nil
	}
}

// WithMaxConns bounds the connections one bucket client holds open to its
// store (default [DefaultMaxConns]); they are reused across objects and
// closed with the bucket.
func WithMaxConns(n int) Option {
	return func(c *config) error {
		if n < 1 || n > 4096 {
			return fmt.Errorf("blobstore: max connections %d out of range [1, 4096]", n)
		}
		c.maxConns = n
		return nil
	}
}

// WithPool makes [Open], [List] and [Objects] use p's bucket clients (and
// p's options) instead of opening a client of their own; this is how code
// that opens objects by URL, such as package source, shares one client per
// bucket.
func WithPool(p *Pool) Option {
	return func(c *config) error {
		if p == nil {
			return errors.New("blobstore: WithPool(nil)")
		}
		c.pool = p
		return nil
	}
}
