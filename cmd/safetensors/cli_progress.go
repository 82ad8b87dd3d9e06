package main

import (
	"fmt"
	"io"
	"os"
	"time"

	"golang.org/x/term"
)

// progress reports how far a long job got, on stderr, only when stderr is a
// terminal: a redirected log gets no progress lines.
type progress struct {
	w     io.Writer
	label string
	total int64
	last  time.Time
	shown bool
}

func newProgress(stderr io.Writer, label string, total int64) *progress {
	f, ok := stderr.(*os.File)
	if !ok || !term.IsTerminal(int(f.Fd())) {
		return nil
	}
	return &progress{w: stderr, label: label, total: total, last: time.Now()}
}

// update shows done of total, at most five times a second.
func (p *progress) update(done int64) {
	if p == nil || p.total <= 0 || time.Since(p.last) < 200*time.Millisecond {
		return
	}
	p.last = time.Now()
	p.shown = true
	fmt.Fprintf(p.w, "\r\033[K%s  %3.0f%% of %s", p.label, 100*float64(done)/float64(p.total), humanBytes(p.total))
}

// done erases the progress line.
func (p *progress) done() {
	if p != nil && p.shown {
		fmt.Fprint(p.w, "\r\033[K")
	}
}
