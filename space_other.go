//go:build !unix

package safetensors

import "os"

func checkSpace(f *os.File, size int64) error { return nil }
