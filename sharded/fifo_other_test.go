//go:build !unix

package sharded

import "errors"

func mkfifo(string) error { return errors.New("no FIFOs here") }
