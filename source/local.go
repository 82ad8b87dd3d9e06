package source

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
)

// openLocal opens a local path once. Anything but a regular file or a
// directory (a FIFO, a device, a socket) is refused before a byte is read:
// reading it could block forever or never end.
func openLocal(path string) (*Object, error) {
	f, err := openNoBlock(path)
	if err != nil {
		return nil, &IOError{Location: path, Op: "open", Err: err}
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, &IOError{Location: path, Op: "open", Err: err}
	}
	switch {
	case st.IsDir():
		f.Close()
		return &Object{Name: path, Format: Directory}, nil
	case !st.Mode().IsRegular():
		f.Close()
		return nil, &IOError{Location: path, Op: "open", Err: fmt.Errorf("%w (%s): save the stream to a file first", ErrNotRegular, modeName(st.Mode()))}
	}
	o, err := newObject(path, f, st.Size(), f)
	if err != nil {
		f.Close()
		return nil, err
	}
	o.file = f
	dir := filepath.Dir(path)
	o.sibling = func(ctx context.Context, rel string) (*Object, error) {
		return openLocal(filepath.Join(dir, rel))
	}
	return o, nil
}

func modeName(m os.FileMode) string {
	switch {
	case m&os.ModeNamedPipe != 0:
		return "a named pipe (FIFO)"
	case m&os.ModeCharDevice != 0:
		return "a character device"
	case m&os.ModeDevice != 0:
		return "a device"
	case m&os.ModeSocket != 0:
		return "a socket"
	}
	return "not a regular file: " + m.String()
}

// File returns the local file behind the object, or nil for a remote one.
func (o *Object) File() *os.File { return o.file }
