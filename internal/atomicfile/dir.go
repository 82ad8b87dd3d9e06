package atomicfile

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
)

// Dirs are directories MkdirAll created for an output that is not yet
// committed: Undo (and RemoveTemporary, when a signal interrupts the
// command) removes those still empty, so a failed command leaves no empty
// directory behind; Keep makes them permanent.
type Dirs struct {
	created []string // deepest first
}

// liveDirs holds the Dirs not yet kept or undone, for RemoveTemporary.
var liveDirs = map[*Dirs]bool{}

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
	liveMu.Lock()
	if shutdown {
		liveMu.Unlock()
		return nil, errors.New("atomicfile: the process is exiting")
	}
	liveDirs[d] = true
	liveMu.Unlock()
	if err := os.MkdirAll(dir, 0o777); err != nil {
		d.Undo()
		return nil, err
	}
	return d, nil
}

// Keep makes the created directories permanent.
func (d *Dirs) Keep() {
	liveMu.Lock()
	delete(liveDirs, d)
	liveMu.Unlock()
}

// Undo removes the created directories that are empty.
func (d *Dirs) Undo() {
	liveMu.Lock()
	defer liveMu.Unlock()
	d.removeLocked()
}

func (d *Dirs) removeLocked() {
	if !liveDirs[d] {
		return
	}
	delete(liveDirs, d)
	for _, p := range d.created {
		os.Remove(p) // fails, as it should, if anything is in it
	}
}
