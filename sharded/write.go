package sharded

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"

	"github.com/gosafetensors/safetensors"
	"github.com/gosafetensors/safetensors/internal/atomicfile"
)

// chunk is how many bytes are copied between checks of the context and
// progress reports, and the size of each read-back buffer.
const chunk = 16 << 20

// Result describes what [Split] or [Merge] wrote.
type Result struct {
	Files    []string // the files written: shards in order, then the index
	Index    *Index   // the index written, nil when one file was written
	Bytes    int64    // tensor data bytes written
	Warnings []string // from the source model (see [Model.Warnings])
}

// copier writes tensors of one source into files, counting progress.
type copier struct {
	ctx   context.Context
	src   safetensors.Source
	opt   writeOptions
	done  int64
	total int64
	buf   []byte // generic-path copy buffer, allocated on first use

	written int64    // bytes in the file being written
	flush   *flusher // starts writeback of the file being written
	check   *checker // compares what is written with the source, or nil

	afterWrite func(written int64) // test hook: called as the file grows
}

// FileBacked is implemented by sources whose tensors are bytes of local
// files (a [Model] opened from disk). [Split] and [Merge] then copy them
// with copy_file_range on Linux, inside the kernel; any other source is
// copied through a buffer.
type FileBacked interface {
	// TensorFile returns the open file holding the named tensor and the
	// absolute offset of the tensor's first byte in it. The file is only
	// read at explicit offsets, never seeked, so it may be shared.
	TensorFile(name string) (f *os.File, off int64, ok bool)
}

// TensorFile implements [FileBacked] for shards that are themselves
// FileBacked: opened from local files by a [DirOpener], or by an opener
// whose sources implement it.
func (m *Model) TensorFile(name string) (*os.File, int64, bool) {
	l, ok := m.tensors[name]
	if !ok {
		return nil, 0, false
	}
	fb, ok := m.shards[l.shard].src.(FileBacked)
	if !ok {
		return nil, 0, false
	}
	return fb.TensorFile(name)
}

func (c *copier) report(n int64) {
	c.done += n
	if c.opt.progress != nil {
		c.opt.progress(c.done, c.total)
	}
}

// writeFile writes the named tensors of the source, with metadata meta,
// as a safetensors file into out (header included), and returns the
// header written. Tensors that follow each other in the output and in one
// local source file are copied together, with one copy_file_range call per
// chunk. With flushEarly, writeback of what is written starts while the
// copy goes on (see [flusher]), so that the final fsync has little left to
// wait for; without it, the caller is expected to overlap the fsync with
// other work (Split syncs a shard while it writes the next). When
// verify is set, the returned checker is already comparing what was
// written with the source: the caller must call its finish method (path
// names out in its errors).
func (c *copier) writeFile(out *os.File, path string, names []string, meta map[string]string, verify, flushEarly bool) (*safetensors.Header, *checker, error) {
	infos := make([]safetensors.TensorInfo, len(names))
	for i, n := range names {
		info, ok := c.src.Info(n)
		if !ok {
			return nil, nil, fmt.Errorf("tensor %q: listed by the source but not found", n)
		}
		infos[i] = info
	}
	if len(meta) == 0 {
		meta = nil // no "__metadata__" entry, as the reference writes for None
	}
	h, hdr, err := safetensors.Layout(infos, meta)
	if err != nil {
		return nil, nil, err
	}
	srcs := make([]tensorSource, len(h.Tensors))
	for i, info := range h.Tensors {
		if srcs[i], err = c.source(info); err != nil {
			return nil, nil, err
		}
	}
	if _, err := out.Write(hdr); err != nil {
		return nil, nil, err
	}
	c.written = 0
	c.flush = nil
	if flushEarly {
		c.flush = startFlusher(out)
	}
	c.check = nil
	if verify {
		c.check = c.newChecker(out, path, hdr, h, srcs, true)
	}
	ck := c.check
	defer func() {
		c.flush.stop()
		c.flush, c.check = nil, nil
		if err != nil && ck != nil {
			ck.stop()
		}
	}()
	c.wrote(int64(len(hdr)), false)
	err = c.copyAll(out, srcs)
	if err != nil {
		return nil, nil, err
	}
	return h, ck, nil
}

// copyAll appends the tensors' bytes to out.
func (c *copier) copyAll(out *os.File, srcs []tensorSource) error {
	for i := 0; i < len(srcs); {
		s := srcs[i]
		j, n := i+1, s.t.Size()
		if s.f != nil {
			for j < len(srcs) && srcs[j].f == s.f && srcs[j].off == s.off+n {
				n += srcs[j].t.Size()
				j++
			}
			done, err := c.copyFile(out, srcs[i:j], n)
			if err != nil {
				return err
			}
			if done {
				i = j
				continue
			}
		}
		for k, s := range srcs[i:j] {
			if err := c.copyBuffered(out, s.t, i+k); err != nil {
				return err
			}
		}
		i = j
	}
	return nil
}

// tensorSource is where a tensor's bytes come from: always t, and for a
// [FileBacked] source also the file f and the offset off of its first byte.
type tensorSource struct {
	t   *safetensors.Tensor
	f   *os.File
	off int64
}

func (c *copier) source(info safetensors.TensorInfo) (tensorSource, error) {
	t, err := c.src.Tensor(info.Name)
	if err != nil {
		return tensorSource{}, err
	}
	if t.Size() != info.Size() {
		return tensorSource{}, fmt.Errorf("tensor %q: the source now says %d bytes, it said %d", info.Name, t.Size(), info.Size())
	}
	s := tensorSource{t: t}
	if fb, ok := c.src.(FileBacked); ok {
		if f, off, ok := fb.TensorFile(info.Name); ok && off >= 0 && off <= maxSize-t.Size() {
			s.f, s.off = f, off
		}
	}
	return s, nil
}

