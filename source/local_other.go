//go:build !unix

package source

import "os"

// openNoBlock opens path for reading; elsewhere than unix a FIFO cannot be
// opened by name like this, so a plain open is enough.
func openNoBlock(path string) (*os.File, error) { return os.Open(path) }
