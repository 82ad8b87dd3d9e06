// Package atomicfile writes a file so that readers see either the old
// content or the complete new content, never a partial file: data goes to a
// temporary file in the destination's directory, which is synced and then
// renamed over the destination.
package atomicfile

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
)

// File is a pending output file. Write to it, then Commit or Abort.
type File struct {
	*os.File
	path string
	done bool
}

// Create starts writing path. The temporary file is created with mode 0666
// so that the process umask decides the final permissions, as os.Create does.
func Create(path string) (*File, error) {
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
			return nil, err
		}
		return &File{File: f, path: path}, nil
	}
	return nil, errors.New("atomicfile: could not create a temporary file in " + dir)
}

// Path returns the destination path.
func (f *File) Path() string { return f.path }

// Commit syncs the data, closes the file and renames it over the destination.
// On failure the temporary file is removed and the destination is untouched.
func (f *File) Commit() error { return f.CommitAfter(nil) }

// CommitAfter syncs the file to disk while check (if not nil) runs; check
// may read the file through f.File meanwhile. It then renames the file over
// the destination if both succeeded. If either fails the temporary file is removed and the
// destination is untouched; check's error is returned first.
func (f *File) CommitAfter(check func() error) error {
	if f.done {
		return os.ErrClosed
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
	tmp := f.File.Name()
	f.File.Close()
	return os.Remove(tmp)
}

// syncDir makes the rename durable where the platform allows it.
func syncDir(dir string) {
	d, err := os.Open(dir)
	if err != nil {
		return
	}
	d.Sync()
	d.Close()
}
