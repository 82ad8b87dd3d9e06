package convert

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"hash/maphash"
	"io"
	"os"
	"runtime"
	"slices"
	"sync"

	"github.com/gosafetensors/safetensors"
	"github.com/gosafetensors/safetensors/internal/atomicfile"
	"github.com/gosafetensors/safetensors/torch"
)

// File converts the checkpoint in (a local path) to the safetensors file
// out. It takes options of both kinds ([Option]); an invalid one is an
// error wrapping [ErrOption], before anything is read. Cancelling ctx
// stops the conversion: nothing is left behind, and the error wraps
// ctx's.
func File(ctx context.Context, in, out string, opts ...Option) (*Report, error) {
	p, w, err := buildOptions(opts)
	if err != nil {
		return nil, err
	}
	c, err := openCheckpoint(in, &p)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	return convert(ctx, c, in, out, p, w)
}

// FromReaderAt converts the checkpoint r holds (size bytes; name is used
// in messages and the report) to the safetensors file out: r may be any
// io.ReaderAt, an *os.File as well as a remote.File (HTTP, the Hub), a
// blobstore object or a source.Object, so a Go program converts whatever
// the CLI converts. With a remote r, [WithVerifyFromCopy] saves reading it
// twice. Options and cancellation are as for [File].
func FromReaderAt(ctx context.Context, r io.ReaderAt, size int64, name, out string, opts ...Option) (*Report, error) {
	p, w, err := buildOptions(opts)
	if err != nil {
		return nil, err
	}
	c, err := torch.NewReader(r, size, name, p.torch...)
	if err != nil {
		if errors.Is(err, torch.ErrOption) {
			return nil, fmt.Errorf("%w: WithReaderOptions: %w", ErrOption, err)
		}
		return nil, err
	}
	defer c.Close()
	return convert(ctx, c, name, out, p, w)
}

func convert(ctx context.Context, c *torch.Checkpoint, in, out string, p planOptions, w writeOptions) (*Report, error) {
	plan, err := newPlan(c, p)
	if err != nil {
		return nil, withInput(err, in)
	}
	plan.report.Input = in
	return plan.write(ctx, out, w)
}

// PlanFile reads the checkpoint in (a local path) and returns what
// converting it would write, without writing anything.
func PlanFile(ctx context.Context, in string, opts ...PlanOption) (*Report, error) {
	p, err := buildPlanOptions(opts)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	c, err := openCheckpoint(in, &p)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	plan, err := newPlan(c, p)
	if err != nil {
		return nil, withInput(err, in)
	}
	plan.report.Input = in
	return plan.Report(), nil
}

// openCheckpoint opens in with the WithReaderOptions options; an invalid
// one is reported as an invalid option of this package too.
func openCheckpoint(in string, opt *planOptions) (*torch.Checkpoint, error) {
	c, err := torch.Open(in, opt.torch...)
	if errors.Is(err, torch.ErrOption) {
		return nil, fmt.Errorf("%w: WithReaderOptions: %w", ErrOption, err)
	}
	return c, err
}

func withInput(err error, in string) error {
	if errors.Is(err, ErrInput) {
		return fmt.Errorf("%s: %w", in, err)
	}
	return err
}

// Write writes the planned tensors to out. The checkpoint the plan was made
// from must still be open. The file appears at out only once it is complete
// and verified; on error, or when ctx is cancelled (the error then wraps
// ctx's), nothing is left behind. An invalid option is an error wrapping
// [ErrOption], before anything is written.
func (p *Plan) Write(ctx context.Context, out string, opts ...WriteOption) (*Report, error) {
	w, err := buildWriteOptions(opts)
	if err != nil {
		return nil, err
	}
	return p.write(ctx, out, w)
}

