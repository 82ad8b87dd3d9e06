package load

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"iter"
	"net/http"
	"os"
	"reflect"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gosafetensors/safetensors"
	"github.com/gosafetensors/safetensors/internal/fetch"
	"github.com/gosafetensors/safetensors/remote"
	"github.com/gosafetensors/safetensors/remote/blobstore"
	"github.com/gosafetensors/safetensors/source"
)

var (
	// ErrUneven reports a split dimension that the world size does not
	// divide, with the default WithUneven(Refuse).
	ErrUneven = errors.New("tensor-parallel split is uneven")
	// ErrMisaligned reports a part of a sub-byte dtype (F4, F6) that does
	// not start and end on byte boundaries.
	ErrMisaligned = errors.New("tensor-parallel part is not byte-aligned")
	// ErrChanged reports a local file whose size or modification time
	// changed while it was being loaded: its bytes may be a mix.
	ErrChanged = errors.New("file changed while loading")
	// ErrMisplaced reports a chunk that did not land where its offset
	// says, or landed twice: a bug, refused rather than delivered.
	ErrMisplaced = errors.New("chunk out of place")
)

// Part is what one tensor contributes to a load: the whole tensor, or a
// tensor-parallel rank's part of it.
type Part struct {
	Name  string
	DType safetensors.DType
	Shape []int64                // the part's shape
	Info  safetensors.TensorInfo // the tensor as stored
	File  string                 // the file or object holding it
	// Split is the dimension divided among ranks, Replicate for a whole
	// tensor; the part holds positions [Start, Stop) of it.
	Split       Split
	Start, Stop int64
	Size        int64 // bytes

	// The part's bytes are runs runs of runLen bytes, stride apart, the
	// first at first (relative to the tensor's first byte).
	first, runLen, stride, runs int64
}

// Selectors returns the part as a subscript of the tensor (nil for the
// whole tensor): Tensor.Slice(p.Selectors()...) and get --slice give the
// same bytes.
func (p Part) Selectors() []safetensors.Selector {
	if p.Split < 0 {
		return nil
	}
	idx := make([]safetensors.Selector, int(p.Split)+1)
	for i := range idx {
		idx[i] = safetensors.All()
	}
	idx[p.Split] = safetensors.Range(p.Start, p.Stop)
	return idx
}

// Tensor is a loaded part: its description and its bytes, C-contiguous
// and little-endian like the file's.
type Tensor struct {
	Part
	Data []byte
}

// Tensor returns the loaded part as a safetensors.Tensor over Data (no
// copy), for typed access (safetensors.As) and slicing.
func (t *Tensor) Tensor() *safetensors.Tensor {
	info := safetensors.TensorInfo{Name: t.Name, DType: t.DType, Shape: t.Shape, DataOffsets: [2]int64{0, t.Size}}
	return safetensors.NewTensorBytes(info, t.Data, t.File)
}

// Progress is the state of a load, as WithProgress reports it.
type Progress struct {
	Bytes, Total int64 // read so far, to read in all
	Tensors, Of  int   // parts complete, parts in all
	Elapsed      time.Duration
	Requests     int64 // transport requests so far, retries included (remote sources)
}

// Stats describes a finished (or failed) load.
type Stats struct {
	Tensors  int           // parts delivered
	Bytes    int64         // tensor bytes read
	Chunks   int64         // chunks read
	Reads    int64         // read calls made on the sources
	Requests int64         // HTTP or object-store requests made meanwhile, redirects and retries included (0 for local files)
	Retries  int64         // of which retries (HTTP)
	Wire     int64         // response body bytes received meanwhile (remote; multipart framing included)
	Duration time.Duration // wall time of the load
}

// Rate returns the bytes per second of the load.
func (s Stats) Rate() float64 {
	if s.Duration <= 0 {
		return 0
	}
	return float64(s.Bytes) / s.Duration.Seconds()
}

