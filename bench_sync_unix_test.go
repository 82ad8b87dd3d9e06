//go:build unix

package safetensors_test

import "syscall"

// flushDirtyPages writes every dirty page to disk, between benchmark runs.
func flushDirtyPages() { syscall.Sync() }
