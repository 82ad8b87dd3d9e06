package torch

import (
	"errors"
	"fmt"
	"github.com/gosafetensors/safetensors/torch/pickle"
	"slices"
	"sort"
	"strings"
)

// GlobalUse is one GLOBAL/STACK_GLOBAL/INST/EXT reference found by Scan.
type GlobalUse struct {
	Module  string // clipped to 1 KiB (with "...") if longer
	Name    string // likewise
	Offset  int64  // byte offset of the opcode inside Entry
	Entry   string // zip member ("archive/data.pkl") or legacy/bare pickle ("pickle 3")
	Allowed bool   // on the allowlist, or allowed by the caller (UserAllowed)
	// UserAllowed: allowed only because the caller said so (WithAllow,
	// scan --allow); Verdict is then "allowed".
	UserAllowed bool
	Verdict     string // "allowed", "unsupported" (inert torch name with no safetensors form) or "not allowed"
	Reason      string // why it is not allowed, if it is not
}

// String returns module.name.
func (g GlobalUse) String() string { return g.Module + "." + g.Name }

// OpcodeUse is an opcode found by Scan that would run code in a real
// unpickler: REDUCE/BUILD/APPEND/SETITEM on something that is not an
// allowlisted record, and INST, OBJ, NEWOBJ, NEWOBJ_EX, EXT1/2/4 always.
type OpcodeUse struct {
	Opcode string // pickletools name, e.g. "REDUCE"
	Offset int64
	Entry  string
	Target string // the callable, class or object it acts on, e.g. "posix.system"
}

// ScanReport is the result of Scan.
//
// No list in a report drops a global that is not allowlisted: the first
// maxFindings uses of every kind are listed in file order, and after that
// the first use of every further distinct not-allowed or unsupported
// global (and of every distinct code-running opcode target) is still
// appended, so NotAllowed and Verdict see all of them. Only repeated uses
// and allowlisted names are counted instead of listed (Omitted). Distinct
// names beyond a memory budget of maxDistinctBytes are counted in Omitted
// too; the verdict is then "dangerous" already.
type ScanReport struct {
	Path             string
	Format           Format // FormatZip, FormatLegacy, FormatTar, FormatPickle (a bare pickle, not a checkpoint) or FormatUnknown
	Pickles          int    // pickle streams decoded
	Tensors          int    // tensors found when the checkpoint also opens cleanly (0 otherwise)
	Globals          []GlobalUse
	DangerousOpcodes []OpcodeUse
	Problems         []string // container and decoding problems
	Opcodes          []string // distinct opcodes seen, sorted
	Truncated        bool     // some uses were counted instead of listed (see Omitted); never hides a distinct not-allowed global
	Omitted          int64    // global and opcode uses counted but not listed
	// UserAllowed lists, in first-seen order, the globals the file uses
	// that are allowed only because the caller allowed them (WithAllow):
	// a clean verdict with UserAllowed empty is clean by the allowlist alone.
	UserAllowed []string
	seen        pickle.OpSet

	distinct      map[string]bool // module.name or opcode|target already listed past the cap
	distinctBytes int64
	openErr       error // the strict decoder's error, if it refused the file
	// zipLoader: the pickles are read as torch's zip loader reads them
	// (with its module mapping)
	zipLoader bool
	userAllow map[string]bool // WithAllow's globals
	// torchScript: a TorchScript archive, which torch.load hands to
	// torch.jit.load (see isTorchScript)
	torchScript bool

	// exact: the pickles are what CPython reads from the start of a file
	// that is another format, and nothing else (ScanForeign)
	exact bool
	// reached: torch.load would get past the file's first bytes (see
	// Reaches)
	reached bool

	walks    *pickle.Walks // shared by the pickles and walks of one scan
	inflated int64         // bytes of compressed records inflated (work, for the tests)
}

// walker returns the walk state of the scan, made on first use.
func (r *ScanReport) walker() *pickle.Walks {
	if r.walks == nil {
		r.walks = pickle.NewWalks(0)
	}
	return r.walks
}

