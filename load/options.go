package load

import (
	"errors"
	"fmt"
	"path"
	"strings"

	"github.com/gosafetensors/safetensors"
	"github.com/gosafetensors/safetensors/source"
)

// Defaults.
const (
	// DefaultConcurrency is how many reads are in flight: enough to fill
	// a link whose connections are each capped (object stores, CDNs) and a
	// disk's queue.
	DefaultConcurrency = 16
	// DefaultRemoteChunk is the largest read of a remote object: big enough
	// that a request's latency costs little of its transfer time (20 ms
	// before a 16 MiB answer at 40 MB/s is 5%; at 8 MiB, 9%).
	DefaultRemoteChunk = 16 << 20
	// DefaultLocalChunk is the read size for local files: 16 of them stay
	// in the CPU's cache when the bytes are discarded, and a cold disk
	// gets a deep queue.
	DefaultLocalChunk = 1 << 20
	// MaxChunk bounds WithChunkSize.
	MaxChunk = 1 << 30
)

// Option configures New and Open. Options reject invalid values with an
// error wrapping ErrOption instead of clamping them.
type Option func(*config) error

type config struct {
	concurrency int
	chunk       int64 // 0: by kind of source
	selects     []func(string) bool
	tp          *tp
	userRules   []Rule
	noDefaults  bool
	dest        func(Part) ([]byte, error)
	progress    func(Progress)
	sourceOpts  []source.Option
	buffered    bool
}

func buildConfig(opts []Option) (config, error) {
	c := config{concurrency: DefaultConcurrency}
	var errs []error
	for _, o := range opts {
		if o == nil {
			errs = append(errs, fmt.Errorf("load: %w: nil Option", ErrOption))
			continue
		}
		if err := o(&c); err != nil {
			errs = append(errs, err)
		}
	}
	if c.tp != nil {
		c.tp.rules = append([]Rule(nil), c.userRules...)
		if !c.noDefaults {
			c.tp.rules = append(c.tp.rules, DefaultRules...)
		}
	} else if len(c.userRules) > 0 || c.noDefaults {
		errs = append(errs, fmt.Errorf("load: %w: tensor-parallel rules without WithTensorParallel", ErrOption))
	}
	return c, errors.Join(errs...)
}

// WithConcurrency sets how many reads are in flight at once (1 to 1024;
// default [DefaultConcurrency]). For a location opened by [Open] it is
// also the HTTP reader's and the bucket reader's concurrency bound; a
// Source opened by the caller keeps its own bound (remote.WithConcurrency).
func WithConcurrency(n int) Option {
	return func(c *config) error {
		if n < 1 || n > 1024 {
			return fmt.Errorf("load: %w: concurrency %d out of range [1, 1024]", ErrOption, n)
		}
		c.concurrency = n
		return nil
	}
}

// WithChunkSize sets the largest read (4 KiB to [MaxChunk]). By default
// it is [DefaultRemoteChunk] for remote objects and [DefaultLocalChunk] for
// local files. Remote reads shrink to an eighth of it as the end nears, so
// that the last reads finish together.
func WithChunkSize(n int64) Option {
	return func(c *config) error {
		if n < 4<<10 || n > MaxChunk {
			return fmt.Errorf("load: %w: chunk size %d out of range [4 KiB, 1 GiB]", ErrOption, n)
		}
		c.chunk = n
		return nil
	}
}

// WithFilter loads only the tensors whose names match one of the
// patterns, as the CLI's --filter: a glob (path.Match) when the pattern
// has * ? or [, else a substring.
func WithFilter(patterns ...string) Option {
	return func(c *config) error {
		for _, p := range patterns {
			if _, err := path.Match(p, ""); err != nil {
				return fmt.Errorf("load: %w: filter %q: %v", ErrOption, p, err)
			}
		}
		if len(patterns) == 0 {
			return nil
		}
		ps := append([]string(nil), patterns...)
		c.selects = append(c.selects, func(name string) bool {
			for _, p := range ps {
				if MatchName(p, name) {
					return true
				}
			}
			return false
		})
		return nil
	}
}

