package blobstore

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"sync"

	"github.com/gosafetensors/safetensors/remote"
	"github.com/gosafetensors/safetensors/remote/blobstore/internal/driver"
)

// A Pool keeps one open bucket client per bucket URL — one set of
// credentials loaded once, one connection pool bounded by [WithMaxConns]
// and reused — for every object opened and every listing made through it.
// An audit of a prefix lists it with [Pool.Objects] and opens each object
// with [Pool.Open] (or [Open] and [WithPool], as package source does).
// Close closes every client. A Pool is safe for concurrent use.
type Pool struct {
	cfg     config
	mu      sync.Mutex
	closed  bool
	buckets map[string]*poolBucket
}

type poolBucket struct {
	ready chan struct{} // closed when the bucket is open or failed
	sh    *shared
	err   error
}

// NewPool returns an empty pool whose objects and listings use opts.
func NewPool(opts ...Option) (*Pool, error) {
	cfg, err := buildConfig(opts)
	if err != nil {
		return nil, err
	}
	if cfg.pool != nil {
		return nil, fmt.Errorf("blobstore: %w: WithPool given to NewPool", ErrOption)
	}
	return &Pool{cfg: cfg, buckets: map[string]*poolBucket{}}, nil
}

// errPoolClosed is returned by a closed pool.
var errPoolClosed = fmt.Errorf("blobstore: pool closed: %w", remote.ErrClosed)

// bucket returns the open bucket of bucketURL, opening it on first use
// (concurrent first uses wait for one open). A failed open is not kept, so
// a later call tries again.
func (p *Pool) bucket(ctx context.Context, bucketURL string) (*shared, error) {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil, errPoolClosed
	}
	pb, ok := p.buckets[bucketURL]
	if !ok {
		pb = &poolBucket{ready: make(chan struct{})}
		p.buckets[bucketURL] = pb
		p.mu.Unlock()
		b, err := openDriver(ctx, bucketURL, p.cfg)
		if err != nil {
			pb.err = err
			p.mu.Lock()
			delete(p.buckets, bucketURL)
			p.mu.Unlock()
		} else {
			// Reads in flight are bounded per object (WithConcurrency), not
			// per bucket: many objects of one bucket are audited at once,
			// and the client's connection bound keeps the store's load.
			pb.sh = &shared{bucket: b, bucketURL: bucketURL, cfg: p.cfg}
		}
		close(pb.ready)
		return pb.sh, pb.err
	}
	p.mu.Unlock()
	select {
	case <-pb.ready:
		return pb.sh, pb.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Open opens the object at rawURL with the pool's client for its bucket.
// Closing the object leaves the client open for the pool's other objects.
func (p *Pool) Open(ctx context.Context, rawURL string) (*Object, error) {
	return p.OpenVersion(ctx, rawURL, "")
}

// OpenVersion is Open of one version of the object, spelt as
// [Object.ETag] returns it (an S3 or Azure ETag with its quotes,
// "generation N" on GCS): the first read already sends it as a
// precondition and its answer must carry it, so an object changed since
// that version fails with an error wrapping remote.ErrObjectChanged and no
// byte of another version is read. An empty version is Open. Stores
// without versions (file://) cannot pin one: there OpenVersion of a
// non-empty version fails.
func (p *Pool) OpenVersion(ctx context.Context, rawURL, version string) (*Object, error) {
	bucketURL, key, err := splitObjectURL(rawURL)
	if err != nil {
		return nil, err
	}
	sh, err := p.bucket(ctx, bucketURL)
	if err != nil {
		return nil, fmt.Errorf("%s: opening bucket: %w", redactString(rawURL), err)
	}
	// Each object gets its own bound on reads in flight, sharing the client.
	o := &shared{bucket: sh.bucket, bucketURL: bucketURL, sem: make(chan struct{}, p.cfg.concurrency), cfg: p.cfg}
	return o.open(ctx, key, version)
}

// Write stores data as the object at rawURL with the pool's client for its
// bucket, whole: a reader sees the object as it was or as data, never
// part of it, and when Write returns nil the store has the object durably
// (S3 and GCS acknowledge a write once stored; file:// writes a
// temporary file beside it, syncs it, renames it over the object and
// syncs the directory; the directory, which is the bucket, must exist). A
// driver that cannot write fails with [ErrReadOnly].
func (p *Pool) Write(ctx context.Context, rawURL string, data []byte) error {
	bucketURL, key, err := splitObjectURL(rawURL)
	if err != nil {
		return err
	}
	sh, err := p.bucket(ctx, bucketURL)
	if err != nil {
		return fmt.Errorf("%s: opening bucket: %w", redactString(rawURL), err)
	}
	w, ok := sh.bucket.(driver.Writer)
	if !ok {
		return fmt.Errorf("%s: %w", redactString(rawURL), ErrReadOnly)
	}
	if err := w.WriteObject(ctx, key, data); err != nil {
		return &remote.Error{Name: redactString(rawURL), Op: "write", Off: -1, Len: int64(len(data)), Err: sanitize(err)}
	}
	return nil
}

// Objects streams a listing with the pool's client, as [Objects] does.
func (p *Pool) Objects(ctx context.Context, prefixURL string) iter.Seq2[ObjectInfo, error] {
	return p.objects(ctx, prefixURL, p.cfg.maxObjects)
}

func (p *Pool) objects(ctx context.Context, prefixURL string, limit int) iter.Seq2[ObjectInfo, error] {
	return func(yield func(ObjectInfo, error) bool) {
		bucketURL, prefix, err := SplitURL(prefixURL)
		if err != nil {
			yield(ObjectInfo{}, err)
			return
		}
		sh, err := p.bucket(ctx, bucketURL)
		if err != nil {
			yield(ObjectInfo{}, fmt.Errorf("%s: opening bucket: %w", redactString(prefixURL), err))
			return
		}
		listBucket(ctx, sh.bucket, bucketURL, prefix, limit, redactString(prefixURL), yield)
	}
}

// Close closes every bucket client of the pool; later opens fail, and
// reads of objects still open fail with the client's error.
func (p *Pool) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	buckets := p.buckets
	p.buckets = nil
	p.mu.Unlock()
	var errs []error
	for _, pb := range buckets {
		<-pb.ready
		if pb.sh != nil {
			errs = append(errs, pb.sh.bucket.Close())
		}
	}
	return errors.Join(errs...)
}
