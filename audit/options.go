package audit

import (
	"errors"
	"fmt"
	"os"
	"slices"

	"github.com/gosafetensors/safetensors"
	"github.com/gosafetensors/safetensors/remote/blobstore"
	"github.com/gosafetensors/safetensors/source"
	"github.com/gosafetensors/safetensors/torch"
)

// ErrOption is wrapped by the error an invalid option causes (a nil
// Option, a concurrency below 1). It is safetensors.ErrOption, the
// sentinel every package of the module wraps.
var ErrOption = safetensors.ErrOption

// DefaultConcurrency is how many files Scan and Validate check at a time
// by default.
const DefaultConcurrency = 4

// Option configures Scan, Validate, Targets and the functions that check
// one target. An invalid value makes the call report an error wrapping
// [ErrOption]; nothing is read then.
type Option func(*config) error

type config struct {
	source      []source.Option
	torch       []torch.Option
	concurrency int
	root        *os.Root
	full        bool
	progress    func(loc string, total int64) (update func(done int64), finish func())
	readCounter func(n int)
	pool        *blobstore.Pool
}

func buildConfig(opts []Option) (*config, error) {
	c := &config{concurrency: DefaultConcurrency}
	for _, o := range opts {
		if o == nil {
			return nil, fmt.Errorf("audit: %w: nil Option", ErrOption)
		}
		if err := o(c); err != nil {
			return nil, fmt.Errorf("audit: %w: %w", ErrOption, err)
		}
	}
	return c, nil
}

// WithSource passes options to the opener (source.Open): HTTP and Hub
// clients, tokens, bucket options.
func WithSource(opts ...source.Option) Option {
	return func(c *config) error { c.source = append(c.source, opts...); return nil }
}

// WithTorch passes options to the checkpoint scanner (torch.Scan), such
// as torch.WithLimits: the work and memory one file may cost.
func WithTorch(opts ...torch.Option) Option {
	return func(c *config) error { c.torch = append(c.torch, opts...); return nil }
}

// WithConcurrency sets how many files are checked at a time (default
// [DefaultConcurrency]); reports still come out in target order.
func WithConcurrency(n int) Option {
	return func(c *config) error {
		if n < 1 {
			return fmt.Errorf("concurrency %d: want at least 1", n)
		}
		c.concurrency = n
		return nil
	}
}

// WithRoot resolves local paths inside root and nowhere else: a path is
// relative to it, and neither ".." nor a symbolic link leads out of it
// (os.Root). Directories are walked and files opened through root; files
// are read, never mapped.
func WithRoot(root *os.Root) Option {
	return func(c *config) error {
		if root == nil {
			return errors.New("WithRoot(nil)")
		}
		c.root = root
		return nil
	}
}

// WithFull makes Validate read every tensor's bytes too, proving the file
// readable end to end and counting NaN and infinite values.
func WithFull(full bool) Option {
	return func(c *config) error { c.full = full; return nil }
}

// WithProgress reports the progress of Validate's full reads: start is
// called with a file's location and data size, and returns functions to
// call with the bytes read so far and at the end.
func WithProgress(start func(loc string, total int64) (update func(done int64), finish func())) Option {
	return func(c *config) error { c.progress = start; return nil }
}

// WithReadCounter calls count with the number of bytes of every read from
// a local file opened through [WithRoot] (a service's disk traffic).
func WithReadCounter(count func(n int)) Option {
	return func(c *config) error { c.readCounter = count; return nil }
}

// WithPool lists bucket prefixes and opens bucket objects with the pool's
// one client per bucket (credentials loaded once, connections reused), for
// a program that audits many objects over time (a queue worker). Without
// it, Scan and Validate of a bucket prefix make a pool for the audit and
// close it at the end.
func WithPool(p *blobstore.Pool) Option {
	return func(c *config) error {
		if p == nil {
			return errors.New("WithPool(nil)")
		}
		c.usePool(p)
		return nil
	}
}

// usePool makes c read buckets through p.
func (c *config) usePool(p *blobstore.Pool) {
	c.pool = p
	c.source = append(slices.Clip(c.source), source.WithBlob(blobstore.WithPool(p)))
}

// withPrefixPool returns the config an audit of loc uses: for a bucket
// prefix without a pool of the caller's, one of its own, which done
// closes once every object is checked.
func (c *config) withPrefixPool(loc string) (cc *config, done func()) {
	if c.pool != nil || !IsBucketPrefix(loc) {
		return c, func() {}
	}
	p, err := blobstore.NewPool()
	if err != nil {
		return c, func() {} // listing reports the same error
	}
	cp := *c
	cp.usePool(p)
	return &cp, func() { p.Close() }
}
