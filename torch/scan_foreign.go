package torch

import (
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/gosafetensors/safetensors/internal/bug"
	"github.com/gosafetensors/safetensors/torch/pickle"
	"github.com/gosafetensors/safetensors/torch/tarlist"
)

// ScanForeign audits a file that is another format (a safetensors file, a
// compressed container, a sharded model's index, any file) for what
// torch.load(weights_only=False) would still do with it, since torch.load
// decides by content too, whatever the file also is: a file that starts
// with a zip local header is read as a zip checkpoint, one whose first
// block Python's tarfile accepts as a tar checkpoint, and any other file
// as a legacy checkpoint, whose first step is to unpickle a pickle from
// byte 0 (the magic number) with the full unpickler.
//
// Zip and tar files are scanned as [Scan] scans them. Any other file is
// read as CPython reads it: its first pickle, decoded by the same inert
// machine as Scan (an opcode walker going on where decoding stops), up to
// where CPython's unpickler would raise (an unknown opcode, a stack
// underflow, a name find_class cannot import, an EXT code: torch registers
// no copyreg extension, a call or method of a value the pickle built itself
// (pickle.ErrRaises), a persistent id, the end of the data), and
// nothing after, for torch.load stops there; if that pickle decodes to
// torch's legacy magic number, the whole file is scanned as Scan does. A
// file whose first bytes do not get torch.load to import or call anything
// (the first bytes of nearly every safetensors, zstd or LZ4 file) has a
// clean report with no problems and Format FormatUnknown; one whose first
// bytes import or call something is reported with Format FormatPickle, the
// globals and opcodes found, and a problem saying it is a polyglot.
// Options and errors are Scan's.
func ScanForeign(r io.ReaderAt, size int64, name string, opts ...Option) (*ScanReport, error) {
	o, err := buildOptions(opts)
	if err != nil {
		return nil, err
	}
	rr := &readRecorder{r: r, size: size}
	rep, err := foreign(rr, size, name, &o.limits)
	if err == nil {
		err = rr.failure(name)
	}
	return rep, err
}

// Reaches reports whether torch.load, handed r (size bytes), would get
// anywhere with it: r is a zip archive or a tar archive torch would read,
// or its first pickle (see ScanForeign) imports a global, calls
// something, or decodes to torch's legacy magic number. False means
// torch.load refuses r having imported and called nothing, as it refuses
// a text file, a JSON document or a safetensors file. Only I/O failures
// are errors.
func Reaches(r io.ReaderAt, size int64) (bool, error) {
	rr := &readRecorder{r: r, size: size}
	o, err := buildOptions(nil)
	if err != nil {
		return false, err
	}
	rep, err := foreign(rr, size, "", &o.limits)
	if err == nil {
		err = rr.failure("")
	}
	if err != nil {
		return false, err
	}
	return rep.reached, nil
}

