package audit

import (
	"context"
	"errors"
	"fmt"
	"io"
	"iter"

	"github.com/gosafetensors/safetensors/internal/bug"
	"github.com/gosafetensors/safetensors/internal/redact"
	"github.com/gosafetensors/safetensors/source"
	"github.com/gosafetensors/safetensors/torch"
)

// ScanReport is what a scan found in one file: one element of the array
// `scan --json` prints (see docs/json.md).
type ScanReport struct {
	Path    string  `json:"path"`
	Format  Format  `json:"format"`
	Verdict Verdict `json:"verdict"`
	// Globals lists every global reference in file order (duplicates
	// included, up to the scanner's cap; a not-allowed name is never
	// dropped).
	Globals          []Global `json:"globals"`
	DangerousOpcodes []Opcode `json:"dangerous_opcodes"`
	Problems         []string `json:"problems"`
	// UserAllowed lists the globals the file uses that are allowed only
	// because the caller allowed them (torch.WithAllow, scan --allow).
	UserAllowed []string `json:"user_allowed,omitempty"`
	// Error says why the file could not be checked; set only with verdict
	// Error.
	Error string `json:"error,omitempty"`
	// Err is the error behind Error, for errors.Is and errors.As (its
	// message is Error's).
	Err error `json:"-"`

	loc string // the location as given, secrets and all
}

// Global is one global a pickle references. Offset is the opcode's byte
// offset inside Entry (a zip member such as "archive/data.pkl", or
// "pickle N" for the Nth pickle of a stream).
type Global struct {
	Module  string        `json:"module"`
	Name    string        `json:"name"`
	Entry   string        `json:"entry"`
	Offset  int64         `json:"offset"`
	Verdict GlobalVerdict `json:"verdict"`
	Reason  string        `json:"reason,omitempty"`
}

// String returns module.name.
func (g Global) String() string { return g.Module + "." + g.Name }

// Opcode is an opcode that would run code in a real unpickler, and what it
// would call or build.
type Opcode struct {
	Opcode string `json:"opcode"`
	Entry  string `json:"entry"`
	Offset int64  `json:"offset"`
	Target string `json:"target,omitempty"`
}

// newScanReport starts the report on loc, whose path shows no secret
// (internal/redact: a URL's userinfo and secret query values).
func newScanReport(loc string) *ScanReport {
	return &ScanReport{Path: redact.Location(loc), Format: FormatUnknown, Globals: []Global{}, DangerousOpcodes: []Opcode{}, Problems: []string{}, loc: loc}
}

// problemLines spells an error as problems, one line each: a diagnosis
// (source.Hint) first, then the error without it; URLs as Path shows
// them.
func (r *ScanReport) problemLines(err error) []string {
	var ce *source.ContentError
	if errors.As(err, &ce) && ce.Hint != "" {
		return []string{"hint: " + ce.Hint, redact.Message(ce.Detail(), r.loc)}
	}
	return []string{redact.Message(err.Error(), r.loc)}
}

// fail makes r an error report; the message names the location as Path
// does and shows no secret of any URL in it.
func (r *ScanReport) fail(err error) *ScanReport {
	r.Err = redact.Error(err, r.loc)
	r.Verdict, r.Error = Error, r.Err.Error()
	return r
}

// Scan audits the files of loc (see [Targets]) and yields one report per
// file, in target order, each as soon as it and those before it are done;
// a few files ([WithConcurrency]) are checked at a time. A location that
// could not be listed or opened is reported with verdict Error, and so is
// a directory or bucket prefix that holds nothing to scan (an error
// wrapping source.ErrNoModel): a scan that read nothing is not clean. Stopping
// the iteration stops the work.
func Scan(ctx context.Context, loc string, opts ...Option) iter.Seq[*ScanReport] {
	c, err := buildConfig(opts)
	if err != nil {
		return func(yield func(*ScanReport) bool) { yield(newScanReport(loc).fail(err)) }
	}
	return func(yield func(*ScanReport) bool) {
		c, done := c.withPrefixPool(loc)
		defer done()
		n := 0
		for r := range pipeline(ctx, c, c.targets(ctx, loc, ScanCheck), func(ctx context.Context, t *Target, err error) *ScanReport {
			if err != nil {
				return newScanReport(t.Location).fail(err)
			}
			return c.scanTarget(ctx, t)
		}, func(err error) *ScanReport { return newScanReport(loc).fail(cutShort(loc, err)) }) {
			n++
			if !yield(r) {
				return
			}
		}
		if n == 0 && ctx.Err() == nil {
			// nothing was read that could be wrong: not a clean folder
			yield(newScanReport(loc).fail(fmt.Errorf("%w: %s holds no file torch.load or a safetensors reader would read (no checkpoint, pickle, tar, safetensors or compressed file)", source.ErrNoModel, loc)))
		}
	}
}