func (p *Plan) write(ctx context.Context, out string, w writeOptions) (*Report, error) {
	if _, ok := atomicfile.OutputIsInput(out, atomicfile.Inputs(p.report.Input)); ok {
		return nil, fmt.Errorf("%w: output %s is the input file", ErrOutputIsInput, out)
	}
	if !w.overwrite {
		if _, err := os.Lstat(out); err == nil {
			return nil, fmt.Errorf("%w: %s", ErrExists, out)
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	// an expanded view beyond what the checkpoint allows is refused before
	// anything is written
	for _, t := range p.report.Tensors {
		if err := p.sources[t.Name].CheckView(); err != nil {
			return nil, err
		}
	}
	r, err := p.stream(ctx, out, w)
	if err != nil {
		return nil, err
	}
	r.Output = out
	return r, nil
}

// stream writes every tensor into an atomic safetensors writer. With
// verification, the finished file is read back while it is synced to disk:
// every tensor is compared byte for byte with a fresh read of its source
// view and its SHA-256 recorded; the file is renamed into place only if
// all match. Cancelling ctx aborts the writer between any two writes.
func (p *Plan) stream(ctx context.Context, out string, w writeOptions) (*Report, error) {
	r := p.Report()
	infos := make([]safetensors.TensorInfo, len(r.Tensors))
	for i, t := range r.Tensors {
		dt, _ := safetensors.ParseDType(t.DType)
		infos[i] = safetensors.TensorInfo{Name: t.Name, DType: dt, Shape: t.Shape}
	}
	fw, err := safetensors.Create(out, infos, r.Metadata)
	if err != nil {
		return nil, err
	}
	prog := &progress{fn: w.progress, total: r.Bytes}
	var copied *copySums
	if w.verify && w.verifyFromCopy {
		copied = &copySums{seed: maphash.MakeSeed(), sums: make(map[string]uint64, len(r.Tensors))}
	}
	for _, ti := range fw.Tensors() {
		src := &countingSource{ctx: ctx, t: p.sources[ti.Name], prog: prog}
		if copied != nil {
			src.h = &maphash.Hash{}
			src.h.SetSeed(copied.seed)
		}
		if err := fw.WriteTensorFrom(ti.Name, src); err != nil {
			fw.Abort()
			return nil, cancelled(ctx, err)
		}
		if copied != nil {
			copied.sums[ti.Name] = src.h.Sum64()
		}
	}
	// the checks of every storage record (torch.Storage.Check) run on its
	// first read; this runs those of records nothing read (empty tensors,
	// entries not converted), so that what converts is what Scan calls
	// clean
	if err := p.ck.Check(); err != nil {
		fw.Abort()
		return nil, cancelled(ctx, err)
	}
	if w.verify {
		err = fw.CloseVerified(func(f *safetensors.Reader) error {
			if err := ctx.Err(); err != nil {
				return err
			}
			return verify(ctx, f, r, p.sources, w.digests, copied)
		})
	} else {
		err = fw.Close()
	}
	if err != nil {
		return nil, cancelled(ctx, err)
	}
	r.Verified = w.verify
	r.FileSize = fw.Header().FileSize()
	return r, nil
}

// cancelled reports a write stopped by ctx as ctx's error.
func cancelled(ctx context.Context, err error) error {
	if cerr := ctx.Err(); cerr != nil && !errors.Is(err, cerr) {
		return fmt.Errorf("%w (%v)", cerr, err)
	}
	return err
}

// countingSource is a tensor as an io.WriterTo that reports progress, and
// hashes what it writes when h is set.
type countingSource struct {
	ctx  context.Context
	t    *torch.Tensor
	prog *progress
	h    *maphash.Hash
}

func (s *countingSource) WriteTo(w io.Writer) (int64, error) {
	return s.t.WriteTo(&countingWriter{ctx: s.ctx, w: w, prog: s.prog, h: s.h})
}

type countingWriter struct {
	ctx  context.Context
	w    io.Writer
	prog *progress
	h    *maphash.Hash
}

func (c *countingWriter) Write(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	n, err := c.w.Write(p)
	if c.h != nil {
		c.h.Write(p[:n])
	}
	c.prog.add(n)
	return n, err
}

// copySums are the hashes of the bytes copied into each output tensor
// (WithVerifyFromCopy), under a seed of this conversion's.
type copySums struct {
	seed maphash.Seed
	sums map[string]uint64
}

type progress struct {
	mu      sync.Mutex
	fn      func(written, total int64)
	written int64
	total   int64
}

func (p *progress) add(n int) {
	if p.fn == nil {
		return
	}
	p.mu.Lock()
	p.written += int64(n)
	p.fn(p.written, p.total)
	p.mu.Unlock()
}

// verify checks the written file against the sources: the tensor count,
// the metadata, and for every tensor its dtype, its shape and its bytes,
// compared one for one with a fresh read of the source view (stronger than
// comparing digests, and far cheaper than hashing both sides), or, with
// copied, hashed and compared with the hash of the bytes copied into it.
// With digests, each output tensor's SHA-256 goes into the report. Tensors
// are checked in parallel.
func verify(ctx context.Context, f *safetensors.Reader, r *Report, sources map[string]*torch.Tensor, digests bool, copied *copySums) error {
	if f.Len() != len(r.Tensors) {
		return fmt.Errorf("%w: the output holds %d tensors, %d were written", ErrVerify, f.Len(), len(r.Tensors))
	}
	for k, v := range r.Metadata {
		if f.Metadata[k] != v {
			return fmt.Errorf("%w: metadata %q differs in the output", ErrVerify, k)
		}
	}
	work := make(chan *TensorReport)
	errs := make(chan error, len(r.Tensors))
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), max(len(r.Tensors), 1)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for tr := range work {
				if err := ctx.Err(); err != nil {
					errs <- err
					continue
				}
				if copied != nil {
					errs <- verifyCopied(f, tr, copied, digests)
					continue
				}
				errs <- verifyTensor(f, tr, sources[tr.Name], digests)
			}
		}()
	}
	for i := range r.Tensors {
		work <- &r.Tensors[i]
	}
	close(work)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