// foreign is ScanForeign on a recorded reader.
func foreign(r io.ReaderAt, size int64, name string, lim *Limits) (rep *ScanReport, err error) {
	defer func() {
		// a panic is a bug, never a verdict on the file (see analyze)
		if p := recover(); p != nil {
			rep, err = nil, bug.Recovered("scanning "+name, p)
		}
	}()
	k, err := sniff(r, size)
	if err != nil {
		return nil, withPath(err, name)
	}
	if k == kindTar {
		zero, err := zeroBlock(r, size)
		if err != nil {
			return nil, withPath(err, name)
		}
		if zero {
			// tarfile opens an empty archive, in which torch finds no
			// "storages" member (a KeyError, not the TarError it falls
			// back on): torch.load reads nothing more
			k = kindEmpty
		}
	}
	switch k {
	case kindEmpty:
		rep = &ScanReport{Path: name, Format: FormatUnknown}
		rep.finish()
		return rep, nil
	case kindZip, kindTar:
		rep, _, err = analyze(r, size, name, lim)
		if rep != nil {
			rep.reached = true
		}
		return rep, err
	}
	lim = lim.withInflateBudget(size)
	rep = &ScanReport{Path: name, Format: FormatUnknown, userAllow: lim.userAllow}
	defer rep.finish()
	first := &ScanReport{walks: pickle.NewWalks(walkBudget(size)), userAllow: lim.userAllow, exact: true}
	first.walks.SetExact()
	src := pickle.NewStream(r, 0, size)
	ps := scanSource(src, "pickle 1", pidNone, lim, first, 1, nil, nil)
	if ps.failed {
		walkAt(r, 0, ps.failOff, size, "pickle 1", first, ps.state)
	} else if isLegacyMagic(ps.first) {
		// torch reads on: the sys_info, object and key-list pickles and
		// the storages; everything is scanned as Scan scans it
		full, _, err := analyze(r, size, name, lim)
		if full == nil {
			return rep, err
		}
		full.reached = true
		full.addProblem("polyglot: the file is also a legacy PyTorch checkpoint, which torch.load reads")
		full.finish()
		return full, nil
	}
	partial := first.walks.Partial()
	if len(first.Globals) == 0 && len(first.DangerousOpcodes) == 0 && !partial {
		// torch.load fails on the first bytes, having imported and called
		// nothing (the decoder's complaints are not the file's problems:
		// it is not meant to be a pickle)
		return rep, nil
	}
	rep.reached = true
	rep.Format = FormatPickle
	first.Problems = nil
	rep.merge(first)
	var names []string
	for _, g := range first.Globals {
		if len(names) < 3 && !slices.Contains(names, g.String()) {
			names = append(names, g.String())
		}
	}
	var what string
	switch {
	case len(names) > 0:
		what = "imports " + strings.Join(names, ", ")
	case len(first.DangerousOpcodes) > 0:
		what = "calls " + first.DangerousOpcodes[0].Opcode
	default:
		// a walk budget or bound ran out on the way: what CPython reads
		// past it was not checked, and may import anything
		what = "may import or call anything: the scan could not follow every way CPython reads it (a walk budget or bound was reached)"
	}
	rep.addProblem(fmt.Sprintf("polyglot: torch.load reads this file through its legacy path, unpickling it from byte 0, and %s", what))
	return rep, nil
}

// exactPolicy is torch's policy for a pickle that CPython reads from the
// start of a file that is another format (ScanForeign): a module
// find_class fails on before importing anything ends the pickle, as it
// ends CPython's. One it may import is a global, whatever the name: the
// module's code runs before getattr can fail (pickle.MayImport).
type exactPolicy struct{ *policy }

func (p exactPolicy) FindClass(module, name string, off int64) (any, error) {
	if !pickle.MayImport(module) {
		return nil, &pickle.Error{Kind: pickle.ErrCorrupt, Offset: off, Msg: fmt.Sprintf("global %q.%q: find_class cannot import the module, and fails before importing anything", clip(module), clip(name))}
	}
	return p.policy.FindClass(module, name, off)
}

// Extension refuses every EXT1, EXT2 and EXT4 code as CPython does in a
// torch process, whose copyreg extension registry is empty (neither the
// standard library nor torch registers a code): the unpickler raises
// "unregistered extension code" having imported nothing. A checkpoint's
// own pickles are judged by the auditing policy, which refuses the codes
// whatever the registry holds.
func (p exactPolicy) Extension(code uint64, off int64) (any, error) {
	return nil, &pickle.Error{Kind: pickle.ErrCorrupt, Offset: off, Msg: fmt.Sprintf("extension code %d is not registered in copyreg (torch registers none): the unpickler stops", code)}
}

// PersistentLoad refuses every persistent id, text or binary, as CPython
// does: torch.load reads the first pickle of a legacy file with a plain
// pickle.load, which has no persistent_load ("A load persistent id
// instruction was encountered, but no persistent_load function was
// specified"), having imported nothing.
func (p exactPolicy) PersistentLoad(pid any, off int64) (any, error) {
	return nil, &pickle.Error{Kind: pickle.ErrRaises, Offset: off, Msg: "a persistent id, but torch.load's first pickle.load has no persistent_load: the unpickler raises"}
}

// zeroBlock reports whether r's first tar block is all zeros (tarfile's
// end-of-archive marker).
func zeroBlock(r io.ReaderAt, size int64) (bool, error) {
	b := make([]byte, min(size, tarlist.BlockSize))
	if err := readFull(r, b, 0); err != nil {
		return false, err
	}
	for _, c := range b {
		if c != 0 {
			return false, nil
		}
	}
	return true, nil
}
