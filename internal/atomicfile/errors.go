package atomicfile

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"syscall"
)

// Write writes to the temporary file; an error names the destination,
// never the temporary name (see explain).
func (f *File) Write(p []byte) (int, error) {
	n, err := f.File.Write(p)
	return n, f.explain(err)
}

// WriteAt is Write at an offset.
func (f *File) WriteAt(p []byte, off int64) (int, error) {
	n, err := f.File.WriteAt(p, off)
	return n, f.explain(err)
}

// ReadFrom copies r into the file (inside the kernel where the OS can);
// errors as Write's.
func (f *File) ReadFrom(r io.Reader) (int64, error) {
	n, err := f.File.ReadFrom(r)
	return n, f.explain(err)
}

// explain rewrites an error of the temporary file in terms of the
// destination: the temporary name means nothing to a user (and is gone once
// the write fails). EFAULT on a write means the bytes written could not be
// read, which for this project is a memory-mapped input that shrank while
// it was copied.
func (f *File) explain(err error) error {
	if err == nil {
		return nil
	}
	var pe *fs.PathError
	if errors.As(err, &pe) && pe.Path == f.File.Name() {
		inner := pe.Err
		if errors.Is(inner, syscall.EFAULT) {
			inner = fmt.Errorf("the data to write could not be read (an input file truncated or replaced while open?): %w", inner)
		}
		return &fs.PathError{Op: pe.Op, Path: f.path, Err: inner}
	}
	return err
}
