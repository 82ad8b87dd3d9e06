package torch

import (
	"fmt"
	"sort"
)

// GlobalUse is one GLOBAL/STACK_GLOBAL/INST/EXT reference found by Scan.
type GlobalUse struct {
	Module  string // clipped to 1 KiB (with "...") if longer
	Name    string // likewise
	Offset  int64  // byte offset of the opcode inside Entry
	Entry   string // zip member ("archive/data.pkl") or legacy/bare pickle ("pickle 3")
	Allowed bool   // on the allowlist
	Verdict string // "allowed", "unsupported" (inert torch name with no safetensors form) or "not allowed"
	Reason  string // why it is not allowed, if it is not
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
type ScanReport struct {
	Path             string
	Format           string // "zip", "legacy", "pickle" (bare pickle, not a checkpoint) or "unknown"
	Pickles          int    // pickle streams decoded
	Tensors          int    // tensors found when the checkpoint also opens cleanly (0 otherwise)
	Globals          []GlobalUse
	DangerousOpcodes []OpcodeUse
	Problems         []string // container and decoding problems
	Opcodes          []string // distinct opcodes seen, sorted
	Truncated        bool     // more findings than the report keeps (maxFindings each)
	seen             [256]bool
}

// maxFindings bounds each list in a ScanReport.
const maxFindings = 10000

// Safe reports whether the scan found nothing to object to: every global is
// allowlisted, no opcode could run code, and the container and pickles
// decoded without problems.
func (r *ScanReport) Safe() bool {
	for _, g := range r.Globals {
		if !g.Allowed {
			return false
		}
	}
	return len(r.DangerousOpcodes) == 0 && len(r.Problems) == 0 && !r.Truncated
}

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
	for i, ok := range r.seen {
		if ok {
			r.Opcodes = append(r.Opcodes, opNames[i])
		}
	}
	sort.Strings(r.Opcodes)
}

func (r *ScanReport) addProblem(p string) {
	if len(r.Problems) >= maxFindings {
		r.Truncated = true
		return
	}
	r.Problems = append(r.Problems, p)
}

// scanSink collects findings for one pickle stream.
type scanSink struct {
	rep   *ScanReport
	entry string
}

func (s *scanSink) sawOpcode(op byte) { s.rep.seen[op] = true }

func (s *scanSink) global(module, name string, off int64, v globalVerdict, reason string) {
	if len(s.rep.Globals) >= maxFindings {
		s.rep.Truncated = true
		return
	}
	verdict := [...]string{"allowed", "unsupported", "not allowed"}[v]
	s.rep.Globals = append(s.rep.Globals, GlobalUse{Module: clip(module), Name: clip(name), Offset: off, Entry: s.entry,
		Allowed: v == verdictAllowed, Verdict: verdict, Reason: reason})
}

func (s *scanSink) opcode(op byte, off int64, target string) {
	if len(s.rep.DangerousOpcodes) >= maxFindings {
		s.rep.Truncated = true
		return
	}
	s.rep.DangerousOpcodes = append(s.rep.DangerousOpcodes, OpcodeUse{Opcode: opNames[op], Offset: off, Entry: s.entry, Target: target})
}

func (s *scanSink) problem(entry string, off int64, msg string) {
	s.rep.addProblem(fmt.Sprintf("%s offset %d: %s", entry, off, msg))
}
