package main

import (
	"io"
	"os"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"
)

// progress shows a byte progress bar (amount, rate, time left) on stderr,
// only when stderr is a terminal: a redirected log gets no progress lines.
// A nil *progress is valid and shows nothing.
type progress struct {
	bar *progressbar.ProgressBar
}

func newProgress(stderr io.Writer, label string, total int64) *progress {
	f, ok := stderr.(*os.File)
	if !ok || !term.IsTerminal(int(f.Fd())) {
		return nil
	}
	bar := progressbar.NewOptions64(total,
		progressbar.OptionSetWriter(stderr),
		progressbar.OptionSetDescription(label),
		progressbar.OptionShowBytes(true),
		progressbar.OptionShowTotalBytes(true),
		progressbar.OptionSetWidth(30),
		progressbar.OptionThrottle(100_000_000), // 100 ms between redraws
		progressbar.OptionSetPredictTime(true),
		progressbar.OptionClearOnFinish(),
		progressbar.OptionUseANSICodes(true),
	)
	return &progress{bar: bar}
}

// setTotal changes the amount the bar counts to, for jobs that learn it late.
func (p *progress) setTotal(total int64) {
	if p != nil && total > 0 && total != p.bar.GetMax64() {
		p.bar.ChangeMax64(total)
	}
}

// update shows done of total.
func (p *progress) update(done int64) {
	if p == nil {
		return
	}
	p.bar.Set64(done)
}

// done erases the progress line, whether the job finished or was
// interrupted (Ctrl-C cancels it, then the command ends here): no bar is
// left on the line the shell's prompt or the next message comes to.
func (p *progress) done() {
	if p == nil {
		return
	}
	p.bar.Exit() // no more drawing, not even a full bar
	p.bar.Clear()
}

// terminalWidth is w's width when it is a terminal, else numpy's default
// line width.
func terminalWidth(w io.Writer) int {
	if u, ok := w.(interface{ Underlying() io.Writer }); ok {
		w = u.Underlying()
	}
	if f, ok := w.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		if cols, _, err := term.GetSize(int(f.Fd())); err == nil && cols > 20 {
			return cols
		}
	}
	return defaultLineWidth
}
