package download

import (
	"errors"
	"fmt"

	"github.com/gosafetensors/safetensors"
	"github.com/gosafetensors/safetensors/remote"
	"github.com/gosafetensors/safetensors/remote/blobstore"
)

// Defaults of the options.
const (
	DefaultConcurrency = 16
	DefaultChunkSize   = 16 << 20
	// streamBufSize is each connection's buffer: the bytes of a range
	// between the socket and the file.
	streamBufSize = 1 << 20
)

// ErrOption reports an invalid option; it is safetensors.ErrOption.
var ErrOption = safetensors.ErrOption

// An Option configures [Download]. Invalid values are errors, not clamped.
type Option func(*config) error

type config struct {
	concurrency int
	chunk       int64
	chunkSet    bool // WithChunkSize given: every range is chunk (else sized to the link)
	include     []string
	exclude     []string
	localDir    string
	cacheDir    string
	files       []string
	hub         *remote.Hub
	remote      []remote.Option
	blob        []blobstore.Option
	progress    func(Progress)
	noHash      bool
	noSync      bool
	earlyDirect bool
	noDirect    bool
	streamBuf   int // benchmarks only: another stream buffer size (0: streamBufSize)
}

func buildConfig(opts []Option) (config, error) {
	c := config{concurrency: DefaultConcurrency, chunk: DefaultChunkSize}
	var errs []error
	for _, o := range opts {
		if o == nil {
			errs = append(errs, fmt.Errorf("download: %w: nil Option", ErrOption))
			continue
		}
		if err := o(&c); err != nil {
			errs = append(errs, fmt.Errorf("download: %w (%w)", err, ErrOption))
		}
	}
	return c, errors.Join(errs...)
}

// WithConcurrency sets how many ranges are read at once, over as many
// connections (default [DefaultConcurrency]; 1 to 1024). Files are read
// in parallel and ranges within a file too.
func WithConcurrency(n int) Option {
	return func(c *config) error {
		if n < 1 || n > 1024 {
			return fmt.Errorf("concurrency %d out of range [1, 1024]", n)
		}
		c.concurrency = n
		return nil
	}
}

// WithChunkSize sets the largest range one request reads (64 KiB to 1
// GiB). Without it, ranges are sized to the link: [DefaultChunkSize],
// grown up to 64 MiB where a request's latency (measured: sent to first
// byte) would be more than 3% of its time at the measured rate. Ranges
// are streamed to disk through a buffer of at most 1 MiB per connection,
// so memory does not grow with them (bucket objects, which cannot
// stream, are read by requests of up to 4 MiB into a buffer per
// connection). A killed download moves again less than a chunk (this
// one, else the default) per connection beyond the bytes it lacks.
func WithChunkSize(n int64) Option {
	return func(c *config) error {
		if n < 64<<10 || n > 1<<30 {
			return fmt.Errorf("chunk size %d out of range [64 KiB, 1 GiB]", n)
		}
		c.chunk, c.chunkSet = n, true
		return nil
	}
}

// WithInclude downloads only the files whose path matches one of the
// patterns, with huggingface_hub's rules (Python fnmatch: '*' matches
// '/' too; a pattern ending in '/' matches everything under it).
func WithInclude(patterns ...string) Option {
	return func(c *config) error {
		for _, p := range patterns {
			if err := checkPattern(p); err != nil {
				return err
			}
		}
		c.include = append(c.include, patterns...)
		return nil
	}
}

// WithExclude skips the files whose path matches one of the patterns
// (the rules of [WithInclude]); exclusion wins.
func WithExclude(patterns ...string) Option {
	return func(c *config) error {
		for _, p := range patterns {
			if err := checkPattern(p); err != nil {
				return err
			}
		}
		c.exclude = append(c.exclude, patterns...)
		return nil
	}
}

// WithLocalDir writes plain files under dir (each renamed into place once
// complete and checked) instead of into the Hugging Face cache. HTTP and
// bucket downloads require it.
func WithLocalDir(dir string) Option {
	return func(c *config) error {
		if dir == "" {
			return errors.New("empty local directory")
		}
		c.localDir = dir
		return nil
	}
}

// WithCacheDir sets the Hugging Face cache directory (default
// [hfcache.Dir]: HF_HUB_CACHE, HF_HOME/hub, ~/.cache/huggingface/hub).
func WithCacheDir(dir string) Option {
	return func(c *config) error {
		if dir == "" {
			return errors.New("empty cache directory")
		}
		c.cacheDir = dir
		return nil
	}
}

// WithFiles names the files of an HTTP directory (a URL ending in '/') to
// download, relative to it. Without it, the directory's model is found as
// transformers would: model.safetensors.index.json and its shards, else
// model.safetensors.
func WithFiles(names ...string) Option {
	return func(c *config) error {
		for _, n := range names {
			if err := remote.ValidRepoPath(n); err != nil {
				return err
			}
		}
		c.files = append(c.files, names...)
		return nil
	}
}

// WithHub reads hf:// locations through h. Without it, a Hub is made from
// the environment (HF_ENDPOINT, HF_TOKEN, HF_HUB_OFFLINE) with an HTTP
// client and concurrency bound fitted to the download.
func WithHub(h *remote.Hub) Option {
	return func(c *config) error {
		if h == nil {
			return errors.New("WithHub(nil)")
		}
		c.hub = h
		return nil
	}
}

// WithRemote passes options to the Hub and HTTP readers (a token, an
// endpoint, retries, timeouts), after the download's own.
func WithRemote(opts ...remote.Option) Option {
	return func(c *config) error { c.remote = append(c.remote, opts...); return nil }
}

// WithBlob passes options to the bucket readers and listings.
func WithBlob(opts ...blobstore.Option) Option {
	return func(c *config) error { c.blob = append(c.blob, opts...); return nil }
}

// WithProgress calls fn as bytes land, from the downloading goroutines
// (concurrently: fn must be safe for that, and quick).
func WithProgress(fn func(Progress)) Option {
	return func(c *config) error { c.progress = fn; return nil }
}
