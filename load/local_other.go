//go:build !linux

package load

import "os"

// localFile is a local file read with pread only (O_DIRECT and mincore are
// used on Linux).
type localFile struct{ *os.File }

func openLocal(f *os.File, chunk int64) *localFile { return &localFile{f} }

func (l *localFile) Close() error { return nil } // the file is the model's
