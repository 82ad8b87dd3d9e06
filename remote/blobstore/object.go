package blobstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"
	"sync/atomic"
	"time"

	"github.com/gosafetensors/safetensors/internal/rangeread"
	"github.com/gosafetensors/safetensors/remote"
	"github.com/gosafetensors/safetensors/remote/blobstore/internal/driver"
)

// Object is one object of a bucket, read with range reads. It implements
// io.ReaderAt and is safe for concurrent use.
type Object struct {
	shared  *shared
	ctx     context.Context
	key     string
	name    string
	size    int64
	etag    string
	modTime time.Time
	prefix  []byte
	core    *rangeread.Reader // the read path: prefix, cache, read-ahead, runs
	stats   stats
	closed  atomic.Bool
}

// shared is what an object and its siblings share: the bucket (closed with
// the last of them, when owned), the bound on reads in flight, the options.
type shared struct {
	bucket    driver.Bucket
	bucketURL string
	owned     bool
	refs      atomic.Int64
	sem       chan struct{}
	cfg       config
}

// Stats counts the reads of an Object.
type Stats struct {
	Requests int64 // range reads (each one request to the store, before SDK retries)
	Bytes    int64 // bytes read
}

type stats struct{ requests, bytes atomic.Int64 }

// Open opens the object at a bucket URL (s3://, gs://, azblob://, file://,
// or any scheme a linked-in driver serves) with one range read of its first
// bytes (see [WithPrefetch]). ctx bounds the open and every later ReadAt.
// Without [WithPool], the object has a bucket client of its own, closed
// with the object and its siblings.
func Open(ctx context.Context, rawURL string, opts ...Option) (*Object, error) {
	cfg, err := buildConfig(opts)
	if err != nil {
		return nil, err
	}
	if cfg.pool != nil {
		return cfg.pool.Open(ctx, rawURL)
	}
	bucketURL, key, err := splitObjectURL(rawURL)
	if err != nil {
		return nil, err
	}
	b, err := openDriver(ctx, bucketURL, cfg)
	if err != nil {
		return nil, fmt.Errorf("%s: opening bucket: %w", redactString(rawURL), err)
	}
	sh := &shared{bucket: b, bucketURL: bucketURL, owned: true, sem: make(chan struct{}, cfg.concurrency), cfg: cfg}
	return sh.open(ctx, key, "") // on error, the bucket is closed by release
}

// splitObjectURL is SplitURL for a URL that must name an object.
func splitObjectURL(rawURL string) (bucketURL, key string, err error) {
	bucketURL, key, err = SplitURL(rawURL)
	if err != nil {
		return "", "", err
	}
	// A path ending in '/' names a prefix (an object whose key ends in '/'
	// has an object URL ending in %2F).
	if p, _, _ := strings.Cut(rawURL, "?"); key == "" || strings.HasSuffix(p, "/") {
		return "", "", fmt.Errorf("%w: %s names a bucket, directory or prefix, not an object", remote.ErrInvalidURL, redactString(rawURL))
	}
	return bucketURL, key, nil
}

// Sibling opens the object at rel, a path relative to this object's
// directory (a shard named by an index beside it). rel must satisfy
// remote.ValidRepoPath: no "..", no absolute path, no URL. The sibling
// shares the bucket; the bucket is closed with the last of them.
func (o *Object) Sibling(ctx context.Context, rel string) (*Object, error) {
	if err := remote.ValidRepoPath(rel); err != nil {
		return nil, fmt.Errorf("%s: sibling: %w", o.name, err)
	}
	if o.closed.Load() {
		return nil, &remote.Error{Name: o.name, Op: "open sibling", Off: -1, Len: -1, Err: remote.ErrClosed}
	}
	return o.shared.open(ctx, path.Join(path.Dir(o.key), rel), "")
}