// Loader reads the parts of a model. It is made by [New] or [Open], reads
// with Load, All or Discard (any number of times), and is safe for
// concurrent use.
type Loader struct {
	cfg        config
	src        safetensors.Source
	model      *source.Model // opened by Open, closed by Close
	parts      []Part
	partSrc    []int   // source index of each part
	partOff    []int64 // offset of each part's tensor in its source
	order      []int   // parts in read order: by source, then offset
	srcs       []fetch.Source
	local      bool // every source is a local file
	total      int64
	replicated int64
}

// Open opens loc with source.OpenModel (a local file or directory, an
// index, http(s), hf://, s3://, gs://, azblob://; single or sharded) with
// readers tuned for parallel loading: an HTTP client that keeps a
// connection per concurrent read (HTTP/1.1: a connection's bandwidth is
// what servers and CDNs cap), reader concurrency bounds equal to the
// loader's, and no read-ahead (the loader plans its reads). Close the
// Loader to close the model.
func Open(ctx context.Context, loc string, opts ...Option) (*Loader, error) {
	c, err := buildConfig(opts)
	if err != nil {
		return nil, err
	}
	sopts := []source.Option{
		// The loader plans its own reads: a reader's read-ahead would
		// fetch bytes twice, or bytes a rank does not need.
		source.WithRemote(remote.WithClient(HTTPClient(c.concurrency)), remote.WithConcurrency(c.concurrency), remote.WithReadAhead(0)),
		source.WithBlob(blobstore.WithConcurrency(c.concurrency)),
	}
	m, err := source.OpenModel(ctx, loc, append(sopts, c.sourceOpts...)...)
	if err != nil {
		return nil, err
	}
	l, err := newLoader(m, c)
	if err != nil {
		m.Close()
		return nil, err
	}
	l.model = m
	return l, nil
}

// HTTPClient returns the client Open uses for n concurrent reads: HTTP/1.1
// (one TCP connection per request in flight, so per-connection caps add
// up), n idle connections kept per host, no transparent decompression.
func HTTPClient(n int) *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.ForceAttemptHTTP2 = false
	t.TLSNextProto = map[string]func(string, *tls.Conn) http.RoundTripper{}
	t.MaxIdleConns = max(100, 2*n)
	t.MaxIdleConnsPerHost = n
	t.DisableCompression = true
	t.ReadBufferSize = 64 << 10
	return &http.Client{Transport: t}
}

// New plans the load of src: which tensors, which part of each, from which
// reader. src stays the caller's (Close does not close it) and must stay
// open while the Loader is used. A remote source is best opened as Open
// does: remote.WithReadAhead(0) (read-ahead would fetch bytes twice, or
// bytes a rank does not need) and a concurrency bound at least the
// loader's.
func New(src safetensors.Source, opts ...Option) (*Loader, error) {
	c, err := buildConfig(opts)
	if err != nil {
		return nil, err
	}
	if len(c.sourceOpts) > 0 {
		return nil, fmt.Errorf("load: %w: WithSourceOptions configures how Open opens a location; New reads a source already open", ErrOption)
	}
	return newLoader(src, c)
}

