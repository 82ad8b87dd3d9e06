//go:build !unix

package safetensors

import "os"

// mapFile does not map on this platform: tensors are read with pread.
func mapFile(f *os.File, size int64) ([]byte, error) { return nil, nil }

func unmapFile(b []byte) error { return nil }
