package convert

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sync"

	"github.com/gosafetensors/safetensors"
	"github.com/gosafetensors/safetensors/torch"
)

// File converts the checkpoint in to the safetensors file out.
func File(in, out string, opt Options) (*Report, error) {
	c, err := torch.Open(in)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	p, err := NewPlan(c, opt)
	if err != nil {
		return nil, withInput(err, in)
	}
	p.report.Input = in
	return p.Write(out)
}

// PlanFile reads the checkpoint in and returns what converting it would
// write, without writing anything.
func PlanFile(in string, opt Options) (*Report, error) {
	c, err := torch.Open(in)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	p, err := NewPlan(c, opt)
	if err != nil {
		return nil, withInput(err, in)
	}
	p.report.Input = in
	return p.Report(), nil
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
	// The safetensors writer commits to tmp; tmp is renamed to out only
	// after verification, so out never holds an unverified file.
	tmp, err := tempName(out)
	if err != nil {
		return nil, err
	}
	r, err := p.write(tmp)
	if err != nil {
		os.Remove(tmp)
		return nil, err
	}
	if err := os.Rename(tmp, out); err != nil {
		os.Remove(tmp)
		return nil, err
	}
	syncDir(filepath.Dir(out))
	r.Output = out
	return r, nil
}

func (p *Plan) write(tmp string) (*Report, error) {
	r := p.Report()
	infos := make([]safetensors.TensorInfo, len(r.Tensors))
	for i, t := range r.Tensors {
		dt, _ := safetensors.ParseDType(t.DType)
		infos[i] = safetensors.TensorInfo{Name: t.Name, DType: dt, Shape: t.Shape}
	}
	fw, err := safetensors.Create(tmp, infos, r.Metadata)
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
	if err := fw.Close(); err != nil {
		return nil, err
	}
	if !p.opt.NoVerify {
		if err := verify(tmp, r); err != nil {
			return nil, err
		}
		r.Verified = true
	}
	if st, err := os.Stat(tmp); err == nil {
		r.FileSize = st.Size()
	}
	return r, nil
}

// copyTensor streams t's contiguous bytes into fw through a pipe: the
// torch side pushes (WriteTo), the safetensors side pulls (CopyTensor).
// Only the pipe's chunks are in memory, plus whatever WriteTo needs to
// gather a strided view. The producer hashes each chunk after handing it
// over, so hashing overlaps the file write.
func copyTensor(fw *safetensors.FileWriter, name string, t *torch.Tensor, h hash.Hash, prog *progress) error {
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		var w io.Writer = &countWriter{w: pw, prog: prog}
		if h != nil {
			w = io.MultiWriter(w, h)
		}
		_, err := t.WriteTo(w)
		pw.CloseWithError(err)
		done <- err
	}()
	err := fw.CopyTensor(name, pr)
	pr.CloseWithError(errors.New("conversion aborted"))
	werr := <-done
	// The source's own error (CRC mismatch, truncated record) says more
	// than the writer's "source ended early".
	if werr != nil {
		return werr
	}
	return err
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

type countWriter struct {
	w    io.Writer
	prog *progress
}

func (c *countWriter) Write(b []byte) (int, error) {
	n, err := c.w.Write(b)
	c.prog.add(n)
	return n, err
}

// verify re-reads the written file and compares every tensor's dtype,
// shape and SHA-256 with the source's, hashing tensors in parallel.
func verify(path string, r *Report) error {
	f, err := safetensors.Open(path)
	if err != nil {
		return fmt.Errorf("%w: re-reading the output: %v", ErrVerify, err)
	}
	defer f.Close()
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

func verifyTensor(f *safetensors.File, tr *TensorReport) error {
	t, err := f.Tensor(tr.Name)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrVerify, err)
	}
	if t.DType.String() != tr.DType || !slices.Equal(t.Shape, tr.Shape) {
		return fmt.Errorf("%w: tensor %q is %s %v in the output, %s %v in the source", ErrVerify, tr.Name, t.DType, t.Shape, tr.DType, tr.Shape)
	}
	h := sha256.New()
	if _, err := t.WriteTo(h); err != nil {
		return fmt.Errorf("%w: tensor %q: %v", ErrVerify, tr.Name, err)
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != tr.SHA256 {
		return fmt.Errorf("%w: tensor %q: SHA-256 %s in the output, %s in the source", ErrVerify, tr.Name, got, tr.SHA256)
	}
	return nil
}

// tempName returns an unused hidden name beside out.
func tempName(out string) (string, error) {
	dir, base := filepath.Split(out)
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return filepath.Join(dir, "."+base+".convert-"+hex.EncodeToString(b[:])), nil
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

// syncDir makes a rename durable; errors are ignored, as not every
// file system supports syncing a directory.
func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
}
