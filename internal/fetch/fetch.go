// Package fetch reads many byte ranges of one or more sources with a fixed
// number of concurrent, chunked reads, pipelined: while one chunk is being
// consumed the others are in flight. It knows nothing of tensors or files;
// the load package and download build on it.
//
// The caller lists [Extent]s: Len bytes at Off of a source, which belong at
// position Pos of an item (a tensor, a part of one, a file). [Run] cuts them
// into chunks of at most MaxChunk bytes (shrinking towards MinChunk as the
// end nears, so that the last reads finish together), asks the caller for
// each chunk's buffers in chunk order from one goroutine (so a pool that
// blocks bounds memory, and an allocator sees items in order), reads each
// chunk with one call on its source — ReadAtContext for one piece,
// ReadRunsContext for several, where the source has them — and hands the
// filled buffers back. A read that returns fewer bytes than asked is an
// error, never data.
//
// Memory is what the caller's Buffers hands out: with a pool of
// Concurrency+1 chunk buffers, at most (Concurrency+1) × MaxChunk bytes.
package fetch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"iter"
	"strings"
	"sync/atomic"

	"golang.org/x/sync/errgroup"
)

// ErrConfig reports an invalid Config or extent list.
var ErrConfig = errors.New("fetch: invalid configuration")

// ErrShortRead reports a source that returned fewer bytes than asked for
// inside its known size: it was truncated, or it misbehaves.
var ErrShortRead = errors.New("short read")

// Source is something to read from. R is read with ReadAtContext(ctx, p,
// off) when it has that method (remote.File, blobstore.Object), else with
// ReadAt; several pieces of one chunk go to ReadRunsContext(ctx, bufs,
// offs) when it has that, else to ReadRuns(bufs, offs), else one read per
// piece. R must allow concurrent reads, as io.ReaderAt promises.
type Source struct {
	R    io.ReaderAt
	Name string // for errors
}

// Extent is Len bytes at offset Off of source Src, which belong at
// position Pos of item Item.
type Extent struct {
	Src  int
	Off  int64
	Len  int64
	Item int
	Pos  int64
}

// Chunk is one read: pieces of extents of one source, sorted by offset and
// disjoint, Bytes in all. Seq numbers chunks from 0 in the order Buffers
// sees them.
type Chunk struct {
	Seq    int
	Src    int
	Pieces []Extent
	Bytes  int64
}

// Config says how to read and where the bytes go.
type Config struct {
	// Concurrency is how many chunks are read at once (at least 1).
	Concurrency int
	// MaxChunk bounds a chunk's bytes (at least 1).
	MaxChunk int64
	// MinChunk is the smallest chunk cut while more bytes remain (1 to
	// MaxChunk; 0 means MaxChunk): chunks are ceil(remaining/Concurrency)
	// bytes clamped to [MinChunk, MaxChunk], so the last reads are short.
	MinChunk int64
	// MaxPieces bounds the pieces of one chunk (0: 1024), which bounds
	// the bookkeeping of a read of many small runs.
	MaxPieces int
	// Buffers returns the buffers chunk c is read into, one per piece,
	// len(bufs[i]) == c.Pieces[i].Len. It is called from one goroutine, in
	// chunk order, before the chunk is read, and may block (on a pool) as
	// long as it returns when ctx is done.
	Buffers func(ctx context.Context, c *Chunk) ([][]byte, error)
	// Done is called, from the goroutine that read it, once every byte of
	// c is in bufs. Calls are concurrent. An error stops the run.
	Done func(c *Chunk, bufs [][]byte) error
	// Stream, if set, replaces Buffers, the read and Done: a worker calls
	// it for each chunk, which it reads and consumes itself (a download
	// streams a range to disk through a small buffer, so memory does not
	// grow with the chunk size). Calls are concurrent; an error stops the
	// run.
	Stream func(ctx context.Context, c *Chunk) error
}

// Stats counts a run's work.
type Stats struct {
	Bytes  int64 // bytes read into buffers
	Chunks int64 // chunks read
	Reads  int64 // read calls made on sources (a ReadRuns call counts once)
}

// ReadError is the failure of a chunk's read. Err names the source and
// the bytes.
type ReadError struct {
	Source string
	Chunk  *Chunk
	Err    error
}

func (e *ReadError) Error() string { return e.Err.Error() }
func (e *ReadError) Unwrap() error { return e.Err }

type work struct {
	c    *Chunk
	bufs [][]byte
}

