package blobstore

import (
	"context"
	"fmt"
)

// Write stores data as the object at rawURL, whole, as [Pool.Write] does;
// without [WithPool] it opens a client for the one write and closes it.
func Write(ctx context.Context, rawURL string, data []byte, opts ...Option) error {
	cfg, err := buildConfig(opts)
	if err != nil {
		return err
	}
	if cfg.pool != nil {
		return cfg.pool.Write(ctx, rawURL, data)
	}
	p := &Pool{cfg: cfg, buckets: map[string]*poolBucket{}}
	defer p.Close()
	return p.Write(ctx, rawURL, data)
}

// writeError is the error of a driver's write: the key, never the query.
func writeError(key string, err error) error {
	return fmt.Errorf("writing %s: %w", key, err)
}