// open opens key with its first read; a non-empty version pins that read
// already (and the answer must carry that version).
func (sh *shared) open(ctx context.Context, key, version string) (*Object, error) {
	o := &Object{shared: sh, ctx: ctx, key: key, name: redactString(objectURL(sh.bucketURL, key))}
	sh.refs.Add(1)
	n := sh.cfg.prefetch
	err := sh.acquire(ctx)
	if err != nil {
		sh.release()
		return nil, o.ioError("open", -1, -1, err)
	}
	defer func() { <-sh.sem }()
	o.stats.requests.Add(1)
	r, err := sh.bucket.NewRangeReader(ctx, key, 0, n, version)
	if err != nil {
		sh.release()
		return nil, o.ioError("open", -1, -1, sanitize(err))
	}
	defer r.Body.Close()
	o.size, o.modTime, o.etag = r.Size, r.ModTime, r.Version
	if version != "" && r.Version != version {
		// a store that ignores the precondition sent another version's
		// bytes, or bytes it names no version of: never used
		sh.release()
		if r.Version == "" {
			return nil, o.ioError("open", -1, -1, fmt.Errorf("the store names no version of its objects: version %s cannot be pinned", version))
		}
		return nil, o.ioError("open", -1, -1, fmt.Errorf("%w: %s: version %s asked for, the store answered with %s", remote.ErrObjectChanged, o.name, version, r.Version))
	}
	if o.size < 0 {
		sh.release()
		return nil, o.ioError("open", -1, -1, fmt.Errorf("%w: negative object size %d", remote.ErrProtocol, o.size))
	}
	want := min(n, o.size)
	buf := make([]byte, want) // at most the prefetch length
	if err := readExact(r.Body, buf, &o.stats); err != nil {
		sh.release()
		return nil, o.ioError("open", 0, want, sanitize(err))
	}
	o.prefix = buf
	o.core = rangeread.New(objectBackend{o}, rangeread.Config{
		Size: o.size, Prefix: o.prefix, Concurrency: sh.cfg.concurrency, Gap: sh.cfg.coalesceGap,
		ReadAhead: readAhead, Cache: 2*readAhead + 1<<20, Tail: tailPrefetch,
	})
	return o, nil
}

// The read-ahead of a sequential reader and the tail fetched by the first
// read near the end of an object, as for HTTP (see remote.WithReadAhead).
const (
	readAhead    = 16 << 20
	tailPrefetch = 256 << 10
)

func (sh *shared) acquire(ctx context.Context) error {
	select {
	case sh.sem <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (sh *shared) release() {
	if sh.refs.Add(-1) == 0 && sh.owned {
		_ = sh.bucket.Close() // the bytes were read; closing a client cannot undo that
	}
}

// readExact fills buf and requires the reader to end there.
func readExact(r io.Reader, buf []byte, st *stats) error {
	n, err := io.ReadFull(r, buf)
	st.bytes.Add(int64(n))
	if err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return fmt.Errorf("read ended after %d of %d bytes: %w", n, len(buf), io.ErrUnexpectedEOF)
		}
		return err
	}
	var one [1]byte
	if m, _ := r.Read(one[:]); m > 0 {
		return fmt.Errorf("%w: read returned more than the %d bytes asked for", remote.ErrProtocol, len(buf))
	}
	return nil
}

func (o *Object) ioError(op string, off, n int64, err error) error {
	return &remote.Error{Name: o.name, Op: op, Off: off, Len: n, Err: err}
}

// Size returns the object's size in bytes.
func (o *Object) Size() int64 { return o.size }

// Name returns the object's URL without its query, for messages.
func (o *Object) Name() string { return o.name }

// Key returns the object's key in its bucket.
func (o *Object) Key() string { return o.key }

// ETag returns the version pinned at open: the ETag on S3 and Azure,
// "generation N" on GCS, "" where the store reports none on reads (file://,
// size and modification time are checked instead).
func (o *Object) ETag() string { return o.etag }

// ModTime returns the modification time pinned at open.
func (o *Object) ModTime() time.Time { return o.modTime }

// Stats returns the reads of this object so far.
func (o *Object) Stats() Stats {
	return Stats{Requests: o.stats.requests.Load(), Bytes: o.stats.bytes.Load()}
}

// Close releases the object; a bucket of its own is closed with the last
// object opened from it (a pool's bucket stays open until the pool closes).
func (o *Object) Close() error {
	if o.closed.Swap(true) {
		return nil
	}
	o.shared.release()
	return nil
}

// ReadAt reads len(p) bytes at off with the context given to Open.
func (o *Object) ReadAt(p []byte, off int64) (int, error) {
	return o.ReadAtContext(o.ctx, p, off)
}