// Run reads every extent, total bytes in all. Extents of one source that
// follow each other must be sorted by offset and disjoint (sources may
// alternate; each run of extents of one source is cut on its own). The
// extents are pulled as chunks are cut, so a plan of millions of small runs
// costs no memory up front. The first error (a read, Buffers, Done, ctx, a
// bad extent) stops the run and is returned; chunks read before it went
// through Done.
func Run(ctx context.Context, srcs []Source, extents iter.Seq[Extent], total int64, cfg Config) (Stats, error) {
	var st Stats
	if err := check(srcs, total, &cfg); err != nil {
		return st, err
	}
	g, ctx := errgroup.WithContext(ctx)
	ch := make(chan work)
	g.Go(func() error {
		defer close(ch)
		d := dispatcher{ctx: ctx, srcs: srcs, cfg: cfg, ch: ch, total: total, remaining: total}
		return d.run(extents)
	})
	var bytes, chunks, reads atomic.Int64
	for range cfg.Concurrency {
		g.Go(func() error {
			for w := range ch {
				if cfg.Stream != nil {
					reads.Add(1)
					if err := cfg.Stream(ctx, w.c); err != nil {
						return err
					}
					bytes.Add(w.c.Bytes)
					chunks.Add(1)
					continue
				}
				n, err := readChunk(ctx, srcs[w.c.Src], w.c, w.bufs)
				reads.Add(n)
				if err != nil {
					return &ReadError{Source: srcs[w.c.Src].Name, Chunk: w.c, Err: err}
				}
				bytes.Add(w.c.Bytes)
				chunks.Add(1)
				if err := cfg.Done(w.c, w.bufs); err != nil {
					return err
				}
			}
			return nil
		})
	}
	err := g.Wait()
	st = Stats{Bytes: bytes.Load(), Chunks: chunks.Load(), Reads: reads.Load()}
	return st, err
}

// check validates cfg, filling defaults.
func check(srcs []Source, total int64, cfg *Config) error {
	switch {
	case cfg.Concurrency < 1:
		return fmt.Errorf("%w: concurrency %d, want at least 1", ErrConfig, cfg.Concurrency)
	case cfg.MaxChunk < 1:
		return fmt.Errorf("%w: chunk size %d, want at least 1", ErrConfig, cfg.MaxChunk)
	case cfg.MinChunk < 0 || cfg.MinChunk > cfg.MaxChunk:
		return fmt.Errorf("%w: minimum chunk %d outside [1, %d]", ErrConfig, cfg.MinChunk, cfg.MaxChunk)
	case cfg.MaxPieces < 0:
		return fmt.Errorf("%w: max pieces %d is negative", ErrConfig, cfg.MaxPieces)
	case cfg.Stream == nil && (cfg.Buffers == nil || cfg.Done == nil):
		return fmt.Errorf("%w: Buffers and Done (or Stream) are required", ErrConfig)
	case total < 0:
		return fmt.Errorf("%w: total %d is negative", ErrConfig, total)
	}
	for i, s := range srcs {
		if s.R == nil {
			return fmt.Errorf("%w: source %d (%s) has no reader", ErrConfig, i, s.Name)
		}
	}
	if cfg.MinChunk == 0 {
		cfg.MinChunk = cfg.MaxChunk
	}
	if cfg.MaxPieces == 0 {
		cfg.MaxPieces = DefaultMaxPieces
	}
	return nil
}

// DefaultMaxPieces is the default of Config.MaxPieces.
const DefaultMaxPieces = 1024

const maxInt64 = 1<<63 - 1

// dispatcher cuts extents into chunks, gets their buffers in order and
// hands them to the workers.
type dispatcher struct {
	ctx       context.Context
	srcs      []Source
	cfg       Config
	ch        chan<- work
	total     int64
	seen      int64 // bytes of the extents so far
	remaining int64 // bytes not yet in a dispatched chunk
	seq       int
	cur       *Chunk
	size      int64 // the current chunk's target size
	prev      Extent
	n         int
}

func (d *dispatcher) run(extents iter.Seq[Extent]) error {
	for e := range extents {
		if err := d.checkExtent(e); err != nil {
			return err
		}
		for e.Len > 0 {
			if d.cur != nil && d.cur.Src != e.Src {
				if err := d.emit(); err != nil {
					return err
				}
			}
			if d.cur == nil {
				d.size = CutSize(d.remaining, d.cfg.Concurrency, d.cfg.MinChunk, d.cfg.MaxChunk)
				d.cur = &Chunk{Seq: d.seq, Src: e.Src}
			}
			take := min(e.Len, d.size-d.cur.Bytes)
			d.cur.Pieces = append(d.cur.Pieces, Extent{Src: e.Src, Off: e.Off, Len: take, Item: e.Item, Pos: e.Pos})
			d.cur.Bytes += take
			e.Off, e.Pos, e.Len = e.Off+take, e.Pos+take, e.Len-take
			if d.cur.Bytes == d.size || len(d.cur.Pieces) == d.cfg.MaxPieces {
				if err := d.emit(); err != nil {
					return err
				}
			}
		}
	}
	if d.cur != nil {
		if err := d.emit(); err != nil {
			return err
		}
	}
	if d.remaining != 0 {
		return fmt.Errorf("%w: the extents hold %d bytes fewer than the total given", ErrConfig, d.remaining)
	}
	return nil
}