// cutShort says an audit of loc ended before every file was checked.
func cutShort(loc string, err error) error {
	return &source.IOError{Location: loc, Op: "list", Err: redact.Wrap(loc, "the audit stopped before every file was checked", err)}
}

// ScanTarget audits one target.
func ScanTarget(ctx context.Context, t Target, opts ...Option) *ScanReport {
	c, err := buildConfig(opts)
	if err != nil {
		t.Release()
		return newScanReport(t.Location).fail(err)
	}
	return c.scanTarget(ctx, &t)
}

func (c *config) scanTarget(ctx context.Context, t *Target) (r *ScanReport) {
	defer recoverScan(&r, t.Location)
	if err := ctx.Err(); err != nil {
		t.Release()
		return newScanReport(t.Location).fail(&source.IOError{Location: t.Location, Op: "open", Err: err})
	}
	o, err := t.open(ctx, c)
	if err != nil {
		return newScanReport(t.Location).fail(err)
	}
	defer o.Close()
	return c.scanObject(ctx, t.Location, o)
}

// ScanObject audits one opened file or object by its content, whatever
// its name; loc names it in the report.
func ScanObject(ctx context.Context, loc string, o *source.Object, opts ...Option) *ScanReport {
	c, err := buildConfig(opts)
	if err != nil {
		return newScanReport(loc).fail(err)
	}
	return c.scanObject(ctx, loc, o)
}

// ScanReader audits size bytes read from r (an upload spooled to disk,
// bytes in memory) by their content; name names them in the report. An
// index read this way has no shards beside it: it is checked as itself.
func ScanReader(ctx context.Context, name string, r io.ReaderAt, size int64, opts ...Option) (rep *ScanReport) {
	defer recoverScan(&rep, name)
	c, err := buildConfig(opts)
	if err != nil {
		return newScanReport(name).fail(err)
	}
	o, err := source.NewObject(name, r, size, nil, nil)
	if err != nil {
		return newScanReport(name).fail(err)
	}
	return c.scanObject(ctx, name, o)
}

