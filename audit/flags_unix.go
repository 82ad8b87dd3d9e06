//go:build unix

package audit

import "syscall"

// openFlags keep opening a FIFO that has no writer from blocking
// (O_NONBLOCK has no effect on regular files).
const openFlags = syscall.O_NONBLOCK