func verifyTensor(f *safetensors.Reader, tr *TensorReport, src *torch.Tensor, digest bool) error {
	t, err := f.Tensor(tr.Name)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrVerify, err)
	}
	if t.DType.String() != tr.DType || !slices.Equal(t.Shape, tr.Shape) {
		return fmt.Errorf("%w: tensor %q is %s %v in the output, %s %v in the source", ErrVerify, tr.Name, t.DType, t.Shape, tr.DType, tr.Shape)
	}
	cw := &compareWriter{out: t, size: t.Size(), mismatch: -1}
	if digest {
		cw.h = sha256.New()
	}
	if _, err := src.WriteTo(cw); err != nil {
		if cw.mismatch >= 0 {
			return fmt.Errorf("%w: tensor %q: byte %d differs from the source", ErrVerify, tr.Name, cw.mismatch)
		}
		return fmt.Errorf("%w: tensor %q: %v", ErrVerify, tr.Name, err)
	}
	if cw.n != cw.size {
		return fmt.Errorf("%w: tensor %q: the source gave %d bytes, the output holds %d", ErrVerify, tr.Name, cw.n, cw.size)
	}
	if cw.h != nil {
		tr.SHA256 = hex.EncodeToString(cw.h.Sum(nil))
	}
	return nil
}

// verifyCopied reads an output tensor back and compares its hash with the
// hash of the bytes copied into it: the source is not read again.
func verifyCopied(f *safetensors.Reader, tr *TensorReport, copied *copySums, digest bool) error {
	t, err := f.Tensor(tr.Name)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrVerify, err)
	}
	if t.DType.String() != tr.DType || !slices.Equal(t.Shape, tr.Shape) {
		return fmt.Errorf("%w: tensor %q is %s %v in the output, %s %v in the source", ErrVerify, tr.Name, t.DType, t.Shape, tr.DType, tr.Shape)
	}
	var h maphash.Hash
	h.SetSeed(copied.seed)
	w := io.Writer(&h)
	var d hash.Hash
	if digest {
		d = sha256.New()
		w = io.MultiWriter(&h, d)
	}
	buf := make([]byte, min(t.Size(), 4<<20))
	for pos := int64(0); pos < t.Size(); {
		b := buf[:min(int64(len(buf)), t.Size()-pos)]
		if _, err := t.ReadAt(b, pos); err != nil {
			return fmt.Errorf("%w: tensor %q: re-reading the output: %v", ErrVerify, tr.Name, err)
		}
		w.Write(b)
		pos += int64(len(b))
	}
	if sum, ok := copied.sums[tr.Name]; !ok || h.Sum64() != sum {
		return fmt.Errorf("%w: tensor %q differs from the bytes copied into it from the source", ErrVerify, tr.Name)
	}
	if d != nil {
		tr.SHA256 = hex.EncodeToString(d.Sum(nil))
	}
	return nil
}

// compareWriter checks that what is written equals the output tensor, in
// order, reading the output in step with the source (memory: one chunk)
// and hashing it as it goes.
type compareWriter struct {
	out      *safetensors.Tensor
	size, n  int64
	buf      []byte
	h        hash.Hash
	mismatch int64 // first differing byte, or -1
}

var errMismatch = errors.New("bytes differ")

func (c *compareWriter) Write(p []byte) (int, error) {
	if int64(len(p)) > c.size-c.n {
		c.mismatch = c.size
		return 0, errMismatch
	}
	if cap(c.buf) < len(p) {
		c.buf = make([]byte, len(p))
	}
	got := c.buf[:len(p)]
	if _, err := c.out.ReadAt(got, c.n); err != nil {
		return 0, fmt.Errorf("re-reading the output: %w", err)
	}
	if !bytes.Equal(p, got) {
		for i := range p {
			if p[i] != got[i] {
				c.mismatch = c.n + int64(i)
				break
			}
		}
		return 0, errMismatch
	}
	if c.h != nil {
		c.h.Write(got)
	}
	c.n += int64(len(p))
	return len(p), nil
}