// sub returns a report for part of the file scanned separately (merged
// into r only if it finds something): it shares r's walk state.
func (r *ScanReport) sub() *ScanReport {
	return &ScanReport{walks: r.walker(), userAllow: r.userAllow, zipLoader: r.zipLoader, torchScript: r.torchScript, exact: r.exact}
}

// sink returns the auditor that records what the machine and the walker
// find in entry.
func (r *ScanReport) sink(entry string) *scanSink { return &scanSink{rep: r, entry: entry} }

// maxFindings bounds the uses listed in file order in each list of a
// ScanReport; past it only distinct names are added.
const maxFindings = 10000

// maxDistinctBytes bounds the memory spent on distinct names listed past
// maxFindings.
const maxDistinctBytes = 64 << 20

// Verdicts returned by ScanReport.Verdict, from best to worst.
const (
	VerdictClean       = "clean"       // every byte torch could read was decoded; every global is allowlisted
	VerdictInvalid     = "invalid"     // not a valid checkpoint (corrupt, truncated, polyglot, unexplained bytes), nothing dangerous named
	VerdictUnsupported = "unsupported" // inert torch constructs with no safetensors form (quantized, sparse...)
	VerdictDangerous   = "dangerous"   // a global that is not allowlisted, or an opcode that would run code
)

// Verdict summarises the report: "dangerous" if any global is not
// allowlisted or any opcode would call something other than an inert
// torch function; else "unsupported" if an inert torch construct has no
// safetensors form; else "invalid" if any problem was found; else "clean".
// convert (through Open/NewReader) accepts a file exactly when its
// verdict is "clean".
func (r *ScanReport) Verdict() string {
	inert := map[string]bool{}
	dangerous, unsupported := false, false
	for _, g := range r.Globals {
		switch g.Verdict {
		case "allowed":
		case "unsupported":
			inert[g.String()] = true
			unsupported = true
		default:
			dangerous = true
		}
	}
	for _, o := range r.DangerousOpcodes {
		// Calling an inert torch rebuild function (quantized, sparse) is
		// what torch.load does with it: unsupported, not dangerous; so is
		// what a TorchScript archive's pickles build of jit's own classes.
		if r.inertOpcode(o, inert) {
			unsupported = true
		} else {
			dangerous = true
		}
	}
	switch {
	case dangerous:
		return VerdictDangerous
	case unsupported || r.torchScript:
		return VerdictUnsupported
	case len(r.Problems) > 0:
		return VerdictInvalid
	}
	return VerdictClean
}

// inertOpcode reports whether a code-running opcode only calls what torch
// itself would call on load: an inert torch rebuild function (quantized,
// sparse: unsupported, not dangerous), or, in a TorchScript archive, jit's
// own classes and helpers (see jitName). inert holds the unsupported
// globals.
func (r *ScanReport) inertOpcode(o OpcodeUse, inert map[string]bool) bool {
	return inert[o.Target] || r.torchScript && jitName(strings.TrimSuffix(o.Target, " instance"))
}

// Safe reports whether the verdict is "clean".
func (r *ScanReport) Safe() bool { return r.Verdict() == VerdictClean }

// NotAllowed returns the distinct module.name of every global that is not
// allowlisted, in first-seen order.
func (r *ScanReport) NotAllowed() []string {
	var out []string
	seen := map[string]bool{}
	for _, g := range r.Globals {
		if !g.Allowed && !seen[g.String()] {
			seen[g.String()] = true
			out = append(out, g.String())
		}
	}
	return out
}

func (r *ScanReport) finish() {
	r.Opcodes = r.Opcodes[:0]
	for i := range 256 {
		if r.seen.Has(pickle.Op(i)) {
			r.Opcodes = append(r.Opcodes, pickle.Op(i).String())
		}
	}
	sort.Strings(r.Opcodes)
	r.distinct = nil
}

func (r *ScanReport) addProblem(p string) {
	if len(r.Problems) >= maxFindings {
		r.Truncated = true
		r.Omitted++
		return
	}
	r.Problems = append(r.Problems, p)
}

