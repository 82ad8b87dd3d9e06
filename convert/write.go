package convert

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"runtime"
	"slices"
	"sync"

	"github.com/gosafetensors/safetensors"
	"github.com/gosafetensors/safetensors/torch"
)

// File converts the checkpoint in to the safetensors file out.
func File(in, out string, opt Options) (*Report, error) {
	var r *Report
	err := withPlan(in, opt, func(p *Plan) (err error) {
		r, err = p.Write(out)
		return err
	})
	return r, err
}

// PlanFile reads the checkpoint in and returns what converting it would
// write, without writing anything.
func PlanFile(in string, opt Options) (*Report, error) {
	var r *Report
	err := withPlan(in, opt, func(p *Plan) error {
		r = p.Report()
		return nil
	})
	return r, err
}

// withPlan opens and plans the checkpoint in and calls f while it is open.
func withPlan(in string, opt Options, f func(*Plan) error) error {
	c, err := torch.Open(in)
	if err != nil {
		return err
	}
	defer c.Close()
	p, err := NewPlan(c, opt)
	if err != nil {
		return withInput(err, in)
	}
	p.report.Input = in
	return f(p)
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
	if same, _ := sameFile(p.report.Input, out); same {
		return nil, fmt.Errorf("%w: output %s is the input file", ErrInput, out)
	}
	if !p.opt.Overwrite {
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
// verification, each source tensor is hashed while it is written, and the
// finished file is read back and re-hashed while it is synced to disk; it
// is renamed into place only if every hash matches.
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
	index := make(map[string]int, len(r.Tensors))
	for i, t := range r.Tensors {
		index[t.Name] = i
	}
	prog := &progress{fn: p.opt.Progress, total: r.Bytes}
	for _, ti := range fw.Tensors() {
		tr := &r.Tensors[index[ti.Name]]
		var h hash.Hash
		if !p.opt.NoVerify {
			h = sha256.New()
		}
		if err := copyTensor(fw, ti.Name, p.sources[ti.Name], h, prog); err != nil {
			fw.Abort()
			return nil, err
		}
		if h != nil {
			tr.SHA256 = hex.EncodeToString(h.Sum(nil))
		}
	}
	if p.opt.NoVerify {
		err = fw.Close()
	} else {
		err = fw.CloseVerified(func(f *safetensors.Reader) error { return verify(f, r) })
	}
	if err != nil {
		return nil, err
	}
	r.Verified = !p.opt.NoVerify
	r.FileSize = fw.Header().FileSize()
	return r, nil
}

// copyTensor has t write its contiguous bytes straight into fw. When h is
// set, each chunk is hashed on another goroutine while the same chunk is
// written, so hashing overlaps the file write; only the producer's own
// buffer (a chunk, or what a strided gather needs) is in memory.
func copyTensor(fw *safetensors.FileWriter, name string, t *torch.Tensor, h hash.Hash, prog *progress) error {
	src := &teeSource{t: t, prog: prog, inline: h}
	if h != nil && t.NBytes() >= 1<<20 {
		// Worth a goroutine: hash on the other core while writing.
		src.hasher, src.inline = newOverlapHasher(h), nil
		defer src.hasher.close()
	}
	return fw.WriteTensorFrom(name, src)
}

// teeSource is the tensor as an io.WriterTo that also hashes and counts.
type teeSource struct {
	t      *torch.Tensor
	hasher *overlapHasher // hashes large tensors on another goroutine
	inline hash.Hash      // hashes small ones in line
	prog   *progress
}

func (s *teeSource) WriteTo(w io.Writer) (int64, error) {
	return s.t.WriteTo(&teeWriter{w: w, hasher: s.hasher, inline: s.inline, prog: s.prog})
}

type teeWriter struct {
	w      io.Writer
	hasher *overlapHasher
	inline hash.Hash
	prog   *progress
}

func (t *teeWriter) Write(p []byte) (int, error) {
	if t.inline != nil {
		t.inline.Write(p)
	}
	if t.hasher != nil {
		t.hasher.start(p)
	}
	n, err := t.w.Write(p)
	if t.hasher != nil {
		t.hasher.wait() // p may be reused once Write returns
	}
	t.prog.add(n)
	return n, err
}

// overlapHasher hashes chunks on its own goroutine.
type overlapHasher struct {
	h    hash.Hash
	in   chan []byte
	done chan struct{}
}

func newOverlapHasher(h hash.Hash) *overlapHasher {
	o := &overlapHasher{h: h, in: make(chan []byte), done: make(chan struct{})}
	go func() {
		for p := range o.in {
			o.h.Write(p)
			o.done <- struct{}{}
		}
		close(o.done)
	}()
	return o
}

func (o *overlapHasher) start(p []byte) { o.in <- p }
func (o *overlapHasher) wait()          { <-o.done }
func (o *overlapHasher) close()         { close(o.in) }

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

// verify re-reads the written file and compares every tensor's dtype,
// shape and SHA-256 with the source's, hashing tensors in parallel.
func verify(f *safetensors.Reader, r *Report) error {
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
				errs <- verifyTensor(f, tr)
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

func verifyTensor(f *safetensors.Reader, tr *TensorReport) error {
	t, err := f.Tensor(tr.Name)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrVerify, err)
	}
	if t.DType.String() != tr.DType || !slices.Equal(t.Shape, tr.Shape) {
		return fmt.Errorf("%w: tensor %q is %s %v in the output, %s %v in the source", ErrVerify, tr.Name, t.DType, t.Shape, tr.DType, tr.Shape)
	}
	h := sha256.New()
	if _, err := t.WriteTo(h); err != nil { // one Write of the mapped bytes
		return fmt.Errorf("%w: tensor %q: %v", ErrVerify, tr.Name, err)
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != tr.SHA256 {
		return fmt.Errorf("%w: tensor %q: SHA-256 %s in the output, %s in the source", ErrVerify, tr.Name, got, tr.SHA256)
	}
	return nil
}

func sameFile(a, b string) (bool, error) {
	if a == "" {
		return false, nil
	}
	sa, err := os.Stat(a)
	if err != nil {
		return false, err
	}
	sb, err := os.Stat(b)
	if err != nil {
		return false, err
	}
	return os.SameFile(sa, sb), nil
}