// scanObject: a safetensors file is validated, an index checked to be a
// valid index, and every file (safetensors, compressed and index included)
// is judged as torch.load would judge it, for torch.load decides by
// content, whatever else the file is: a checkpoint is scanned in full
// (torch.Scan), any other format for what torch.load would still read of
// it (torch.ScanForeign: a tar archive in full, else the pickle torch
// unpickles from byte 0, which a safetensors file's header length can
// begin).
func (c *config) scanObject(ctx context.Context, loc string, o *source.Object) (r *ScanReport) {
	defer recoverScan(&r, loc)
	r = newScanReport(loc)
	loc = r.Path // as messages name it
	if o.Format == source.Directory {
		return r.fail(&source.IOError{Location: loc, Op: "open", Err: fmt.Errorf("%s: is a directory", loc)})
	}
	var rep *torch.ScanReport
	var modelErr error
	var readErr error // a read that failed part-way, as torch.Scan saw it
	switch o.Format {
	case source.Index:
		r.Format = FormatIndex
		if _, err := readIndex(o); err != nil {
			if source.IsIOError(err) {
				return r.fail(err)
			}
			r.Problems = append(r.Problems, r.problemLines(err)...)
		}
	case source.Safetensors, source.Compressed:
		r.Format = FormatSafetensors
		if o.Format == source.Compressed {
			r.Format = FormatCompressed
		}
		m, err := o.Model(ctx, c.source...)
		if err == nil {
			err = verifyContainer(ctx, m)
			m.Source.Close()
		}
		switch {
		case err == nil:
		case unjudged(err):
			return r.fail(err)
		default:
			modelErr = err
			r.Problems = append(r.Problems, r.problemLines(err)...)
		}
	default:
		if rep, readErr = torch.Scan(o, o.Size, loc, c.torch...); rep == nil {
			return r.fail(readErr)
		}
		r.Format = torchFormat(rep.Format)
	}
	if rep == nil {
		if rep, readErr = torch.ScanForeign(o, o.Size, loc, c.torch...); rep == nil {
			return r.fail(readErr)
		}
		if rep.Format == torch.FormatTar {
			r.Problems = append(r.Problems, "polyglot: this file is also a tar archive torch.load would read")
		}
	}
	// the diagnosis first ("an HTML page"), then what the decoders said
	if o.Hint != "" {
		r.Problems = append([]string{"hint: " + o.Hint}, r.Problems...)
	}
	r.Problems = append(r.Problems, rep.Problems...)
	for _, g := range rep.Globals {
		r.Globals = append(r.Globals, Global{Module: g.Module, Name: g.Name, Entry: g.Entry, Offset: g.Offset, Verdict: globalVerdict(g.Verdict), Reason: g.Reason})
	}
	for _, op := range rep.DangerousOpcodes {
		r.DangerousOpcodes = append(r.DangerousOpcodes, Opcode{Opcode: op.Opcode, Entry: op.Entry, Offset: op.Offset, Target: op.Target})
	}
	r.UserAllowed = rep.UserAllowed
	r.Verdict = verdictOf(rep.Verdict())
	if r.Verdict == Clean && (modelErr != nil || len(r.Problems) > 0) {
		r.Verdict = Invalid // a safetensors file that does not validate, a polyglot, a broken index
	}
	if ioErr := o.Err(); ioErr != nil {
		readErr = ioErr // the opener's error, typed
	}
	if readErr != nil && r.Verdict != Dangerous {
		// a read failed part-way: what was not read was not checked, and
		// what a decoder made of the missing bytes is no finding
		r.Globals, r.DangerousOpcodes, r.Problems = []Global{}, []Opcode{}, []string{}
		return r.fail(notEveryByte(loc, readErr))
	}
	return r
}

// recoverScan is deferred by every scan of one file: a panic (a bug) is
// reported as verdict Error with an error wrapping safetensors.ErrInternal,
// never as a verdict on the file, and never crashes the audit's other
// workers or a server.
func recoverScan(r **ScanReport, loc string) {
	if p := recover(); p != nil {
		*r = newScanReport(loc).fail(bug.Recovered("scanning "+redact.Location(loc), p))
	}
}

// unjudged reports whether err kept a file from being judged: an I/O
// error, a bug (a recovered panic), or a caller's bound on what one input
// may cost (header size, decompressed size).
func unjudged(err error) bool {
	return source.IsIOError(err) || errors.Is(err, bug.ErrInternal) || errors.Is(err, source.ErrHeaderLimit) ||
		errors.Is(err, source.ErrExpandedLimit)
}

// notEveryByte says a read of loc failed part-way, so that what was not
// read was not checked: an I/O error (source.IsIOError), whatever a
// decoder made of the short read.
func notEveryByte(loc string, ioErr error) error {
	return &source.IOError{Location: loc, Op: "read", Err: redact.Wrap(loc, "reading failed part-way, not every byte was checked", ioErr)}
}

func globalVerdict(s string) GlobalVerdict {
	switch s {
	case "allowed":
		return Allowed
	case "unsupported":
		return Inert
	}
	return NotAllowed
}

func verdictOf(s string) Verdict {
	switch s {
	case torch.VerdictClean:
		return Clean
	case torch.VerdictInvalid:
		return Invalid
	case torch.VerdictUnsupported:
		return Unsupported
	}
	return Dangerous
}
