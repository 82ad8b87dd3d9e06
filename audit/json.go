package audit

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
)

// ReportWriter writes reports one at a time as the JSON array `scan
// --json` or `validate --json` prints, byte for byte, so that an audit of
// a million files is printed without holding a million reports: "[", the
// elements indented by two spaces, "]" and a newline. The array is
// complete only after Close.
type ReportWriter[R any] struct {
	w          io.Writer
	n          int
	escapeHTML bool
	err        error
	buf        bytes.Buffer
}

// NewScanWriter returns a writer of the array `scan --json` prints.
func NewScanWriter(w io.Writer) *ReportWriter[*ScanReport] {
	return &ReportWriter[*ScanReport]{w: w, escapeHTML: true}
}

// NewValidateWriter returns a writer of the array `validate --json`
// prints.
func NewValidateWriter(w io.Writer) *ReportWriter[*ValidateReport] {
	return &ReportWriter[*ValidateReport]{w: w}
}

// Write writes one element.
func (a *ReportWriter[R]) Write(r R) error {
	if a.err != nil {
		return a.err
	}
	a.buf.Reset()
	if a.n == 0 {
		a.buf.WriteString("[\n  ")
	} else {
		a.buf.WriteString(",\n  ")
	}
	enc := json.NewEncoder(&a.buf)
	enc.SetEscapeHTML(a.escapeHTML)
	enc.SetIndent("  ", "  ")
	if err := enc.Encode(r); err != nil {
		a.err = err
		return err
	}
	a.buf.Truncate(a.buf.Len() - 1) // Encode's newline
	a.n++
	_, a.err = a.w.Write(a.buf.Bytes())
	return a.err
}

// Close ends the array ("[]" if nothing was written) with a newline.
func (a *ReportWriter[R]) Close() error {
	if a.err != nil {
		return a.err
	}
	end := "\n]\n"
	if a.n == 0 {
		end = "[]\n"
	}
	_, a.err = io.WriteString(a.w, end)
	if a.err == nil {
		a.err = errClosed
	}
	return nil
}

var errClosed = errors.New("audit: ReportWriter is closed")