// keepDistinct reports whether a use past maxFindings must still be
// listed: the first of its key, within the memory budget.
func (r *ScanReport) keepDistinct(key string) bool {
	r.Truncated = true
	if r.distinct == nil {
		r.distinct = make(map[string]bool)
	}
	if r.distinct[key] {
		r.Omitted++
		return false
	}
	if r.distinctBytes+int64(len(key)) > maxDistinctBytes {
		if r.distinctBytes <= maxDistinctBytes {
			r.distinctBytes = maxDistinctBytes + 1
			r.Problems = append(r.Problems, "too many distinct not-allowed globals to list (the verdict counts them all)")
		}
		r.Omitted++
		return false
	}
	r.distinct[key] = true
	r.distinctBytes += int64(len(key)) + 64
	return true
}

func (r *ScanReport) addGlobal(g GlobalUse) {
	if g.UserAllowed && !slices.Contains(r.UserAllowed, g.String()) {
		r.UserAllowed = append(r.UserAllowed, g.String()) // a few names, at most the WithAllow list
	}
	if len(r.Globals) >= maxFindings && (g.Allowed || !r.keepDistinct("g|"+g.Verdict+"|"+g.String())) {
		if g.Allowed {
			r.Truncated = true
			r.Omitted++
		}
		return
	}
	r.Globals = append(r.Globals, g)
}

func (r *ScanReport) addOpcode(o OpcodeUse) {
	if len(r.DangerousOpcodes) >= maxFindings && !r.keepDistinct("o|"+o.Opcode+"|"+o.Target) {
		return
	}
	r.DangerousOpcodes = append(r.DangerousOpcodes, o)
}

// merge appends the findings of sub (scanned separately) to r.
func (r *ScanReport) merge(sub *ScanReport) {
	for _, g := range sub.Globals {
		r.addGlobal(g)
	}
	for _, o := range sub.DangerousOpcodes {
		r.addOpcode(o)
	}
	for _, p := range sub.Problems {
		r.addProblem(p)
	}
	r.Pickles += sub.Pickles
	r.Omitted += sub.Omitted
	r.Truncated = r.Truncated || sub.Truncated
	r.seen.Union(sub.seen)
}

// scanSink collects findings for one pickle stream: it is the
// pickle.Auditor of the machine and the walker.
type scanSink struct {
	rep   *ScanReport
	entry string
}

// walkedReason is added to the reason of a global only the walker found.
const walkedReason = " (found by the opcode walker past the point where full decoding stopped)"

// Import records a global the machine or the walker found without
// asking the policy.
func (s *scanSink) Import(g pickle.Import) {
	switch {
	case g.How == pickle.Unknown && g.Walked:
		s.rep.addGlobal(GlobalUse{Module: "?", Name: "?", Offset: g.Offset, Entry: s.entry, Verdict: "not allowed",
			Reason: "STACK_GLOBAL operands the walker could not track" + walkedReason})
	case g.How == pickle.Unknown:
		s.global("?", "?", g.Offset, verdictNotAllowed, g.Detail)
	case g.How == pickle.Extension && g.Walked:
		s.rep.addGlobal(GlobalUse{Module: g.Module, Name: g.Name, Offset: g.Offset, Entry: s.entry,
			Verdict: "not allowed", Reason: "copyreg extension code (found by the opcode walker)"})
	case g.How == pickle.Extension:
		s.global(g.Module, g.Name, g.Offset, verdictNotAllowed, "copyreg extension code")
	default:
		module, mapped := torchModule(g.Module, s.rep.zipLoader)
		_, v, why := classifyGlobal(module, g.Name, s.rep.userAllow)
		if mapped != "" {
			why = withMapping(why, mapped)
		}
		if v == verdictUserAllowed && g.Walked {
			// the walker tracks no values: what is BUILT into an allowed
			// object there (a __setstate__, records.go) goes unchecked
			v, why = verdictNotAllowed, "allowed by the caller (--allow), but where only the opcode walker reads, which cannot check what is built into it"
		}
		if v != verdictAllowed && v != verdictUserAllowed && g.Walked {
			why += walkedReason
		}
		s.global(module, g.Name, g.Offset, v, why)
	}
}

