package sharded

import "fmt"

// WriteOption configures [Split] and [Merge].
type WriteOption func(*writeOptions) error

type writeOptions struct {
	maxShardSize int64
	overwrite    bool
	verify       bool
	progress     func(done, total int64)
}

func buildWriteOptions(opts []WriteOption) (writeOptions, error) {
	o := writeOptions{maxShardSize: DefaultMaxShardSize, verify: true}
	for _, opt := range opts {
		if opt == nil {
			return o, fmt.Errorf("%w: nil WriteOption", ErrOption)
		}
		if err := opt(&o); err != nil {
			return o, err
		}
	}
	return o, nil
}

// WithMaxShardSize sets the shard size limit for [Split], in tensor data
// bytes (the Hub counts the same way); default [DefaultMaxShardSize]. See
// [ParseSize] for "5GB"-style strings.
func WithMaxShardSize(n int64) WriteOption {
	return func(o *writeOptions) error {
		if n < 1 || n > maxSize {
			return fmt.Errorf("%w: max shard size %d, want 1 to 2^62 bytes", ErrOption, n)
		}
		o.maxShardSize = n
		return nil
	}
}

// WithOverwrite lets outputs replace existing files. Without it, an
// existing output is an [ErrExists] error and nothing is written.
func WithOverwrite(yes bool) WriteOption {
	return func(o *writeOptions) error { o.overwrite = yes; return nil }
}

// WithVerify turns the read-back check off or on (on by default): before
// a file gets its name, every tensor byte read back from it is compared
// with a fresh read of the source (each part as soon as it is written,
// while the rest is copied and synced), then its header bytes and size are
// checked and its header is parsed again. Outputs that are pipes or devices
// cannot be read back and are not checked.
func WithVerify(yes bool) WriteOption {
	return func(o *writeOptions) error { o.verify = yes; return nil }
}

// WithProgress calls fn with the tensor bytes copied so far and the total,
// from the goroutine that writes; nil means no progress reports.
func WithProgress(fn func(done, total int64)) WriteOption {
	return func(o *writeOptions) error { o.progress = fn; return nil }
}