// stopped returns why the copy should stop: the context's error, or a
// difference the checker has already found.
func (c *copier) stopped() error {
	if err := c.ctx.Err(); err != nil {
		return err
	}
	return c.check.failure()
}

// wrote records n more bytes appended to the output (tensor bytes, for
// progress, when data is set).
func (c *copier) wrote(n int64, data bool) {
	c.written += n
	if c.afterWrite != nil {
		c.afterWrite(c.written)
	}
	c.flush.advance(c.written)
	c.check.advance(c.written)
	if data {
		c.report(n)
	}
}

// copyBuffered appends one tensor's bytes (tensor i of the file) to out
// through a buffer; the checker hashes them on the way.
func (c *copier) copyBuffered(out *os.File, t *safetensors.Tensor, i int) error {
	size := t.Size()
	if c.buf == nil {
		c.buf = make([]byte, min(chunk, max(size, 1)))
	}
	for pos := int64(0); pos < size; {
		if err := c.stopped(); err != nil {
			return err
		}
		b := c.buf[:min(int64(len(c.buf)), size-pos)]
		n, err := t.ReadAt(b, pos)
		if n < len(b) {
			if err == nil || errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return fmt.Errorf("tensor %q: reading at byte %d of %d: %w", t.Name, pos+int64(n), size, err)
		}
		c.check.feed(i, pos, b)
		if _, err := out.Write(b); err != nil {
			return err
		}
		pos += int64(n)
		c.wrote(int64(n), true)
	}
	return nil
}

// copyFile copies the run of tensors run, n bytes contiguous in one file,
// with copy_file_range, in chunks so that cancellation and progress are
// seen. done is false when the kernel cannot copy between these files and
// nothing was copied.
func (c *copier) copyFile(out *os.File, run []tensorSource, n int64) (done bool, err error) {
	f, off := run[0].f, run[0].off
	for pos := int64(0); pos < n; {
		if err := c.stopped(); err != nil {
			return true, err
		}
		k, ok, err := copyRange(out, f, off+pos, min(chunk*4, n-pos))
		if !ok {
			if pos == 0 {
				return false, nil
			}
			err = errors.New("copy_file_range stopped working")
		}
		pos += k
		c.wrote(k, true)
		if err != nil {
			name := run[0].t.Name
			for _, s := range run {
				if s.off > off+pos {
					break
				}
				name = s.t.Name
			}
			return true, fmt.Errorf("%s: tensor %q: copying at byte %d: %w", f.Name(), name, off+pos, err)
		}
	}
	return true, nil
}

func readFull(r io.ReaderAt, p []byte, off int64) error {
	n, err := r.ReadAt(p, off)
	if n == len(p) {
		return nil
	}
	if err == nil || errors.Is(err, io.EOF) {
		err = io.ErrUnexpectedEOF
	}
	return err
}

func sameInfo(a, b safetensors.TensorInfo) bool {
	return a.Name == b.Name && a.DType == b.DType && slices.Equal(a.Shape, b.Shape) && a.DataOffsets == b.DataOffsets
}

// checkFree refuses outputs that exist unless overwriting is allowed, and
// outputs that are files src reads (its shards, its index) in any case:
// renaming over one would leave the model broken.
func checkFree(src safetensors.Source, paths []string, overwrite bool) error {
	for _, p := range paths {
		_, err := os.Lstat(p)
		switch {
		case err == nil && !overwrite:
			return fmt.Errorf("%w: %s", ErrExists, p)
		case err != nil && !errors.Is(err, os.ErrNotExist):
			return err
		}
	}
	inputs := inputFiles(src)
	for _, p := range paths {
		if in, ok := atomicfile.OutputIsInput(p, inputs); ok {
			if filepath.Clean(in.Name) == filepath.Clean(p) {
				return fmt.Errorf("%w: %s is read as an input (--force never replaces one)", ErrOutputIsInput, p)
			}
			return fmt.Errorf("%w: %s is %s, which %s reads (--force never replaces an input)", ErrOutputIsInput, p, in.Name, sourceName(src))
		}
	}
	return nil
}

// inputFiles returns the local files src reads: those it lists
// ([atomicfile.Reader]: a Model's index and shards, a source.Model's every
// file) and the files holding its tensors.
func inputFiles(src safetensors.Source) []atomicfile.Input {
	out := atomicfile.InputsOf(src)
	seen := map[*os.File]bool{}
	if fb, ok := src.(FileBacked); ok {
		for _, n := range src.Names() {
			f, _, ok := fb.TensorFile(n)
			if !ok || seen[f] {
				continue
			}
			seen[f] = true
			if st, err := f.Stat(); err == nil {
				out = append(out, atomicfile.Input{Name: f.Name(), Info: st})
			}
		}
	}
	return out
}

// InputFiles returns the local files the model reads: its index and every
// shard's files (what each lists, as an [atomicfile.Reader], or the file
// holding its tensors). An output that is one of them is refused.
func (m *Model) InputFiles() []atomicfile.Input {
	var out []atomicfile.Input
	if m.index != nil {
		out = append(out, atomicfile.Inputs(m.name)...)
	}
	for _, sh := range m.shards {
		out = append(out, inputFiles(sh.src)...)
	}
	return out
}

func sourceName(src safetensors.Source) string {
	switch s := src.(type) {
	case *Model:
		return s.Name()
	case interface{ Name() string }:
		return s.Name()
	}
	return "source"
}
