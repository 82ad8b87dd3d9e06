package main

import (
	"io"
	"time"

	"github.com/gosafetensors/safetensors/remote"
	"github.com/gosafetensors/safetensors/remote/blobstore"
	"github.com/gosafetensors/safetensors/source"
)

// showReading shows, on a terminal, the bytes a remote object has moved
// while a long step reads it (a checkpoint's directory and pickles before
// its conversion starts), from the first second; stop erases the line. For
// a local object, or off a terminal, it shows nothing.
func showReading(stderr io.Writer, label string, o *source.Object) (stop func()) {
	moved := remoteBytes(o)
	if moved == nil {
		return func() {}
	}
	bar := newProgress(stderr, label, -1)
	if bar == nil {
		return func() {}
	}
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				bar.update(moved())
			}
		}
	}()
	return func() {
		close(done)
		<-finished
		bar.done()
	}
}

// remoteBytes returns how to read the bytes a remote object has received
// so far, or nil for a local one.
func remoteBytes(o *source.Object) func() int64 {
	switch r := o.ReaderAt().(type) {
	case *remote.File:
		return func() int64 { return r.Stats().Bytes }
	case *blobstore.Object:
		return func() int64 { return r.Stats().Bytes }
	}
	return nil
}
