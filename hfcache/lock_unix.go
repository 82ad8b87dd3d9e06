//go:build unix

package hfcache

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"
)

// Lock takes the lock huggingface_hub takes while it writes the blob etag
// (an exclusive flock(2) on .locks/<repo folder>/<etag>.lock, as Python's
// filelock does), waiting for another writer (another download, or
// huggingface_hub itself) to finish, until ctx is done. Call unlock when
// the blob is in place.
func (r *Repo) Lock(ctx context.Context, etag string) (unlock func(), err error) {
	p, err := r.LockPath(etag)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o777); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE, 0o664)
	if err != nil {
		return nil, err
	}
	for wait := time.Millisecond; ; wait = min(2*wait, 100*time.Millisecond) {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			return func() {
				unix.Flock(int(f.Fd()), unix.LOCK_UN)
				f.Close()
			}, nil
		}
		if !errors.Is(err, unix.EWOULDBLOCK) && !errors.Is(err, unix.EINTR) {
			f.Close()
			return nil, &os.PathError{Op: "flock", Path: p, Err: err}
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			f.Close()
			return nil, context.Cause(ctx)
		case <-t.C:
		}
	}
}
