package sharded

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"

	"github.com/gosafetensors/safetensors"
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

// TensorFile implements [FileBacked] for shards opened from local files.
func (m *Model) TensorFile(name string) (*os.File, int64, bool) {
	l, ok := m.tensors[name]
	if !ok {
		return nil, 0, false
	}
	ls, ok := m.shards[l.shard].src.(*localShard)
	if !ok {
		return nil, 0, false
	}
	t, err := ls.Tensor(name)
	if err != nil || t.Offset() < 0 {
		return nil, 0, false
	}
	return ls.f, t.Offset(), true
}

func (c *copier) report(n int64) {
	c.done += n
	if c.opt.progress != nil {
		c.opt.progress(c.done, c.total)
	}
}

// writeFile writes the named tensors of the source, with metadata meta,
// as a safetensors file into out (header included), and returns the
// header written.
func (c *copier) writeFile(out *os.File, names []string, meta map[string]string) (*safetensors.Header, error) {
	infos := make([]safetensors.TensorInfo, len(names))
	for i, n := range names {
		info, ok := c.src.Info(n)
		if !ok {
			return nil, fmt.Errorf("tensor %q: listed by the source but not found", n)
		}
		infos[i] = info
	}
	if len(meta) == 0 {
		meta = nil // no "__metadata__" entry, as the reference writes for None
	}
	h, hdr, err := safetensors.Layout(infos, meta)
	if err != nil {
		return nil, err
	}
	if _, err := out.Write(hdr); err != nil {
		return nil, err
	}
	for _, info := range h.Tensors {
		if err := c.copyTensor(out, info); err != nil {
			return nil, err
		}
	}
	return h, nil
}

// copyTensor appends one tensor's bytes to out: inside the kernel
// (copy_file_range) from a local shard, else through a buffer.
func (c *copier) copyTensor(out *os.File, info safetensors.TensorInfo) error {
	t, err := c.src.Tensor(info.Name)
	if err != nil {
		return err
	}
	size := info.Size()
	if t.Size() != size {
		return fmt.Errorf("tensor %q: the source now says %d bytes, it said %d", info.Name, t.Size(), size)
	}
	if fb, ok := c.src.(FileBacked); ok {
		if f, off, ok := fb.TensorFile(info.Name); ok {
			done, err := c.copyFile(out, f, off, t)
			if err != nil || done {
				return err
			}
		}
	}
	if c.buf == nil {
		c.buf = make([]byte, min(chunk, max(size, 1)))
	}
	for pos := int64(0); pos < size; {
		if err := c.ctx.Err(); err != nil {
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
		if _, err := out.Write(b); err != nil {
			return err
		}
		pos += int64(n)
		c.report(int64(n))
	}
	return nil
}

// copyFile copies the tensor's bytes from f at off with copy_file_range,
// in chunks so that cancellation and progress are seen. done is false when
// the kernel cannot copy between these files and nothing was copied.
func (c *copier) copyFile(out, f *os.File, off int64, t *safetensors.Tensor) (done bool, err error) {
	size := t.Size()
	for pos := int64(0); pos < size; {
		if err := c.ctx.Err(); err != nil {
			return true, err
		}
		n, ok, err := copyRange(out, f, off+pos, min(chunk*4, size-pos))
		if !ok {
			if pos == 0 {
				return false, nil
			}
			err = errors.New("copy_file_range stopped working")
		}
		pos += n
		c.report(n)
		if err != nil {
			return true, fmt.Errorf("%s: tensor %q: copying at byte %d: %w", f.Name(), t.Name, off+pos, err)
		}
	}
	return true, nil
}

// verify reads the file just written back through a fresh header parse and
// compares every tensor byte for byte with a fresh read of the source.
func (c *copier) verify(out *os.File, path string, want *safetensors.Header) error {
	size := want.FileSize()
	r, err := safetensors.NewReader(out, size, safetensors.WithName(path))
	if err != nil {
		return fmt.Errorf("%w: %s does not read back: %w", ErrVerify, path, err)
	}
	if !slices.EqualFunc(r.Tensors, want.Tensors, sameInfo) || !maps.Equal(r.Metadata, want.Metadata) {
		return fmt.Errorf("%w: %s: the header read back differs from the one written", ErrVerify, path)
	}
	a, b := make([]byte, chunk), make([]byte, chunk)
	for _, info := range want.Tensors {
		got, err := r.Tensor(info.Name)
		if err != nil {
			return err
		}
		src, err := c.src.Tensor(info.Name)
		if err != nil {
			return err
		}
		var srcAt io.ReaderAt = src
		var base int64
		if fb, ok := c.src.(FileBacked); ok {
			if f, off, ok := fb.TensorFile(info.Name); ok {
				srcAt, base = f, off // pread: a fresh read, not the mapping
			}
		}
		for pos := int64(0); pos < info.Size(); {
			if err := c.ctx.Err(); err != nil {
				return err
			}
			n := min(int64(chunk), info.Size()-pos)
			if err := readFull(got, a[:n], pos); err != nil {
				return fmt.Errorf("%s: re-reading tensor %q: %w", path, info.Name, err)
			}
			if err := readFull(srcAt, b[:n], base+pos); err != nil {
				return fmt.Errorf("tensor %q: re-reading the source: %w", info.Name, err)
			}
			if !bytes.Equal(a[:n], b[:n]) {
				return fmt.Errorf("%w: %s: tensor %q differs from its source within bytes %d..%d", ErrVerify, path, info.Name, pos, pos+n)
			}
			pos += n
		}
	}
	return nil
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

// checkFree refuses outputs that exist unless overwriting is allowed.
func checkFree(paths []string, overwrite bool) error {
	for _, p := range paths {
		_, err := os.Lstat(p)
		switch {
		case err == nil && !overwrite:
			return fmt.Errorf("%w: %s", ErrExists, p)
		case err != nil && !errors.Is(err, os.ErrNotExist):
			return err
		}
	}
	return nil
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
