//go:build !linux

package download

import "os"

func preallocate(f *os.File, size int64) error { return f.Truncate(size) }

func datasync(f *os.File) error { return f.Sync() }

// openDirect: no O_DIRECT here; every write goes through the page cache.
func openDirect(string) *os.File { return nil }

func dropCache(*os.File, int64, int64) {}
