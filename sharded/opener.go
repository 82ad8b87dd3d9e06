package sharded

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/gosafetensors/safetensors"
)

// Opener opens the shards an index names. name has passed
// [CheckShardName]; the returned source belongs to the caller, who closes
// it. Implementations for remote storage return a [safetensors.Reader] over
// an io.ReaderAt (see [ReaderAtOpener]); errors from storage must be
// returned wrapped with %w, so that callers can tell them from bad data.
type Opener interface {
	OpenShard(ctx context.Context, name string) (safetensors.Source, error)
}

// ReaderAtOpener adapts a function that opens a shard's bytes as an
// io.ReaderAt of a known size (an HTTP range reader, an object in a bucket)
// into an [Opener]: the header is read and validated with
// [safetensors.NewReader]. If the io.ReaderAt is also an io.Closer it is
// closed with the source.
type ReaderAtOpener func(ctx context.Context, name string) (r io.ReaderAt, size int64, err error)

// OpenShard implements [Opener].
func (f ReaderAtOpener) OpenShard(ctx context.Context, name string) (safetensors.Source, error) {
	r, size, err := f(ctx, name)
	if err != nil {
		return nil, err
	}
	rd, err := safetensors.NewReader(r, size, safetensors.WithName(name))
	if err != nil {
		if c, ok := r.(io.Closer); ok {
			c.Close()
		}
		return nil, err
	}
	if c, ok := r.(io.Closer); ok {
		return &closingReader{Reader: rd, c: c}, nil
	}
	return rd, nil
}

type closingReader struct {
	*safetensors.Reader
	c io.Closer
}

func (r *closingReader) Close() error { return r.c.Close() }

// DirOpener opens shards in one local directory. Shards are opened through
// an [os.Root], so a shard that is a symbolic link to a file outside the
// directory (or ".." in any form) is refused by the operating system's own
// path resolution, and the file that is mapped is the very file that was
// checked: no race between check and use.
type DirOpener struct {
	root *os.Root
	dir  string // the directory shards are named relative to, for errors
	sub  string // dir relative to the root ("" or "snapshots/REV")
}

// NewDirOpener returns an opener for the shards in dir. In a Hugging Face
// cache snapshot (…/models--ORG--NAME/snapshots/REV, or a folder of it), whose files are
// symbolic links into the repository's blobs/ folder, the root is the
// repository folder, so those links are followed and nothing outside it.
// Close the opener when done.
func NewDirOpener(dir string) (*DirOpener, error) {
	rootDir, sub := dir, ""
	// The snapshot may be an ancestor: a subfolder of a repository.
	for d := filepath.Clean(dir); ; {
		snaps := filepath.Dir(d)
		repo := filepath.Dir(snaps)
		if filepath.Base(snaps) == "snapshots" && isHubCacheRepo(filepath.Base(repo)) {
			if rel, err := filepath.Rel(repo, filepath.Clean(dir)); err == nil {
				rootDir, sub = repo, rel
			}
			break
		}
		if snaps == d {
			break
		}
		d = snaps
	}
	root, err := os.OpenRoot(rootDir)
	if err != nil {
		return nil, err
	}
	return &DirOpener{root: root, dir: dir, sub: sub}, nil
}

func isHubCacheRepo(base string) bool {
	for _, p := range []string{"models--", "datasets--", "spaces--"} {
		if strings.HasPrefix(base, p) {
			return true
		}
	}
	return false
}

// Close releases the directory handle.
func (d *DirOpener) Close() error { return d.root.Close() }

// path is the name of a file of the directory, for messages.
func (d *DirOpener) path(name string) string { return filepath.Join(d.dir, name) }

// open opens a plain file name of the directory through the root.
func (d *DirOpener) open(name string) (*os.File, error) {
	if err := CheckShardName(name); err != nil {
		return nil, err
	}
	rel := filepath.Join(d.sub, name)
	escapes := func(err error) error {
		var pe *fs.PathError
		if errors.As(err, &pe) && !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, fs.ErrPermission) && strings.Contains(pe.Err.Error(), "escapes") {
			return fmt.Errorf("%w: %s leads outside %s (a symbolic link?): %v", ErrUnsafeName, d.path(name), d.dir, pe.Err)
		}
		return err
	}
	// Stat first: opening a FIFO would wait for a writer forever.
	st, err := d.root.Stat(rel)
	if err != nil {
		return nil, escapes(err)
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%w: %s is not a regular file (%s)", ErrUnsafeName, d.path(name), st.Mode().Type())
	}
	f, err := d.root.Open(rel)
	if err != nil {
		return nil, escapes(err)
	}
	return f, nil
}

// OpenFile opens a plain file name of the directory read-only, through
// the root: a name that leads outside the directory (a symbolic link out
// of it, "..") or that is not a regular file is an [ErrUnsafeName] error.
// Openers that read other formats than safetensors (package source reads
// checkpoints) open their shards with it.
func (d *DirOpener) OpenFile(name string) (*os.File, error) { return d.open(name) }

// OpenShard opens the named shard read-only and maps it into memory where
// the platform allows it.
func (d *DirOpener) OpenShard(ctx context.Context, name string) (safetensors.Source, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	f, err := d.open(name)
	if err != nil {
		return nil, err
	}
	return openLocal(f, d.path(name))
}

// localShard is a shard in a local file: a mapped [safetensors.File] (or a
// pread Reader) for tensors, and the file itself, for copying its bytes to
// another file inside the kernel (copy_file_range) and for verifying with
// pread.
type localShard struct {
	safetensors.Source
	f *os.File
}

// openLocal takes ownership of f. The mapping is made from f itself, not
// from a path that might since name another file.
func openLocal(f *os.File, display string) (*localShard, error) {
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if !st.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("%w: %s is not a regular file (%s)", ErrUnsafeName, display, st.Mode().Type())
	}
	var src safetensors.Source
	if runtime.GOOS == "linux" {
		// /proc/self/fd/N reopens the same inode, whatever its directory
		// entry now points to.
		if sf, err := safetensors.Open(fmt.Sprintf("/proc/self/fd/%d", f.Fd()), safetensors.WithName(display)); err == nil {
			src = sf
		} else if !errors.Is(err, fs.ErrNotExist) {
			f.Close()
			return nil, err
		}
	}
	if src == nil {
		r, err := safetensors.NewReader(f, st.Size(), safetensors.WithName(display))
		if err != nil {
			f.Close()
			return nil, err
		}
		src = r
	}
	return &localShard{Source: src, f: f}, nil
}

// TensorFile implements [FileBacked].
func (s *localShard) TensorFile(name string) (*os.File, int64, bool) {
	t, err := s.Tensor(name)
	if err != nil || t.Offset() < 0 {
		return nil, 0, false
	}
	return s.f, t.Offset(), true
}

// Close closes the mapping and the file.
func (s *localShard) Close() error {
	err := s.Source.Close()
	if cerr := s.f.Close(); err == nil {
		err = cerr
	}
	return err
}
