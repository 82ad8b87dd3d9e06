package torch

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"github.com/gosafetensors/safetensors/internal/bug"
	"github.com/gosafetensors/safetensors/torch/pickle"
	"github.com/gosafetensors/safetensors/torch/ziplist"
	"io"
	"os"
	"strings"
)

// ScanFile is Scan on a file.
func ScanFile(path string, opts ...Option) (*ScanReport, error) {
	o, err := buildOptions(opts)
	if err != nil {
		return nil, err
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	return scan(f, fi.Size(), path, &o.limits)
}

// Scan audits a file without failing fast. The verdict is a sound
// over-approximation of what torch.load(weights_only=False) would import
// and call: every interpretation torch may take is scanned (a zip
// checkpoint; otherwise a tar as Python's tarfile accepts it, whose
// storages/tensors/pickle members torch would unpickle, and the legacy
// pickle stream torch falls back to), every pickle is decoded by the same
// inert machine and caps as Open, and wherever full decoding stops (a
// refusal, a cap, an unknown construct) an opcode walker continues to the
// end of the region so that every global is still named. Bytes no
// structure explains (after the last legacy storage, between zip members,
// after a pickle) are a problem and are walked too. Every global is
// recorded with its verdict, each opcode that would run code, and each
// container or decoding problem. The error is only non-nil if r cannot be
// read at all, or if an option is invalid (an error wrapping [ErrOption]),
// or if a read of r failed part-way (an error, or an end before size): then
// the report of what was read comes with an error wrapping the failure, for
// what was not read was not checked (a "dangerous" verdict still stands).
// Options: [WithLimits] (default [DefaultLimits]).
func Scan(r io.ReaderAt, size int64, name string, opts ...Option) (*ScanReport, error) {
	o, err := buildOptions(opts)
	if err != nil {
		return nil, err
	}
	return scan(r, size, name, &o.limits)
}

func scan(r io.ReaderAt, size int64, name string, lim *Limits) (*ScanReport, error) {
	rr := &readRecorder{r: r, size: size}
	rep, _, err := analyze(rr, size, name, lim)
	if err == nil {
		err = rr.failure(name)
	}
	return rep, err
}

// analyze scans the file and opens it with the strict decoder; Open and
// Scan both come here, so that they cannot disagree: a checkpoint is
// returned only with the report, and NewReader accepts it only when the
// report's verdict is clean.
func analyze(r io.ReaderAt, size int64, name string, lim *Limits) (rep *ScanReport, c *Checkpoint, err error) {
	lim = lim.withInflateBudget(size)
	rep = &ScanReport{Path: name, Format: FormatUnknown, walks: pickle.NewWalks(walkBudget(size)), userAllow: lim.userAllow}
	defer func() {
		// Last line of defence, see NewReader: a panic is a bug (or a
		// mapped file that shrank), never a verdict on the file.
		if p := recover(); p != nil {
			rep, c, err = nil, nil, bug.Recovered("scanning "+name, p)
			return
		}
		rep.finish()
	}()
	k, err := sniff(r, size)
	if err != nil {
		return nil, nil, withPath(err, name)
	}
	switch k {
	case kindEmpty:
		rep.addProblem("empty file")
	case kindZip:
		rep.Format = FormatZip
		scanZip(r, size, lim, rep)
	default:
		if k == kindTar {
			rep.Format = FormatTar
			scanTar(r, size, lim, rep)
		}
		f := scanStream(r, size, lim, rep)
		switch {
		case k == kindTar && f == FormatLegacy:
			rep.addProblem("polyglot: the file is both a tar archive (Python's tarfile accepts its first header, so torch.load reads it as a pre-0.4 tar checkpoint) and a legacy checkpoint stream (what torch falls back to)")
		case k == kindTar:
			rep.addProblem("tar checkpoint (torch < 0.4, or a file whose first 512 bytes pass Python's tar header check) is not supported")
		case f != FormatUnknown:
			rep.Format = f
		}
		scanZipPolyglot(r, size, lim, rep)
	}
	c, rep.openErr = open(r, size, lim, false)
	switch {
	case rep.openErr == nil:
		rep.Tensors = len(c.tensors)
	case (rep.Format == FormatZip || rep.Format == FormatLegacy) && !isGlobalRefusal(rep.openErr):
		// the structural checks of Open (storages present and large
		// enough, views in bounds, version, byte order...) complete the audit
		rep.addProblem(errMsg(rep.openErr))
	case isGlobalRefusal(rep.openErr):
		reportRefusal(rep, rep.openErr)
	}
	if rep.openErr != nil {
		c = nil
	}
	return rep, c, nil
}

// reportRefusal makes sure the report holds what the strict decoder
// refused, so that Scan never says less than Open: when the scanning
// machine lost its way before that point (overlapping members walked once,
// a desynchronised walk), the refused global is added from the error.
func reportRefusal(rep *ScanReport, err error) {
	var e *Error
	if !errors.As(err, &e) {
		return
	}
	if e.Global == "" {
		if rep.Verdict() != VerdictDangerous {
			rep.addProblem(errMsg(err))
		}
		return
	}
	for _, g := range rep.Globals {
		if !g.Allowed && g.String() == e.Global {
			return
		}
	}
	module, name := e.Global, ""
	if i := strings.LastIndexByte(e.Global, '.'); i >= 0 {
		module, name = e.Global[:i], e.Global[i+1:]
	}
	verdict := "not allowed"
	if e.Kind == ErrUnsupported {
		verdict = "unsupported"
	}
	rep.addGlobal(GlobalUse{Module: clip(module), Name: clip(name), Offset: e.Offset, Entry: e.Entry, Verdict: verdict,
		Reason: "refused by the strict decoder torch.Open uses: " + e.Msg})
}

// analyzeForOpen is analyze for Open and NewReader, which need the verdict
// but not the list of allowed globals: when the strict decoder accepts the
// file, every pickle it decoded has nothing to report but allowed globals
// (the strict machine refuses exactly where the scanning one records a
// finding), so only what it does not read is scanned: the other zip
// members, gaps between records, bytes after the last legacy storage, an
// end record of another zip. Anything short of clean is analysed again in
// full, so the error is the one Scan's report implies.
// FuzzScanConvertAgree checks that both paths agree.
func analyzeForOpen(r io.ReaderAt, size int64, name string, lim *Limits) (*ScanReport, *Checkpoint, error) {
	c, err := fastOpen(r, size, lim)
	if p, ok := err.(panicked); ok {
		return nil, nil, bug.Recovered("opening "+name, p.value)
	}
	if err == nil && c != nil {
		return &ScanReport{Path: name, Format: c.Format, Tensors: len(c.tensors)}, c, nil
	}
	return analyze(r, size, name, lim)
}

// panicked carries a panic fastOpen recovered to analyzeForOpen, which
// names the file.
type panicked struct{ value any }

func (p panicked) Error() string { return fmt.Sprint(p.value) }

// fastOpen returns the checkpoint if the strict decoder accepts it and the
// parts of the scan it does not cover find nothing; else nil. A panic is
// returned as a panicked error: a bug is reported, not hidden by the full
// analysis that follows.
func fastOpen(r io.ReaderAt, size int64, lim *Limits) (c *Checkpoint, err error) {
	defer func() {
		if p := recover(); p != nil {
			c, err = nil, panicked{p}
		}
	}()
	c, err = open(r, size, lim, true)
	if err != nil {
		return nil, nil
	}
	rep := &ScanReport{walks: pickle.NewWalks(walkBudget(size)), userAllow: lim.userAllow}
	switch c.Format {
	case FormatZip:
		scanZipArchive(c.zip, lim, rep, c.pickleEntry)
	case FormatLegacy:
		if c.end != size {
			return nil, nil
		}
		scanZipPolyglot(r, size, lim, rep)
	default:
		return nil, nil
	}
	if rep.Verdict() != VerdictClean {
		return nil, nil
	}
	return c, nil
}

// walkBudget is the walk budget of a scan of a size-byte file (see
// pickle.Walks): a few walks of every byte, at least about a second's
// worth. A checkpoint torch writes is decoded, not walked; the walker runs
// where decoding stops and over bytes no structure explains, so a file
// that spends the budget is one a scan could never call clean.
func walkBudget(size int64) int64 { return pickle.DefaultWalkBudget + 16*max(size, 0) }

// pickleScan is what scanSource found.
type pickleScan struct {
	first   any   // value of the first pickle, if it decoded
	firstOK bool  // the first pickle decoded
	failed  bool  // decoding stopped before the end of the region
	failOff int64 // offset of the opcode it stopped on
	err     error // why it stopped
	state   *pickle.State
}

// scanPickles decodes consecutive pickles in [base, base+n) from start;
// where decoding stops early the walker continues to the end.
func scanPickles(ra io.ReaderAt, base, start, n int64, entry string, pids pidMode, lim *Limits, rep *ScanReport, maxPickles int, crc *uint32) pickleScan {
	src := pickle.NewStream(ra, base, n)
	src.SetPos(start)
	if crc != nil {
		src.HashCRC32()
	}
	ps := scanSource(src, entry, pids, lim, rep, maxPickles, crc, nil)
	if ps.failed {
		walkAt(ra, base, ps.failOff, n, entry, rep, ps.state)
	} else if src.Remaining() > 0 {
		rep.addProblem(fmt.Sprintf("%s offset %d: %d unexplained bytes after the last pickle", entry, src.Pos(), src.Remaining()))
		walkAt(ra, base, src.Pos(), n, entry, rep, nil)
	}
	return ps
}

// walkAt runs the walker over [from, end) of the region at base, from
// the state st (nil: a fresh pickle).
func walkAt(ra io.ReaderAt, base, from, end int64, entry string, rep *ScanReport, st *pickle.State) {
	rep.walker().Walk(ra, base, from, end, rep.sink(entry), st)
}

// scanSource decodes up to maxPickles consecutive pickles from src's
// position, recording findings in rep; storages (nil: a fresh table) is
// shared by the pickles.
func scanSource(src *pickle.Stream, entry string, pids pidMode, lim *Limits, rep *ScanReport, maxPickles int, crc *uint32, storages map[string]*storageRef) pickleScan {
	if storages == nil {
		storages = make(map[string]*storageRef)
	}
	return scanWith(newVM(src, lim, entry, pids, storages, nil), entry, rep, maxPickles, crc)
}

// scanWith is scanSource with the machine m (reused for every pickle: a
// file of many tiny pickles must not cost a machine each).
func scanWith(m *vm, entry string, rep *ScanReport, maxPickles int, crc *uint32) pickleScan {
	var ps pickleScan
	src := m.src
	if src.Remaining() <= 0 {
		rep.addProblem(entry + ": empty pickle")
	}
	for i := 0; i < maxPickles && src.Remaining() > 0; i++ {
		name := entry
		if i > 0 {
			name = fmt.Sprintf("%s (pickle %d)", entry, i+1)
			rep.addProblem(fmt.Sprintf("%s offset %d: another pickle after STOP", entry, src.Pos()))
		}
		m.entry, m.scan = name, rep.sink(name)
		rep.Pickles++
		v, err := m.run()
		if err != nil {
			rep.addProblem(errMsg(err))
			ps.failed, ps.err = true, err
			ps.failOff, ps.state = m.failState()
			return ps
		}
		if i == 0 {
			ps.first, ps.firstOK = v, true
		}
	}
	if crc != nil {
		if got, err := src.CRC32(); err != nil {
			rep.addProblem(errMsg(withEntry(err, entry)))
		} else if got != *crc {
			rep.addProblem(fmt.Sprintf("%s: CRC-32 mismatch (stored %08x, computed %08x)", entry, *crc, got))
		}
	}
	return ps
}

// scanStream scans a file that is not a zip as torch's legacy loader reads
// it: the legacy magic, protocol, sys_info, object and key-list pickles,
// the storages, and anything after them; or a bare pickle (torch would
// unpickle its first pickle before refusing it). It returns FormatLegacy,
// FormatPickle, or FormatUnknown if the first pickle does not decode.
func scanStream(r io.ReaderAt, size int64, lim *Limits, rep *ScanReport) Format {
	// one source for every pickle (see openStream)
	src := pickle.NewStream(r, 0, size)
	storages := make(map[string]*storageRef)
	ps := scanSource(src, "pickle 1", pidNone, lim, rep, 1, nil, storages)
	if ps.failed {
		walkAt(r, 0, ps.failOff, size, "pickle 1", rep, ps.state)
		if errors.Is(ps.err, ErrLimit) {
			// a pickle past the decoder's bounds (CPython has none for
			// MARKs, the stack or the memo) is still a pickle torch reads
			rep.addProblem("not a PyTorch checkpoint: a pickle past the decoder's limits (torch.load would unpickle it with the full unpickler); walked for globals")
			return FormatPickle
		}
		rep.addProblem("not a PyTorch checkpoint (neither a zip archive nor a pickle)")
		return FormatUnknown
	}
	if isLegacyMagic(ps.first) {
		var keys any
		for i := 2; i <= 5; i++ {
			entry := fmt.Sprintf("pickle %d", i)
			if src.Remaining() == 0 {
				rep.addProblem(fmt.Sprintf("truncated legacy checkpoint: %s is missing", entry))
				return FormatLegacy
			}
			mode := pidNone
			if i == 4 {
				mode = pidLegacy
			}
			ps := scanSource(src, entry, mode, lim, rep, 1, nil, storages)
			if ps.failed {
				walkAt(r, 0, ps.failOff, size, entry, rep, ps.state)
				return FormatLegacy
			}
			keys = ps.first
		}
		scanLegacyTail(r, size, src.Pos(), keys, storages, rep)
		return FormatLegacy
	}
	rep.addProblem("not a PyTorch checkpoint: a bare pickle (torch.load would unpickle it with the full unpickler)")
	bare := newVM(src, lim, "", pidNone, nil, nil)
	for i := 2; src.Remaining() > 0; i++ {
		entry := fmt.Sprintf("pickle %d", i)
		if ps := scanWith(bare, entry, rep, 1, nil); ps.failed {
			walkAt(r, 0, ps.failOff, size, entry, rep, ps.state)
			break
		}
	}
	return FormatPickle
}

// scanLegacyTail follows the legacy storage records after the key list
// (each an int64 element count and the data) and reports and walks any
// bytes after the last one: torch never reads them, and a checkpoint has
// none.
func scanLegacyTail(r io.ReaderAt, size, pos int64, keys any, storages map[string]*storageRef, rep *ScanReport) {
	l, ok := keys.(*pickle.List)
	if !ok {
		return // Open reports it; torch stops there
	}
	prefetchLegacyHeaders(r, size, pos, l, storages)
	for _, k := range l.Items {
		key, _ := k.(string)
		ref := storages[key]
		if ref == nil || pos > size-8 {
			return // torch stops here (Open reports why)
		}
		var hdr [8]byte
		if readFull(r, hdr[:], pos) != nil {
			return
		}
		n, ok := mulCheck(int64(binary.LittleEndian.Uint64(hdr[:])), int64(ref.typ.itemSize))
		if !ok || n > size-pos-8 {
			return
		}
		pos += 8 + n
	}
	if pos < size {
		rep.addProblem(fmt.Sprintf("%d unexplained bytes after the last legacy storage (offset %d to %d)", size-pos, pos, size))
		walkAt(r, 0, pos, size, "trailing bytes", rep, nil)
	}
}

// scanZipPolyglot checks a file that torch does not read as a zip (it does
// not start with a local header) for an end of central directory record:
// other tools would read it as a zip archive. Its pickles are scanned and
// the file is a polyglot.
func scanZipPolyglot(r io.ReaderAt, size int64, lim *Limits, rep *ScanReport) {
	tail := make([]byte, min(size, ziplist.MaxEndSearch))
	if readFull(r, tail, size-int64(len(tail))) != nil || !bytes.Contains(tail, []byte("PK\x05\x06")) {
		return
	}
	sub := rep.sub()
	scanZip(r, size, lim, sub)
	if len(sub.Globals) == 0 && len(sub.DangerousOpcodes) == 0 && sub.Pickles == 0 {
		return
	}
	rep.addProblem("polyglot: the file also ends like a zip archive holding pickles (torch reads it through its legacy path, other tools as a zip)")
	sub.Problems = nil
	rep.merge(sub)
}

// isTorchScript reports whether torch.load takes the archive for a
// TorchScript one and hands it to torch.jit.load: a record that torch's
// reader lists (names cut at 511 bytes, the archive's folder stripped) as
// exactly "constants.pkl" (torch.serialization._is_torchscript_zip).
func isTorchScript(z *zipArchive, prefix string) bool {
	if prefix == "" {
		return false
	}
	for _, e := range z.Entries {
		name := e.Name
		if len(name) > 511 {
			name = name[:511]
		}
		if name == prefix+"/constants.pkl" {
			return true
		}
	}
	return false
}

// jitName reports whether a global is one torch.jit.load resolves itself
// in a TorchScript archive: a __torch__ class (the archive's compiled
// code) or one of torch.jit's helpers.
func jitName(module string) bool {
	return module == "__torch__" || strings.HasPrefix(module, "__torch__.") || strings.HasPrefix(module, "torch.jit.")
}

// maxDataPklExempt bounds the */data.pkl members (torch reads the one of
// the archive's prefix; a zip with several is refused) that scanZip decodes
// even when members overlap.
const maxDataPklExempt = 4

func scanZip(r io.ReaderAt, size int64, lim *Limits, rep *ScanReport) {
	rep.zipLoader = true
	z, err := readZip(r, size, lim)
	if err != nil {
		rep.addProblem(errMsg(err))
		scanZipFallback(r, size, lim, rep)
		return
	}
	scanZipArchive(z, lim, rep, "")
}

// looksLikePickle reports whether the n bytes at off of ra start like a
// pickle of protocol 2 to 5 (PROTO n).
func looksLikePickle(ra io.ReaderAt, off, n int64) bool {
	var head [2]byte
	return n >= 2 && readFull(ra, head[:], off) == nil && pickle.Op(head[0]) == pickle.OpProto && head[1] >= 2 && head[1] <= 5
}

// hiddenPickle scans the n bytes at off of ra, a zip member that is not a
// pickle record, as a pickle if they start like one, into rep (a report
// of its own): it reports whether they hold anything a pickle scanner
// cares about (a global, an opcode that would run code), which makes the
// archive a problem.
func hiddenPickle(ra io.ReaderAt, off, n int64, name string, lim *Limits, rep *ScanReport) bool {
	if !looksLikePickle(ra, off, n) {
		return false
	}
	scanPickles(ra, off, 0, min(n, lim.MaxPickleBytes), name, pidZip, lim, rep, 1, nil)
	return len(rep.Globals) > 0 || len(rep.DangerousOpcodes) > 0
}

// scanZipArchive scans a listed archive, without decoding the member
// named skip (which the strict decoder read in full). Records whose local
// headers were deferred (z listed by readZipDeferring) are checked when
// their storage is first read (Storage.Check), not here.
func scanZipArchive(z *zipArchive, lim *Limits, rep *ScanReport, skip string) {
	rep.zipLoader = true
	r, size := z.r, z.size
	prefix := z.prefix()
	for _, p := range z.problems {
		rep.addProblem(p.entry + ": " + p.msg)
	}
	// (the strict decoder reports why it does not convert: torchScriptMsg)
	rep.torchScript = isTorchScript(z, prefix)
	scanZipGaps(z, rep)
	nData := 0
	var spent int64 // file bytes decoded so far; see openZip
	scanned := map[[4]int64]bool{}
	walkedAll := false
	exempt := 0 // data.pkl members decoded whatever the overlap
	// overlap skips a member whose bytes were already scanned (many central
	// entries can point at one record); once the members to decode hold
	// more bytes than the file, they overlap in other ways, and decoding
	// each would cost (entries x file size): the whole file is then walked
	// once instead, which sees every STORED byte.
	overlap := func(e *zipEntry) bool {
		// the declared size is part of the record: miniz reads usize bytes
		// of a STORED entry, so two entries sharing data but not usize are
		// two different pickles
		k := [4]int64{e.DataOffset, e.CompressedSize, e.Size, int64(e.Method)}
		if scanned[k] {
			return true
		}
		scanned[k] = true
		if isDataPkl(e.Name) && exempt < maxDataPklExempt {
			// the record torch reads is always decoded in full: a walk of
			// the whole file can be steered past it by an enclosing
			// member's BINBYTES
			exempt++
			return false
		}
		if spent += e.CompressedSize; spent > size {
			if !walkedAll {
				walkedAll = true
				rep.addProblem(fmt.Sprintf("%s: members overlap (more bytes to decode than the %d-byte file holds); the whole file is walked for globals instead", e.Name, size))
				walkAt(r, 0, 0, size, "whole file", rep, nil)
			}
			return e.Method == 0
		}
		return false
	}
	for _, e := range z.Entries {
		if isDataPkl(e.Name) {
			nData++
		}
		if e.Deferred {
			continue // a storage record, checked when it is read
		}
		if skip != "" && e.Name == skip {
			skip = "" // only the first member of that name was decoded
			continue
		}
		isPkl := strings.HasSuffix(asciiLower(e.Name), ".pkl") // torch matches names case-insensitively
		if isPkl && e.Method == 8 && e.DataOffset >= 0 && e.Flags&ziplist.BadFlags == 0 {
			if overlap(e) {
				continue
			}
			scanDeflated(z, e, lim, rep)
			continue
		}
		ra, off, n, ok := z.pickleReader(e, lim.MaxPickleBytes)
		if !ok {
			if isPkl {
				rep.addProblem(e.Name + ": pickle record could not be read (encrypted or unknown compression); not scanned")
			}
			continue
		}
		var crc *uint32
		if e.Method == 0 {
			crc = &e.CRC32
		}
		if isPkl {
			if overlap(e) {
				continue
			}
			scanPickles(ra, off, 0, n, e.Name, pidZip, lim, rep, 1<<20, crc)
			continue
		}
		if !looksLikePickle(ra, off, n) || overlap(e) {
			continue
		}
		sub := rep.sub()
		if hiddenPickle(ra, off, n, e.Name, lim, sub) {
			rep.addProblem(e.Name + ": pickle hidden in a non-.pkl member")
			sub.Problems = nil
			rep.merge(sub)
		}
	}
	if nData == 0 {
		rep.addProblem("no <prefix>/data.pkl record (not a torch checkpoint)")
	}
}
