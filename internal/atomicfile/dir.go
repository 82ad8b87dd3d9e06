package atomicfile

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
)

// Dirs are directories MkdirAll created for an output that is not yet
// committed: Undo removes those still empty, so a failed or cancelled
// command leaves no empty directory behind; Keep makes them permanent.
type Dirs struct {
	created []string // deepest first
	done    bool
}

// MkdirAll creates dir and its missing parents, like os.MkdirAll, and
// remembers which it created.
func MkdirAll(dir string) (*Dirs, error) {
	d := &Dirs{}
	for p := filepath.Clean(dir); ; p = filepath.Dir(p) {
		if _, err := os.Lstat(p); err == nil || !errors.Is(err, fs.ErrNotExist) {
			break
		}
		d.created = append(d.created, p)
		if filepath.Dir(p) == p {
			break
		}
	}
	if err := os.MkdirAll(dir, 0o777); err != nil {
		d.Undo()
		return nil, err
	}
	return d, nil
}

// Keep makes the created directories permanent.
func (d *Dirs) Keep() { d.done = true }

// Undo removes the created directories that are empty; after Keep it does
// nothing, so `defer d.Undo()` is the usual pattern.
func (d *Dirs) Undo() {
	if d.done {
		return
	}
	d.done = true
	for _, p := range d.created {
		os.Remove(p) // fails, as it should, if anything is in it
	}
}
