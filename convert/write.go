package convert

import (
	"bytes"
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

// File converts the checkpoint in to the safetensors file out. An invalid
// option is an error wrapping [ErrOption], before anything is read.
func File(in, out string, opts ...Option) (*Report, error) {
	var r *Report
	err := withPlan(in, opts, func(p *Plan) (err error) {
		r, err = p.Write(out)
		return err
	})
	return r, err
}

// PlanFile reads the checkpoint in and returns what converting it would
// write, without writing anything.
func PlanFile(in string, opts ...Option) (*Report, error) {
	var r *Report
	err := withPlan(in, opts, func(p *Plan) error {
		r = p.Report()
		return nil
	})
	return r, err
}

// withPlan opens and plans the checkpoint in and calls f while it is open.
func withPlan(in string, opts []Option, f func(*Plan) error) error {
	opt, err := buildOptions(opts)
	if err != nil {
		return err
	}
	c, err := openCheckpoint(in, &opt)
	if err != nil {
		return err
	}
	defer c.Close()
	p, err := newPlan(c, opt)
	if err != nil {
		return withInput(err, in)
	}
	p.report.Input = in
	return f(p)
}

// openCheckpoint opens in with the WithReaderOptions options; an invalid
// one is reported as an invalid option of this package too.
func openCheckpoint(in string, opt *options) (*torch.Checkpoint, error) {
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
// and verified; on error nothing is left behind.
func (p *Plan) Write(out string) (*Report, error) {
	if _, ok := atomicfile.OutputIsInput(out, atomicfile.Inputs(p.report.Input)); ok {
		return nil, fmt.Errorf("%w: output %s is the input file", ErrOutputIsInput, out)
	}
	if !p.opt.overwrite {
		if _, err := os.Lstat(out); err == nil {
			return nil, fmt.Errorf("%w: %s", ErrExists, out)
		}
	}
	r, err := p.write(out)
	if err != nil {
		return nil, err
	}
	r.Output = out
	return r, nil
}

// write streams every tensor into an atomic safetensors writer. With
// verification, the finished file is read back while it is synced to disk:
// every tensor is compared byte for byte with a fresh read of its source
// view and its SHA-256 recorded; the file is renamed into place only if
// all match.
func (p *Plan) write(out string) (*Report, error) {
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
	prog := &progress{fn: p.opt.progress, total: r.Bytes}
	var copied *copySums
	if p.opt.verify && p.opt.verifyFromCopy {
		copied = &copySums{seed: maphash.MakeSeed(), sums: make(map[string]uint64, len(r.Tensors))}
	}
	for _, ti := range fw.Tensors() {
		src := &countingSource{t: p.sources[ti.Name], prog: prog}
		if copied != nil {
			src.h = &maphash.Hash{}
			src.h.SetSeed(copied.seed)
		}
		if err := fw.WriteTensorFrom(ti.Name, src); err != nil {
			fw.Abort()
			return nil, err
		}
		if copied != nil {
			copied.sums[ti.Name] = src.h.Sum64()
		}
	}
	if p.opt.verify {
		err = fw.CloseVerified(func(f *safetensors.Reader) error { return verify(f, r, p.sources, p.opt.digests, copied) })
	} else {
		err = fw.Close()
	}
	if err != nil {
		return nil, err
	}
	r.Verified = p.opt.verify
	r.FileSize = fw.Header().FileSize()
	return r, nil
}

// countingSource is a tensor as an io.WriterTo that reports progress, and
// hashes what it writes when h is set.
type countingSource struct {
	t    *torch.Tensor
	prog *progress
	h    *maphash.Hash
}

func (s *countingSource) WriteTo(w io.Writer) (int64, error) {
	return s.t.WriteTo(&countingWriter{w: w, prog: s.prog, h: s.h})
}

type countingWriter struct {
	w    io.Writer
	prog *progress
	h    *maphash.Hash
}

func (c *countingWriter) Write(p []byte) (int, error) {
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
func verify(f *safetensors.Reader, r *Report, sources map[string]*torch.Tensor, digests bool, copied *copySums) error {
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