// Call records an opcode that would run code.
func (s *scanSink) Call(op pickle.Op, off int64, target string) { s.opcode(op, off, target) }

// Problem records a problem at off.
func (s *scanSink) Problem(off int64, msg string) { s.problem(s.entry, off, msg) }

// FrameEnd is the sink for what is walked from a frame end.
func (s *scanSink) FrameEnd() pickle.Auditor {
	return &scanSink{rep: s.rep, entry: s.entry + " (from a frame end)"}
}

func (s *scanSink) global(module, name string, off int64, v globalVerdict, reason string) {
	if s.rep.torchScript && v == verdictNotAllowed && jitName(module) {
		v, reason = verdictUnsupported, "TorchScript: torch.jit.load resolves it, not Python's pickle (a TorchScript archive is not a state dict)"
	}
	verdict := [...]string{"allowed", "unsupported", "not allowed", "allowed"}[v]
	s.rep.addGlobal(GlobalUse{Module: clip(module), Name: clip(name), Offset: off, Entry: s.entry,
		Allowed: v == verdictAllowed || v == verdictUserAllowed, UserAllowed: v == verdictUserAllowed, Verdict: verdict, Reason: reason})
}

func (s *scanSink) opcode(op pickle.Op, off int64, target string) {
	s.rep.addOpcode(OpcodeUse{Opcode: op.String(), Offset: off, Entry: s.entry, Target: target})
}

func (s *scanSink) problem(entry string, off int64, msg string) {
	s.rep.addProblem(fmt.Sprintf("%s offset %d: %s", entry, off, msg))
}

// refusal is the error Open/NewReader return for a file whose verdict is
// not clean: the global or code-running opcode that makes it dangerous
// (the strict decoder's refusal first, then anything the scan found, in
// file order), else the strict decoder's error, else what makes it
// unsupported, else its first problem (polyglots first).
func (r *ScanReport) refusal() error {
	var oe *Error
	if errors.As(r.openErr, &oe) && oe.Kind == ErrNotAllowed && oe.Global != "" {
		return r.openErr
	}
	inert := map[string]bool{}
	for _, g := range r.Globals {
		if g.Verdict == "unsupported" {
			inert[g.String()] = true
		}
	}
	for _, g := range r.Globals {
		if g.Verdict != "allowed" && g.Verdict != "unsupported" {
			return &Error{Kind: ErrNotAllowed, Entry: g.Entry, Offset: g.Offset, Global: g.String(),
				Msg: fmt.Sprintf("refusing global %s (%s)", g, g.Reason)}
		}
	}
	for _, o := range r.DangerousOpcodes {
		if !r.inertOpcode(o, inert) {
			return &Error{Kind: ErrNotAllowed, Entry: o.Entry, Offset: o.Offset, Global: o.Target,
				Msg: fmt.Sprintf("refusing %s on %s (a real unpickler would run code)", o.Opcode, o.Target)}
		}
	}
	for _, p := range r.Problems {
		if strings.HasPrefix(p, "polyglot") {
			return &Error{Kind: ErrCorrupt, Offset: -1, Msg: p}
		}
	}
	if r.openErr != nil {
		return r.openErr
	}
	for _, g := range r.Globals {
		if g.Verdict == "unsupported" {
			return &Error{Kind: ErrUnsupported, Entry: g.Entry, Offset: g.Offset, Global: g.String(),
				Msg: fmt.Sprintf("refusing global %s (%s)", g, g.Reason)}
		}
	}
	if len(r.Problems) > 0 {
		msg := r.Problems[0]
		if len(r.Problems) > 1 {
			msg += fmt.Sprintf(" (and %d more problems; run scan for the list)", len(r.Problems)-1)
		}
		return &Error{Kind: ErrCorrupt, Offset: -1, Msg: msg}
	}
	return &Error{Kind: ErrCorrupt, Offset: -1, Msg: "not a PyTorch checkpoint"}
}

// OpcodeName returns the pickletools name of opcode b, or "" if b is not a
// defined pickle opcode (see pickle.Op).
func OpcodeName(b byte) string { return pickle.Op(b).String() }
