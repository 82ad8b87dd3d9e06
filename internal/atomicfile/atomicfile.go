// Package atomicfile writes a file so that readers see either the old
// content or the complete new content, never a partial file: data goes to a
// temporary file in the destination's directory, which is synced and then
// renamed over the destination.
//
// Nothing is registered globally: a caller interrupted (its context
// cancelled) aborts what it was writing, `defer f.Abort()` being the usual
// pattern, so a cancelled command leaves nothing behind.
package atomicfile

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// File is a pending output file. Write to it, then Commit or Abort.
type File struct {
	*os.File
	path   string
	done   bool
	direct bool // writing straight into a FIFO, a device or a terminal
}

// Create starts writing path. The temporary file is created with mode 0666
// so that the process umask decides the final permissions, as os.Create does.
//
// A destination that exists and is not a regular file (a FIFO, a device
// such as /dev/stdout or /dev/null, possibly through a symlink) cannot be
// replaced atomically and must not be replaced at all: it is opened and
// written directly, and Commit only closes it.
func Create(path string) (*File, error) {
	if st, err := os.Stat(path); err == nil && !st.Mode().IsRegular() {
		if st.IsDir() {
			return nil, &fs.PathError{Op: "create", Path: path, Err: errors.New("is a directory")}
		}
		f, err := os.OpenFile(path, os.O_WRONLY, 0)
		if err != nil {
			return nil, err
		}
		return &File{File: f, path: path, direct: true}, nil
	}
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	for range 100 {
		var r [6]byte
		if _, err := rand.Read(r[:]); err != nil {
			return nil, err
		}
		tmp := filepath.Join(dir, "."+base+".tmp-"+hex.EncodeToString(r[:]))
		f, err := os.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o666)
		if errors.Is(err, os.ErrExist) {
			continue
		}
		if err != nil {
			return nil, createError(path, dir, err)
		}
		return &File{File: f, path: path}, nil
	}
	return nil, errors.New("atomicfile: could not create a temporary file in " + dir)
}

// createError explains a failure to create the temporary file in terms of
// the destination, never the temporary name.
func createError(path, dir string, err error) error {
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return &fs.PathError{Op: "create", Path: path, Err: fmt.Errorf("directory %s does not exist: %w", dir, fs.ErrNotExist)}
	case errors.Is(err, fs.ErrPermission):
		return &fs.PathError{Op: "create", Path: path, Err: fmt.Errorf("no permission to write in directory %s: %w", dir, fs.ErrPermission)}
	}
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return &fs.PathError{Op: "create", Path: path, Err: pe.Err}
	}
	return &fs.PathError{Op: "create", Path: path, Err: err}
}

// Path returns the destination path.
func (f *File) Path() string { return f.path }

// Commit syncs the data, closes the file and renames it over the destination.
// On failure the temporary file is removed and the destination is untouched.
func (f *File) Commit() error { return f.CommitAfter(nil) }

// CommitAfter syncs the file to disk while check (if not nil) runs; check
// may read the file through f.File meanwhile. It then renames the file over
// the destination if both succeeded. For a destination written directly
// (see Create) it only closes the file. If either fails the temporary file is removed and the
// destination is untouched; check's error is returned first.
func (f *File) CommitAfter(check func() error) error {
	if f.done {
		return os.ErrClosed
	}
	if f.direct {
		// What went into a pipe or a device cannot be read back: check
		// is not run.
		f.done = true
		return f.File.Close()
	}
	synced := make(chan error, 1)
	go func() { synced <- f.File.Sync() }()
	var cerr error
	if check != nil {
		cerr = check()
	}
	serr := <-synced
	if cerr == nil {
		cerr = serr
	}
	if cerr != nil {
		f.Abort()
		return cerr
	}
	f.done = true
	tmp := f.File.Name()
	err := f.File.Close()
	if err == nil {
		err = os.Rename(tmp, f.path)
	}
	if err != nil {
		os.Remove(tmp)
		return err
	}
	syncDir(filepath.Dir(f.path))
	return nil
}

// Abort discards the temporary file. It is safe to call after Commit, where
// it does nothing, so `defer f.Abort()` is the usual pattern.
func (f *File) Abort() error {
	if f.done {
		return nil
	}
	f.done = true
	if f.direct {
		return f.File.Close()
	}
	tmp := f.File.Name()
	f.File.Close()
	return os.Remove(tmp)
}

// Direct reports whether the destination is written in place because it
// is not a regular file (see Create).
func (f *File) Direct() bool { return f.direct }

// syncDir makes the rename durable where the platform allows it.
func syncDir(dir string) {
	d, err := os.Open(dir)
	if err != nil {
		return
	}
	d.Sync()
	d.Close()
}

// CommitAll commits files as one group: each is synced and closed, then all
// are renamed over their destinations, in order (a caller cancelled
// meanwhile finishes the group: cancellation is seen between writes, not
// between renames); each directory is synced once at the end. before, if not nil, is called before
// each rename (tests use it to inspect what a crash there would leave). On
// an error the files not yet renamed are removed, and the destinations
// already renamed in this call are removed too: a failed group leaves
// nothing new behind (what they replaced is gone). Files written directly
// (see Create) are only closed.
func CommitAll(files []*File, before func(path string)) error {
	var err error
	for _, f := range files {
		if f.done {
			err = os.ErrClosed
			break
		}
		if f.direct {
			continue
		}
		if err = f.File.Sync(); err != nil {
			break
		}
	}
	if err != nil {
		abortAll(files)
		return err
	}
	var renamed []string
	dirs := map[string]bool{}
	for _, f := range files {
		if f.direct {
			f.done = true
			f.File.Close()
			continue
		}
		if before != nil {
			before(f.path)
		}
		tmp := f.File.Name()
		if err = f.File.Close(); err == nil {
			err = os.Rename(tmp, f.path)
		}
		if err != nil {
			err = fmt.Errorf("%s: %w", f.path, err)
			break
		}
		f.done = true
		renamed = append(renamed, f.path)
		dirs[filepath.Dir(f.path)] = true
	}
	if err != nil {
		for _, p := range renamed {
			os.Remove(p)
		}
		abortAll(files)
		return err
	}
	for d := range dirs {
		syncDir(d)
	}
	return nil
}

// abortAll aborts every file not yet committed.
func abortAll(files []*File) {
	for _, f := range files {
		f.Abort()
	}
}