// ReadAtContext is ReadAt with its own context. Bytes already fetched
// (the first read, what was read ahead, small reads kept) cost no request.
func (o *Object) ReadAtContext(ctx context.Context, p []byte, off int64) (int, error) {
	if o.closed.Load() {
		return 0, o.ioError("read", off, int64(len(p)), remote.ErrClosed)
	}
	if off < 0 {
		return 0, o.ioError("read", off, int64(len(p)), errors.New("negative offset"))
	}
	return o.core.ReadAt(ctx, p, off)
}

// ReadRuns reads len(bufs[i]) bytes at offs[i] into bufs[i] for every i
// (runs sorted and disjoint) with parallel range reads, bounded by
// WithConcurrency; runs closer than the coalesce gap share a read.
func (o *Object) ReadRuns(bufs [][]byte, offs []int64) error {
	return o.ReadRunsContext(o.ctx, bufs, offs)
}

// ReadRunsContext is ReadRuns with its own context.
func (o *Object) ReadRunsContext(ctx context.Context, bufs [][]byte, offs []int64) error {
	if o.closed.Load() {
		return o.ioError("read runs", -1, -1, remote.ErrClosed)
	}
	err := o.core.ReadRuns(ctx, bufs, offs)
	if errors.Is(err, rangeread.ErrInvalidRuns) {
		return o.ioError("read runs", -1, -1, err)
	}
	return err
}

// Prefetch fetches the byte ranges [offs[i], offs[i]+lens[i]) (any order,
// overlapping or not) with the context given to Open, as ReadRuns would,
// and keeps them in memory, so that reading them afterwards costs no
// request (see remote.File.Prefetch).
func (o *Object) Prefetch(offs, lens []int64) error {
	if o.closed.Load() {
		return o.ioError("prefetch", -1, -1, remote.ErrClosed)
	}
	err := o.core.Prefetch(o.ctx, offs, lens)
	if errors.Is(err, rangeread.ErrInvalidRuns) {
		return o.ioError("prefetch", -1, -1, err)
	}
	return err
}

// objectBackend is how the range-reader core fetches bytes of o.
type objectBackend struct{ o *Object }

// Fetch reads one span with one range read, checking the object is the
// one opened.
func (b objectBackend) Fetch(ctx context.Context, s rangeread.Span) error {
	o := b.o
	if err := o.shared.acquire(ctx); err != nil {
		return o.ioError("read", s.Off, s.Len(), err)
	}
	defer func() { <-o.shared.sem }()
	o.stats.requests.Add(1)
	r, err := o.shared.bucket.NewRangeReader(ctx, o.key, s.Off, s.Len(), o.etag)
	if err != nil {
		return o.ioError("read", s.Off, s.Len(), sanitize(err))
	}
	defer r.Body.Close()
	if err := o.checkIdentity(r); err != nil {
		return o.ioError("read", s.Off, s.Len(), err)
	}
	cr := &countingReader{r: r.Body, st: &o.stats}
	if err := rangeread.Fill(cr, s); err != nil {
		return o.ioError("read", s.Off, s.Len(), sanitize(err))
	}
	var one [1]byte
	if m, _ := r.Body.Read(one[:]); m > 0 {
		return o.ioError("read", s.Off, s.Len(), fmt.Errorf("%w: read returned more than the %d bytes asked for", remote.ErrProtocol, s.Len()))
	}
	return nil
}

func (o *Object) checkIdentity(r *driver.Reader) error {
	if r.Size != o.size {
		return fmt.Errorf("%w: %s: size was %d, now %d", remote.ErrObjectChanged, o.name, o.size, r.Size)
	}
	if m := r.ModTime; !o.modTime.IsZero() && !m.IsZero() && !m.Equal(o.modTime) {
		return fmt.Errorf("%w: %s: modified at %v, now %v", remote.ErrObjectChanged, o.name, o.modTime, m)
	}
	if e := r.Version; o.etag != "" && e != "" && e != o.etag {
		return fmt.Errorf("%w: %s: version was %s, now %s", remote.ErrObjectChanged, o.name, o.etag, e)
	}
	return nil
}

type countingReader struct {
	r  io.Reader
	st *stats
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.st.bytes.Add(int64(n))
	return n, err
}
