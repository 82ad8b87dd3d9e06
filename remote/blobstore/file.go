package blobstore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"path"
	"slices"
	"strings"

	"github.com/gosafetensors/safetensors/remote/blobstore/internal/driver"
)

// The file driver serves file:///DIR URLs: DIR is the bucket, opened as an
// os.Root (no key escapes it, by ".." or by a symbolic link), keys are
// slash-separated paths below it. Files carry no version: their size and
// modification time are checked on every read.
func init() { driver.Register("file", openFileBucket) }

type fileBucket struct{ root *os.Root }

func openFileBucket(_ context.Context, u *url.URL, _ driver.Config) (driver.Bucket, error) {
	if u.RawQuery != "" {
		return nil, fmt.Errorf("file:// URLs take no query parameters")
	}
	r, err := os.OpenRoot(u.Path)
	if err != nil {
		return nil, err
	}
	return &fileBucket{root: r}, nil
}

func (b *fileBucket) Close() error { return b.root.Close() }

func (b *fileBucket) NewRangeReader(_ context.Context, key string, off, n int64, _ string) (*driver.Reader, error) {
	f, err := b.root.Open(key)
	if err != nil {
		return nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if !st.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("%s: not a regular file (%v)", key, st.Mode().Type())
	}
	size := st.Size()
	if off > size {
		off = size
	}
	if n < 0 || n > size-off {
		n = size - off
	}
	return &driver.Reader{Body: &fileBody{io.NewSectionReader(f, off, n), f}, Size: size, ModTime: st.ModTime()}, nil
}

// WriteObject writes data to a temporary file beside key (created
// exclusively, inside the root), syncs it, renames it over key and syncs
// the directory: a reader sees the old file or the new one, and after a
// crash the new one is there once WriteObject has returned.
func (b *fileBucket) WriteObject(ctx context.Context, key string, data []byte) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	dir, base := path.Split(key)
	if base == "" {
		return writeError(key, errors.New("a key ending in '/' names a directory"))
	}
	if dir = strings.TrimSuffix(dir, "/"); dir == "" {
		dir = "."
	}
	var r [8]byte
	if _, err := rand.Read(r[:]); err != nil {
		return writeError(key, err)
	}
	tmp := path.Join(dir, "."+base+".tmp-"+hex.EncodeToString(r[:]))
	f, err := b.root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o666)
	if err != nil {
		return writeError(key, err)
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = b.root.Rename(tmp, key)
	}
	if err != nil {
		_ = b.root.Remove(tmp)
		return writeError(key, err)
	}
	d, err := b.root.Open(dir)
	if err == nil {
		err = d.Sync() // the rename made durable
		d.Close()
	}
	if err != nil {
		return writeError(key, err)
	}
	return nil
}

type fileBody struct {
	*io.SectionReader
	f *os.File
}

func (b *fileBody) Close() error { return b.f.Close() }

// ListPage walks the tree in key order: a directory's entries are sorted by
// the key they start (a directory name followed by '/'), so "a-b" comes
// before "a/c", as stores order keys. Subtrees wholly before the token or
// outside the prefix are not read.
func (b *fileBucket) ListPage(ctx context.Context, prefix, token string, pageSize int) (driver.Page, error) {
	var page driver.Page
	errFull := errors.New("page full")
	var walk func(dir string) error
	walk = func(dir string) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		name := strings.TrimSuffix(dir, "/")
		if name == "" {
			name = "."
		}
		entries, err := fs.ReadDir(b.root.FS(), name)
		if err != nil {
			return err
		}
		type entry struct {
			key string
			de  fs.DirEntry
		}
		keys := make([]entry, 0, len(entries))
		for _, de := range entries {
			k := dir + de.Name()
			if de.IsDir() {
				k += "/"
			}
			keys = append(keys, entry{k, de})
		}
		slices.SortFunc(keys, func(a, b entry) int { return strings.Compare(a.key, b.key) })
		for _, e := range keys {
			if !strings.HasPrefix(e.key, prefix) && !(e.de.IsDir() && strings.HasPrefix(prefix, e.key)) {
				continue
			}
			if e.de.IsDir() {
				if token != "" && e.key <= token && !strings.HasPrefix(token, e.key) {
					continue // every key below is before the token
				}
				if err := walk(e.key); err != nil {
					return err
				}
				continue
			}
			if token != "" && e.key <= token {
				continue
			}
			if len(page.Objects) == pageSize {
				page.Next = page.Objects[len(page.Objects)-1].Key
				return errFull
			}
			o := driver.Object{Key: e.key}
			info, err := e.de.Info()
			switch {
			case err != nil:
				o.Err = err
			case !info.Mode().IsRegular():
				o.Err = fmt.Errorf("not a regular file (%v)", info.Mode().Type())
			default:
				o.Size, o.ModTime = info.Size(), info.ModTime()
			}
			page.Objects = append(page.Objects, o)
		}
		return nil
	}
	if err := walk(""); err != nil && err != errFull {
		return driver.Page{}, err
	}
	return page, nil
}