func newLoader(src safetensors.Source, c config) (*Loader, error) {
	l := &Loader{cfg: c, src: src, local: true}
	srcIndex := map[io.ReaderAt]int{}
	for t, err := range src.All() {
		if err != nil {
			return nil, err
		}
		if !l.selected(t.Name) {
			continue
		}
		r, off, ok := t.Backing()
		if !ok {
			b, err := t.Bytes()
			if err != nil {
				return nil, err
			}
			r, off = bytes.NewReader(b), 0
		}
		r = unwrap(r)
		si, seen := -1, false
		if reflect.TypeOf(r).Comparable() {
			si, seen = srcIndex[r]
		}
		if !seen {
			si = len(l.srcs)
			name := t.File()
			if name == "" {
				name = nameOf(r)
			}
			if name == "" {
				name = sourceName(src)
			}
			l.srcs = append(l.srcs, fetch.Source{R: r, Name: name})
			if _, isFile := r.(*os.File); !isFile {
				l.local = false
			}
			if reflect.TypeOf(r).Comparable() {
				srcIndex[r] = si
			}
		}
		p, err := c.tp.part(t.TensorInfo, l.srcs[si].Name)
		if err != nil {
			return nil, err
		}
		if p.Split < 0 && c.tp != nil && c.tp.world > 1 {
			l.replicated += p.Size
		}
		l.total += p.Size
		l.parts = append(l.parts, p)
		l.partSrc = append(l.partSrc, si)
		l.partOff = append(l.partOff, off)
	}
	l.order = make([]int, len(l.parts))
	for i := range l.order {
		l.order[i] = i
	}
	slices.SortStableFunc(l.order, func(a, b int) int {
		if l.partSrc[a] != l.partSrc[b] {
			return l.partSrc[a] - l.partSrc[b]
		}
		return cmpInt64(l.partOff[a], l.partOff[b])
	})
	return l, nil
}