// MatchName reports whether name matches a filter pattern: as a glob when
// the pattern has * ? or [, else as a substring.
func MatchName(pattern, name string) bool {
	if strings.ContainsAny(pattern, "*?[") {
		ok, _ := path.Match(pattern, name)
		return ok
	}
	return strings.Contains(name, pattern)
}

// WithSelect loads only the tensors for which keep returns true (together
// with WithFilter, a tensor must pass both).
func WithSelect(keep func(name string) bool) Option {
	return func(c *config) error {
		if keep == nil {
			return fmt.Errorf("load: %w: WithSelect(nil)", ErrOption)
		}
		c.selects = append(c.selects, keep)
		return nil
	}
}

// WithTensorParallel loads rank's part of every tensor for a world of
// world ranks (0 <= rank < world <= 65536): a tensor split by the rules
// (see [DefaultRules], [WithRules]) is read only in the range of its split
// dimension that the rank holds; the others whole.
func WithTensorParallel(rank, world int) Option {
	return func(c *config) error {
		if world < 1 || world > 1<<16 || rank < 0 || rank >= world {
			return fmt.Errorf("load: %w: rank %d of world %d: want 0 <= rank < world <= 65536", ErrOption, rank, world)
		}
		u := Refuse
		if c.tp != nil {
			u = c.tp.uneven
		}
		c.tp = &tp{rank: rank, world: world, uneven: u}
		return nil
	}
}

// WithRules adds tensor-parallel rules, tried in order before the
// defaults: the first whose pattern matches a tensor's name decides.
func WithRules(rules ...Rule) Option {
	return func(c *config) error {
		for _, r := range rules {
			if err := r.check(); err != nil {
				return err
			}
		}
		c.userRules = append(c.userRules, rules...)
		return nil
	}
}

// WithoutDefaultRules uses only the rules given with WithRules.
func WithoutDefaultRules() Option {
	return func(c *config) error { c.noDefaults = true; return nil }
}

// WithUneven says what to do with a split dimension the world size does
// not divide (default [Refuse]). Give it after WithTensorParallel or
// before, either works.
func WithUneven(u Uneven) Option {
	return func(c *config) error {
		if u != Refuse && u != Chunk {
			return fmt.Errorf("load: %w: uneven %d", ErrOption, u)
		}
		if c.tp == nil {
			c.tp = &tp{world: 1}
		}
		c.tp.uneven = u
		return nil
	}
}

// WithDestination reads each part into the buffer dest returns for it
// (pinned memory, a GPU staging area, an arena), which must be exactly
// p.Size bytes long. dest is called from one goroutine, in read order,
// when the part's first chunk is about to be read; the bytes are the
// caller's from then on (the loader keeps no reference after delivering
// the tensor). Without it, each part gets a new slice.
func WithDestination(dest func(p Part) ([]byte, error)) Option {
	return func(c *config) error {
		if dest == nil {
			return fmt.Errorf("load: %w: WithDestination(nil)", ErrOption)
		}
		c.dest = dest
		return nil
	}
}

// WithProgress calls f after every chunk read, one call at a time.
func WithProgress(f func(Progress)) Option {
	return func(c *config) error {
		if f == nil {
			return fmt.Errorf("load: %w: WithProgress(nil)", ErrOption)
		}
		c.progress = f
		return nil
	}
}

// WithBufferedIO reads local files only through the page cache (pread).
// By default, on Linux, a read of at least 64 KiB whose pages are not all
// cached (mincore) is made with O_DIRECT into an aligned buffer and
// copied: on a cold file that skips the page cache's bookkeeping, which a
// busy machine pays for in throughput; cached bytes are read from the
// cache either way.
func WithBufferedIO() Option {
	return func(c *config) error { c.buffered = true; return nil }
}

// WithSourceOptions passes options to source.OpenModel when [Open] opens
// the location (a token, a Hub, a subfolder, remote timeouts). They are
// applied after the loader's own (its HTTP client and concurrency bound),
// so they override them. [New], given a source already open, refuses
// them (ErrOption).
func WithSourceOptions(opts ...source.Option) Option {
	return func(c *config) error { c.sourceOpts = append(c.sourceOpts, opts...); return nil }
}

// ErrOption reports an invalid option value; it is safetensors.ErrOption.
var ErrOption = safetensors.ErrOption