func (d *dispatcher) checkExtent(e Extent) error {
	i := d.n
	d.n++
	if e.Src < 0 || e.Src >= len(d.srcs) {
		return fmt.Errorf("%w: extent %d: no source %d", ErrConfig, i, e.Src)
	}
	if e.Off < 0 || e.Len < 0 || e.Pos < 0 || e.Off > maxInt64-e.Len || e.Pos > maxInt64-e.Len {
		return fmt.Errorf("%w: extent %d: %d bytes at %d (position %d) out of range", ErrConfig, i, e.Len, e.Off, e.Pos)
	}
	if i > 0 && d.prev.Src == e.Src && e.Len > 0 && e.Off < d.prev.Off+d.prev.Len {
		return fmt.Errorf("%w: extent %d of %s at %d overlaps or precedes the previous one (ending at %d)", ErrConfig, i, d.srcs[e.Src].Name, e.Off, d.prev.Off+d.prev.Len)
	}
	if e.Len > d.total-d.seen {
		return fmt.Errorf("%w: the extents hold more than the %d bytes given as their total", ErrConfig, d.total)
	}
	d.seen += e.Len
	if e.Len > 0 || i == 0 || d.prev.Src != e.Src {
		d.prev = e
	}
	return nil
}

// emit gets the current chunk's buffers and hands it to a worker.
func (d *dispatcher) emit() error {
	c := d.cur
	d.cur = nil
	d.remaining -= c.Bytes
	d.seq++
	if d.cfg.Stream != nil {
		select {
		case d.ch <- work{c: c}:
			return nil
		case <-d.ctx.Done():
			return context.Cause(d.ctx)
		}
	}
	bufs, err := d.cfg.Buffers(d.ctx, c)
	if err != nil {
		return err
	}
	if len(bufs) != len(c.Pieces) {
		return fmt.Errorf("%w: Buffers returned %d buffers for %d pieces", ErrConfig, len(bufs), len(c.Pieces))
	}
	for k, b := range bufs {
		if int64(len(b)) != c.Pieces[k].Len {
			return fmt.Errorf("%w: Buffers returned %d bytes for a %d-byte piece", ErrConfig, len(b), c.Pieces[k].Len)
		}
	}
	select {
	case d.ch <- work{c, bufs}:
		return nil
	case <-d.ctx.Done():
		return context.Cause(d.ctx)
	}
}

type contextReaderAt interface {
	ReadAtContext(ctx context.Context, p []byte, off int64) (int, error)
}

type contextRunReader interface {
	ReadRunsContext(ctx context.Context, bufs [][]byte, offs []int64) error
}

type runReader interface {
	ReadRuns(bufs [][]byte, offs []int64) error
}

// readChunk fills bufs with c's pieces and returns how many read calls it
// made.
func readChunk(ctx context.Context, s Source, c *Chunk, bufs [][]byte) (int64, error) {
	if err := ctx.Err(); err != nil {
		return 0, context.Cause(ctx)
	}
	if len(c.Pieces) > 1 {
		offs := make([]int64, len(c.Pieces))
		for i, p := range c.Pieces {
			offs[i] = p.Off
		}
		var err error
		switch r := s.R.(type) {
		case contextRunReader:
			err = r.ReadRunsContext(ctx, bufs, offs)
		case runReader:
			err = r.ReadRuns(bufs, offs)
		default:
			for i, p := range c.Pieces {
				if err := readAt(ctx, s, bufs[i], p.Off); err != nil {
					return int64(i + 1), err
				}
			}
			return int64(len(c.Pieces)), nil
		}
		if err != nil {
			first, last := c.Pieces[0], c.Pieces[len(c.Pieces)-1]
			return 1, wrap(s, fmt.Sprintf("reading %d runs in bytes %d-%d", len(c.Pieces), first.Off, last.Off+last.Len-1), err)
		}
		return 1, nil
	}
	return 1, readAt(ctx, s, bufs[0], c.Pieces[0].Off)
}

// readAt fills p from off, or fails.
func readAt(ctx context.Context, s Source, p []byte, off int64) error {
	var n int
	var err error
	if r, ok := s.R.(contextReaderAt); ok {
		n, err = r.ReadAtContext(ctx, p, off)
	} else {
		n, err = s.R.ReadAt(p, off)
	}
	if n == len(p) && (err == nil || errors.Is(err, io.EOF)) {
		return nil
	}
	if err == nil || errors.Is(err, io.EOF) {
		err = fmt.Errorf("%w: %d of %d bytes (the source ends early: truncated since it was opened?)", ErrShortRead, n, len(p))
	}
	return wrap(s, fmt.Sprintf("reading bytes %d-%d", off, off+int64(len(p))-1), err)
}

// wrap names the source and the bytes in err, unless the reader's error
// already names the source (remote errors name the object and the range).
func wrap(s Source, what string, err error) error {
	if s.Name != "" && strings.Contains(err.Error(), s.Name) {
		return err
	}
	return fmt.Errorf("%s: %s: %w", s.Name, what, err)
}

// CutSize is the size of the next read when remaining bytes are left for
// n readers: ceil(remaining/n) clamped to [lo, hi]. Reads are hi bytes
// while there is plenty left and shrink towards lo as the end nears, so
// that the readers' last reads finish together.
func CutSize(remaining int64, n int, lo, hi int64) int64 {
	return min(max((remaining+int64(n)-1)/int64(n), lo), hi)
}
