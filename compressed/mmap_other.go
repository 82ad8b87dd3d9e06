//go:build !unix

package compressed

import "os"

// mapFile does not map on this platform: frames are read with pread.
func mapFile(f *os.File, size int64) []byte { return nil }

func unmapFile(b []byte) {}
