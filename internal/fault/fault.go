// Package fault turns the memory fault of reading a memory-mapped file that
// shrank underneath (SIGBUS on Linux) into an error, so that a file
// truncated while a command reads it fails that read instead of crashing
// the process.
package fault

import (
	"errors"
	"fmt"
	"runtime/debug"
	"syscall"
	"unsafe"
)

// ErrFault is wrapped by the error [Catch] returns for a memory fault. The
// error also wraps syscall.EIO: it is a failure to read, not a verdict on
// bytes that were read.
var ErrFault = errors.New("memory fault reading a mapped file (was it truncated or replaced while open?)")

// Catch runs f on the calling goroutine with memory faults turned into
// panics, and returns such a fault as an error wrapping [ErrFault]. Other
// panics are not recovered. Mapped memory read on other goroutines needs
// its own Catch.
func Catch(f func() error) (err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			fe, ok := r.(interface{ Addr() uintptr })
			if !ok {
				panic(r)
			}
			err = Error(fe.Addr())
		}
	}()
	return f()
}

// Error returns the error for a memory fault at addr: it wraps [ErrFault]
// and syscall.EIO.
func Error(addr uintptr) error {
	return fmt.Errorf("%w: %w at address %#x", ErrFault, syscall.EIO, addr)
}

// CatchIn is Catch for faults inside mem only (a mapping f reads, perhaps
// through a writer it does not own): a fault at an address outside mem is
// not a shrunken file's and is re-raised.
func CatchIn(mem []byte, f func() error) (err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			fe, ok := r.(interface{ Addr() uintptr })
			if !ok || len(mem) == 0 {
				panic(r)
			}
			lo := uintptr(unsafe.Pointer(unsafe.SliceData(mem)))
			if a := fe.Addr(); a < lo || a-lo >= uintptr(len(mem)) {
				panic(r)
			}
			err = Error(fe.Addr())
		}
	}()
	return f()
}

// Copy is copy(dst, src) for src in a mapping: a fault reading it is
// returned as an error wrapping [ErrFault], with the bytes copied before
// the fault's page unknown (n is then 0).
func Copy(dst, src []byte) (n int, err error) {
	err = CatchIn(src, func() error { n = copy(dst, src); return nil })
	if err != nil {
		n = 0
	}
	return n, err
}
