package download

import (
	"fmt"
	"os"
	"path/filepath"
)

// openRead opens a regular file for reading; anything else (a FIFO, a
// device) is refused before it could block.
func openRead(path string) (*os.File, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: not a regular file (%s)", path, st.Mode())
	}
	return os.Open(path)
}

// syncDir makes a rename in dir durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil && !os.IsPermission(err) {
		return fmt.Errorf("syncing directory %s: %w", dir, err)
	}
	return nil
}

// regularSize returns the size of the regular file at path, or -1 if
// there is none.
func regularSize(path string) int64 {
	st, err := os.Stat(path)
	if err != nil || !st.Mode().IsRegular() {
		return -1
	}
	return st.Size()
}

func mkdirFor(path string) error { return os.MkdirAll(filepath.Dir(path), 0o777) }