func cmpInt64(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// unwrap finds the reader under source.Object wrappers, for its
// ReadAtContext and traffic counters.
func unwrap(r io.ReaderAt) io.ReaderAt {
	for range 8 {
		u, ok := r.(interface{ ReaderAt() io.ReaderAt })
		if !ok {
			return r
		}
		r = u.ReaderAt()
	}
	return r
}

func sourceName(src safetensors.Source) string {
	if n, ok := src.(interface{ Name() string }); ok {
		return n.Name()
	}
	if m, ok := src.(*source.Model); ok {
		return m.Name
	}
	return "safetensors"
}

func nameOf(r io.ReaderAt) string {
	if n, ok := r.(interface{ Name() string }); ok {
		return n.Name()
	}
	return ""
}

func (l *Loader) selected(name string) bool {
	for _, keep := range l.cfg.selects {
		if !keep(name) {
			return false
		}
	}
	return true
}

// Parts returns the parts a load delivers, in the source's order.
func (l *Loader) Parts() []Part { return slices.Clone(l.parts) }

// Size returns the bytes a load reads: the parts' sizes.
func (l *Loader) Size() int64 { return l.total }

// Replicated returns the bytes of whole tensors in a tensor-parallel load
// (every rank reads them); 0 without tensor parallelism.
func (l *Loader) Replicated() int64 { return l.replicated }

// ChunkSize returns the largest read the loader makes.
func (l *Loader) ChunkSize() int64 {
	if l.cfg.chunk > 0 {
		return l.cfg.chunk
	}
	if l.local {
		return DefaultLocalChunk
	}
	return DefaultRemoteChunk
}

// Concurrency returns how many reads are in flight at once.
func (l *Loader) Concurrency() int { return l.cfg.concurrency }

// Close closes the model if Open opened it.
func (l *Loader) Close() error {
	if l.model == nil {
		return nil
	}
	err := l.model.Close()
	l.model = nil
	return err
}

// Load reads every part and calls fn with each as soon as all its bytes
// are in, in completion order, one call at a time (reads go on meanwhile,
// up to the concurrency bound; a slow fn holds back only the reads that
// wait for it). The Tensor and its Data are fn's to keep. An error from fn
// stops the load and is returned. Memory: the parts being read (allocated
// when their first chunk starts, or given by WithDestination) plus what fn
// keeps.
func (l *Loader) Load(ctx context.Context, fn func(*Tensor) error) (Stats, error) {
	if fn == nil {
		return Stats{}, fmt.Errorf("load: %w: Load(ctx, nil)", ErrOption)
	}
	return l.run(ctx, fn, nil)
}

// All is Load as an iterator: tensors in completion order, then a final
// error if the load failed. Stopping the iteration cancels the load.
func (l *Loader) All(ctx context.Context) iter.Seq2[*Tensor, error] {
	return func(yield func(*Tensor, error) bool) {
		ctx, cancel := context.WithCancelCause(ctx)
		defer cancel(nil)
		ch := make(chan *Tensor)
		errc := make(chan error, 1)
		go func() {
			_, err := l.run(ctx, func(t *Tensor) error {
				select {
				case ch <- t:
					return nil
				case <-ctx.Done():
					return context.Cause(ctx)
				}
			}, nil)
			close(ch)
			errc <- err
		}()
		for t := range ch {
			if !yield(t, nil) {
				cancel(errStopped)
				for range ch {
				}
				<-errc
				return
			}
		}
		if err := <-errc; err != nil {
			yield(nil, err)
		}
	}
}

var errStopped = errors.New("iteration stopped")

// Discard reads every byte of every part into a pool of chunk buffers that
// it reuses, and keeps nothing: a benchmark of the storage, and a way to
// warm a cache. Memory is (concurrency + 1) × chunk size.
func (l *Loader) Discard(ctx context.Context) (Stats, error) {
	pool, err := fetch.NewPool(l.cfg.concurrency+1, l.ChunkSize())
	if err != nil {
		return Stats{}, err
	}
	return l.run(ctx, nil, pool)
}

// item is one part being read.
type item struct {
	part *Part
	buf  []byte

	mu      sync.Mutex
	covered []span // the byte ranges of the part that have landed, sorted, merged
}

type span struct{ lo, hi int64 }

// land records that [lo, hi) of the part is in place and reports whether
// the part is now complete; bytes that had landed already are an error.
func (it *item) land(lo, hi int64) (complete bool, err error) {
	it.mu.Lock()
	defer it.mu.Unlock()
	c := it.covered
	i, _ := slices.BinarySearchFunc(c, lo, func(s span, v int64) int { return cmpInt64(s.lo, v) })
	if (i > 0 && c[i-1].hi > lo) || (i < len(c) && c[i].lo < hi) || lo < 0 || hi > it.part.Size {
		return false, fmt.Errorf("%s: tensor %q: bytes %d-%d of the part arrived twice, or outside it (%w)", it.part.File, it.part.Name, lo, hi-1, ErrMisplaced)
	}
	switch {
	case i > 0 && c[i-1].hi == lo && i < len(c) && c[i].lo == hi:
		c[i-1].hi = c[i].hi
		c = slices.Delete(c, i, i+1)
	case i > 0 && c[i-1].hi == lo:
		c[i-1].hi = hi
	case i < len(c) && c[i].lo == hi:
		c[i].lo = lo
	default:
		c = slices.Insert(c, i, span{lo, hi})
	}
	it.covered = c
	return len(c) == 1 && c[0] == span{0, it.part.Size}, nil
}

// assembly puts a run's chunks in place: in the parts' own buffers (and
// delivers each part when its last byte is in), or, with a pool, in the
// pool's buffers (and counts the parts done).
type assembly struct {
	l     *Loader
	items []item
	pool  *fetch.Pool
	fn    func(*Tensor) error
	start time.Time
	base  traffic // the sources' counters when the run started

	mu        sync.Mutex // serializes fn and progress
	stopped   error      // fn's error: no call after it
	delivered int
	bytesDone atomic.Int64
}

func (l *Loader) newAssembly(fn func(*Tensor) error, pool *fetch.Pool) *assembly {
	a := &assembly{l: l, items: make([]item, len(l.parts)), pool: pool, fn: fn, start: time.Now(), base: l.traffic()}
	for i := range a.items {
		a.items[i].part = &l.parts[i]
	}
	return a
}

// deliver hands a complete part to fn, unless fn already failed.
func (a *assembly) deliver(it *item) error {
	t := &Tensor{Part: *it.part, Data: it.buf}
	it.buf = nil
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.stopped != nil {
		return a.stopped
	}
	if a.fn != nil {
		if err := a.fn(t); err != nil {
			a.stopped = err
			return err
		}
	}
	a.delivered++
	return nil
}

// empty delivers the parts that have no bytes to wait for.
func (a *assembly) empty() error {
	for i := range a.items {
		it := &a.items[i]
		if it.part.Size != 0 {
			continue
		}
		if a.pool == nil {
			it.buf = []byte{}
			if a.l.cfg.dest != nil {
				b, err := a.l.dest(it.part)
				if err != nil {
					return err
				}
				it.buf = b
			}
		}
		if err := a.deliver(it); err != nil {
			return err
		}
	}
	return nil
}

// buffers is fetch.Config.Buffers: each piece's place in its part,
// allocated (or asked of WithDestination) with the part's first chunk.
func (a *assembly) buffers(ctx context.Context, c *fetch.Chunk) ([][]byte, error) {
	if a.pool != nil {
		return a.pool.Buffers(ctx, c)
	}
	bufs := make([][]byte, len(c.Pieces))
	for k, pc := range c.Pieces {
		it := &a.items[pc.Item]
		if it.buf == nil {
			b, err := a.l.dest(it.part)
			if err != nil {
				return nil, err
			}
			it.buf = b
		}
		bufs[k] = it.buf[pc.Pos : pc.Pos+pc.Len : pc.Pos+pc.Len]
	}
	return bufs, nil
}

// done is fetch.Config.Done: it checks that every piece landed at its
// place in its part, and once, and delivers a part when its pieces cover
// it (not when a count of bytes says so: a piece twice and another never
// would add up).
func (a *assembly) done(c *fetch.Chunk, bufs [][]byte) error {
	for k, pc := range c.Pieces {
		it := &a.items[pc.Item]
		if a.pool == nil && (len(bufs[k]) == 0 || it.buf == nil || pc.Pos >= int64(len(it.buf)) || &bufs[k][0] != &it.buf[pc.Pos]) {
			return fmt.Errorf("%s: tensor %q: bytes %d-%d of the part did not land at their place (%w)", it.part.File, it.part.Name, pc.Pos, pc.Pos+pc.Len-1, ErrMisplaced)
		}
		complete, err := it.land(pc.Pos, pc.Pos+pc.Len)
		if err != nil {
			return err
		}
		if complete {
			if err := a.deliver(it); err != nil {
				return err
			}
		}
	}
	if a.pool != nil {
		a.pool.PutChunk(bufs)
	}
	a.bytesDone.Add(c.Bytes)
	a.report()
	return nil
}

// report calls the progress function.
func (a *assembly) report() {
	if a.l.cfg.progress == nil {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.l.cfg.progress(Progress{Bytes: a.bytesDone.Load(), Total: a.l.total, Tensors: a.delivered, Of: len(a.items),
		Elapsed: time.Since(a.start), Requests: a.l.traffic().requests - a.base.requests})
}

// run loads the parts: into the parts' buffers, delivered to fn, or, with
// pool, into the pool's buffers.
func (l *Loader) run(ctx context.Context, fn func(*Tensor) error, pool *fetch.Pool) (Stats, error) {
	a := l.newAssembly(fn, pool)
	checks, err := l.statFiles()
	if err != nil {
		return Stats{}, err
	}
	if err := a.empty(); err != nil {
		return Stats{Tensors: a.delivered}, err
	}
	cfg := fetch.Config{
		Concurrency: l.cfg.concurrency,
		MaxChunk:    l.ChunkSize(),
		MinChunk:    l.ChunkSize(),
		Buffers:     a.buffers,
		Done:        a.done,
	}
	if !l.local {
		cfg.MinChunk = max(l.ChunkSize()/8, 1)
	}
	srcs := l.srcs
	if !l.cfg.buffered {
		srcs = slices.Clone(l.srcs)
		for i, s := range srcs {
			if f, ok := s.R.(*os.File); ok {
				lf := openLocal(f, l.ChunkSize())
				defer lf.Close()
				srcs[i].R = lf
			}
		}
	}
	fst, err := fetch.Run(ctx, srcs, l.extents(), l.total, cfg)
	if err == nil {
		err = l.recheckFiles(checks)
	}
	if err != nil {
		err = l.describe(err)
	}
	after := l.traffic()
	a.mu.Lock()
	defer a.mu.Unlock()
	return Stats{
		Tensors: a.delivered, Bytes: fst.Bytes, Chunks: fst.Chunks, Reads: fst.Reads,
		Requests: after.requests - a.base.requests, Retries: after.retries - a.base.retries, Wire: after.bytes - a.base.bytes,
		Duration: time.Since(a.start),
	}, err
}

// dest returns the buffer a part is read into.
func (l *Loader) dest(p *Part) ([]byte, error) {
	if l.cfg.dest == nil {
		return make([]byte, p.Size), nil
	}
	b, err := l.cfg.dest(*p)
	if err != nil {
		return nil, fmt.Errorf("%s: tensor %q: destination: %w", p.File, p.Name, err)
	}
	if int64(len(b)) != p.Size {
		return nil, fmt.Errorf("load: %w: destination for tensor %q has %d bytes, the part %d", ErrOption, p.Name, len(b), p.Size)
	}
	return b, nil
}

// extents lists the parts' byte runs in read order.
func (l *Loader) extents() iter.Seq[fetch.Extent] {
	return func(yield func(fetch.Extent) bool) {
		for _, i := range l.order {
			p := &l.parts[i]
			base := l.partOff[i] + p.first
			for k := range p.runs {
				e := fetch.Extent{Src: l.partSrc[i], Off: base + k*p.stride, Len: p.runLen, Item: i, Pos: k * p.runLen}
				if !yield(e) {
					return
				}
			}
		}
	}
}

// describe adds to err the tensor whose bytes it concerns, when it names
// a byte range of a source.
func (l *Loader) describe(err error) error {
	var re *fetch.ReadError
	if !errors.As(err, &re) || len(re.Chunk.Pieces) == 0 {
		return err
	}
	first := l.parts[re.Chunk.Pieces[0].Item].Name
	last := l.parts[re.Chunk.Pieces[len(re.Chunk.Pieces)-1].Item].Name
	if first == last {
		return fmt.Errorf("tensor %q: %w", first, err)
	}
	return fmt.Errorf("tensors %q to %q: %w", first, last, err)
}

type traffic struct{ requests, retries, bytes int64 }

// traffic sums the transport counters of the remote sources.
func (l *Loader) traffic() traffic {
	var t traffic
	for _, s := range l.srcs {
		switch r := s.R.(type) {
		case *remote.File:
			st := r.Stats()
			t.requests += st.Requests
			t.retries += st.Retries
			t.bytes += st.Bytes
		case *blobstore.Object:
			st := r.Stats()
			t.requests += st.Requests
			t.bytes += st.Bytes
		}
	}
	return t
}

// fileCheck is what a local file looked like when a load started.
type fileCheck struct {
	name    string
	f       *os.File
	size    int64
	modTime time.Time
}

func (l *Loader) statFiles() ([]fileCheck, error) {
	var out []fileCheck
	for _, s := range l.srcs {
		f, ok := s.R.(*os.File)
		if !ok {
			continue
		}
		st, err := f.Stat()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", s.Name, err)
		}
		out = append(out, fileCheck{s.Name, f, st.Size(), st.ModTime()})
	}
	return out, nil
}

// recheckFiles refuses a load during which a local file changed.
func (l *Loader) recheckFiles(checks []fileCheck) error {
	for _, c := range checks {
		st, err := c.f.Stat()
		if err != nil {
			return fmt.Errorf("%s: %w", c.name, err)
		}
		if st.Size() != c.size || !st.ModTime().Equal(c.modTime) {
			return fmt.Errorf("%s: size %d, modified %v when the load started; size %d, modified %v when it ended (%w)", c.name, c.size, c.modTime, st.Size(), st.ModTime(), ErrChanged)
		}
	}
	return nil
}
