//go:build !unix

package hfcache

import "context"

// Lock is a no-op where flock(2) does not exist: blobs are still written
// to a temporary name and renamed into place, so a race costs duplicated
// bandwidth, never a mixed file.
func (r *Repo) Lock(ctx context.Context, etag string) (unlock func(), err error) {
	if _, err := r.LockPath(etag); err != nil {
		return nil, err
	}
	return func() {}, nil
}
