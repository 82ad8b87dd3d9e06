package audit

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/gosafetensors/safetensors/source"
)

// localFS is where local paths lead: the file system as the process sees
// it, or only what is inside an os.Root.
type localFS interface {
	stat(name string) (fs.FileInfo, error)
	walk(name string, fn fs.WalkDirFunc) error
	object(ctx context.Context, name string, c *config) (*source.Object, error)
	open(name string) (*os.File, error)
}

func (c *config) local() localFS {
	if c.root != nil {
		return rootFS{c.root}
	}
	return osFS{}
}

// osFS is the file system as the process sees it.
type osFS struct{}

func (osFS) stat(name string) (fs.FileInfo, error)     { return os.Stat(name) }
func (osFS) walk(name string, fn fs.WalkDirFunc) error { return filepath.WalkDir(name, fn) }
func (osFS) open(name string) (*os.File, error)        { return os.Open(name) }

func (osFS) object(ctx context.Context, name string, c *config) (*source.Object, error) {
	return source.Open(ctx, name, c.source...)
}

// rootFS is what lies inside an os.Root: paths are relative to it, and
// neither ".." nor a symbolic link leads out.
type rootFS struct{ r *os.Root }

// rel turns a location into a name inside the root.
func (rootFS) rel(name string) (string, error) {
	if filepath.IsAbs(name) {
		return "", fmt.Errorf("%s: an absolute path; paths are relative to the root", name)
	}
	return filepath.Clean(name), nil
}

func (fsys rootFS) stat(name string) (fs.FileInfo, error) {
	rel, err := fsys.rel(name)
	if err != nil {
		return nil, err
	}
	return fsys.r.Stat(rel)
}

func (fsys rootFS) open(name string) (*os.File, error) {
	rel, err := fsys.rel(name)
	if err != nil {
		return nil, err
	}
	return fsys.r.Open(rel)
}

func (fsys rootFS) walk(name string, fn fs.WalkDirFunc) error {
	rel, err := fsys.rel(name)
	if err != nil {
		return fn(name, nil, err)
	}
	return fs.WalkDir(fsys.r.FS(), filepath.ToSlash(rel), func(p string, d fs.DirEntry, err error) error {
		return fn(filepath.FromSlash(p), d, err)
	})
}

// object opens a regular file inside the root; its siblings (an index's
// shards) are opened inside the root too.
func (fsys rootFS) object(ctx context.Context, name string, c *config) (*source.Object, error) {
	ioErr := func(err error) error {
		var pe *fs.PathError
		if errors.As(err, &pe) && pe.Op == "openat" {
			pe.Op = "open" // as os.Open says it, so messages do not depend on the root
		}
		return &source.IOError{Location: name, Op: "open", Err: err}
	}
	rel, err := fsys.rel(name)
	if err != nil {
		return nil, ioErr(err)
	}
	f, err := fsys.r.OpenFile(rel, os.O_RDONLY|openFlags, 0)
	if err != nil {
		return nil, ioErr(err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, ioErr(err)
	}
	switch {
	case st.IsDir():
		f.Close()
		return nil, ioErr(fmt.Errorf("is a directory"))
	case !st.Mode().IsRegular():
		f.Close()
		return nil, ioErr(fmt.Errorf("%w (%s)", source.ErrNotRegular, st.Mode().Type()))
	}
	sibling := func(ctx context.Context, s string) (*source.Object, error) {
		return fsys.object(ctx, filepath.Join(filepath.Dir(name), s), c)
	}
	var r io.ReaderAt = f
	if c.readCounter != nil {
		r = countingReaderAt{f, c.readCounter}
	}
	o, err := source.NewObject(name, r, st.Size(), f, sibling)
	if err != nil {
		f.Close()
		return nil, err
	}
	return o, nil
}

// walkDir yields the files of a local directory worth checking: for a
// scan, those with a model's extension or a model's content, for
// validation safetensors files and indexes. A symbolic link, FIFO or
// device named like a model is yielded (opening it follows the link or
// reports what it is), never skipped in silence; only regular files are
// sniffed for content (opening a FIFO would block).
func (c *config) walkDir(dir string, check Check, yield func(Target, error) bool) {
	fsys := c.local()
	stop := fmt.Errorf("stopped")
	err := fsys.walk(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if !yield(Target{Location: p}, &source.IOError{Location: p, Op: "list", Err: err}) {
				return stop
			}
			if d != nil && d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		if d.IsDir() {
			return nil
		}
		var ok bool
		switch {
		case check == ValidateCheck:
			ok = validateName(p)
			if !ok {
				format, read := detectLocal(fsys, p)
				ok = read && format == source.Safetensors
			}
		case d.Type().IsRegular():
			ok = slices.Contains(modelExtensions, strings.ToLower(filepath.Ext(p))) || looksLikeModel(fsys, p)
		default:
			ok = namedLikeModel(p)
		}
		if ok && !yield(Target{Location: p}, nil) {
			return stop
		}
		return nil
	})
	_ = err // a stop, or an error already yielded
}

// namedLikeModel reports whether a name alone says it is a model file: a
// model extension or a sharded model's index.
func namedLikeModel(p string) bool {
	lower := strings.ToLower(p)
	return slices.Contains(modelExtensions, path.Ext(lower)) || strings.HasSuffix(lower, ".safetensors.index.json")
}

// looksLikeModel reports whether a local file's content is one the
// opener recognises (a checkpoint, a pickle with a PROTO opcode, a tar, a
// safetensors file, a compressed container). Protocol 0 and 1 pickles have
// no magic: they are found by name. A file that cannot be read is kept, so
// that checking it reports the error.
func looksLikeModel(fsys localFS, p string) bool {
	format, ok := detectLocal(fsys, p)
	return !ok || (format != source.Unknown && format != source.Index)
}

// detectLocal detects a local file's format from its first bytes, as the
// opener does; ok is false when the file cannot be read.
func detectLocal(fsys localFS, p string) (format source.Format, ok bool) {
	if st, err := fsys.stat(p); err != nil || !st.Mode().IsRegular() {
		return source.Unknown, false // never open a FIFO or device to look
	}
	f, err := fsys.open(p)
	if err != nil {
		return source.Unknown, false
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return source.Unknown, false
	}
	format, _, err = source.Detect(f, st.Size())
	return format, err == nil
}

// countingReaderAt reports the bytes of every read.
type countingReaderAt struct {
	r     io.ReaderAt
	count func(int)
}

func (c countingReaderAt) ReadAt(p []byte, off int64) (int, error) {
	n, err := c.r.ReadAt(p, off)
	c.count(n)
	return n, err
}
