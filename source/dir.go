package source

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/gosafetensors/safetensors/sharded"
)

// openDir opens the model in a local directory: the file [PickModel]
// chooses among its entries, read by its content. Every file is opened
// through a sharded.DirOpener, so nothing outside the directory is read (in
// a Hugging Face cache snapshot, links into the repository's blobs are
// followed, and nothing else).
func openDir(ctx context.Context, dir string, c *config) (*Model, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, &IOError{Location: dir, Op: "list", Err: err}
	}
	var names []string
	for _, e := range ents {
		if e.Type().IsRegular() || e.Type()&fs.ModeSymlink != 0 {
			names = append(names, e.Name())
		}
	}
	name, err := PickModel(dir, names)
	if err != nil {
		return nil, err
	}
	d, err := sharded.NewDirOpener(dir)
	if err != nil {
		return nil, &IOError{Location: dir, Op: "open", Err: err}
	}
	o, err := dirObject(d, dir, name)
	if err != nil {
		d.Close()
		return nil, err
	}
	m, err := o.model(ctx, c)
	if err != nil {
		o.Close()
		d.Close()
		return nil, err
	}
	m.Name = dir
	m.closers = append(m.closers, d)
	return m, nil
}

// dirObject opens the file name of the directory d (dir for messages) as
// an object whose siblings are opened through d too.
func dirObject(d *sharded.DirOpener, dir, name string) (*Object, error) {
	path := filepath.Join(dir, name)
	f, err := d.OpenFile(name)
	if err != nil {
		if errors.Is(err, sharded.ErrUnsafeName) {
			return nil, err // what the name leads to is wrong, not the disk
		}
		return nil, &IOError{Location: path, Op: "open", Err: err}
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, &IOError{Location: path, Op: "open", Err: err}
	}
	o, err := newObject(path, f, st.Size(), f)
	if err != nil {
		f.Close()
		return nil, err
	}
	o.file, o.dir = f, d
	o.sibling = func(ctx context.Context, rel string) (*Object, error) { return dirObject(d, dir, rel) }
	return o, nil
}
