package torch

import (
	"errors"
	"fmt"

	"github.com/gosafetensors/safetensors/torch/pickle"
)

// torch's policy for the inert pickle machine (package pickle): which
// globals resolve (the allowlist), what a persistent id means (a storage
// record), what REDUCE and BUILD build (tensor records, OrderedDicts).
// Strict mode (Open) refuses at the first thing off the allowlist; scan
// mode (Scan) records it and goes on.

// pidMode says which persistent ids a pickle may contain.
type pidMode int

const (
	pidNone   pidMode = iota // plain pickle: BINPERSID is an error
	pidZip                   // ('storage', type, key, location, numel)
	pidLegacy                // ('storage', type, key, location, numel, view_metadata)
	pidTar                   // the tar "pickle" member: a tensor key, or any tuple (see pidValue)
)

// policy is torch.load's unpickler as far as a state dict needs it,
// answered without importing or calling anything.
type policy struct {
	m     *pickle.Machine
	lim   *Limits
	entry string
	pids  pidMode
	scan  *scanSink // nil: strict mode (stop at the first refusal)

	storages map[string]*storageRef // shared by the pickles of one file
	ids      *int                   // object identities, likewise
	encoded  int64                  // bytes produced by _codecs.encode calls
	limit    int64                  // the stream's length, which bounds encoded
}

// vm decodes one pickle of a stream with torch's policy.
type vm struct {
	*policy
	src  *pickle.Stream
	mem  policy // the policy's memory: one allocation per pickle
	mach pickle.Machine
}

func newVM(src *pickle.Stream, lim *Limits, entry string, pids pidMode, storages map[string]*storageRef, ids *int) *vm {
	m := &vm{src: src, mem: policy{lim: lim, entry: entry, pids: pids, storages: storages, ids: ids, limit: src.Len()}}
	m.policy = &m.mem
	m.m = &m.mach
	return m
}

// run decodes one pickle, up to and including its STOP; in scan mode
// (m.scan set) the machine records findings in the report and walks what
// it must.
func (m *vm) run() (any, error) {
	m.encoded = 0
	c := pickle.Config{Limits: m.lim.pickle(), Policy: m.policy}
	if m.scan != nil {
		c.Audit, c.Walks = m.scan, m.scan.rep.walker()
		if m.scan.rep.exact {
			c.Policy = exactPolicy{m.policy} // see ScanForeign
		}
	}
	m.mach.Reset(m.src, c)
	v, err := m.mach.Run()
	if m.scan != nil {
		m.scan.rep.seen.Union(m.m.Opcodes())
	}
	return v, m.fromPickle(err)
}

// failState is pickle.Machine.FailState.
func (m *vm) failState() (int64, *pickle.State) { return m.m.FailState() }

// fromPickle turns an error of the machine or its stream into an *Error
// naming the entry; the policy's own errors already are.
func (p *policy) fromPickle(err error) error {
	var pe *pickle.Error
	if !errors.As(err, &pe) {
		return err
	}
	kind := ErrCorrupt
	switch pe.Kind {
	case pickle.ErrNotAllowed:
		kind = ErrNotAllowed
	case pickle.ErrUnsupported:
		kind = ErrUnsupported
	case pickle.ErrLimit:
		kind = ErrLimit
	}
	return &Error{Kind: kind, Entry: p.entry, Offset: pe.Offset, Global: pe.Global, Msg: pe.Msg, Err: pe.Err}
}

// pickle returns the machine's share of the limits.
func (l *Limits) pickle() pickle.Limits {
	return pickle.Limits{MaxPickleBytes: l.MaxPickleBytes, MaxStringBytes: l.MaxStringBytes, MaxLongBytes: l.MaxLongBytes,
		MaxMemo: l.MaxMemo, MaxStack: l.MaxStack, MaxMarks: l.MaxMarks, MaxObjects: l.MaxObjects}
}

func (p *policy) errf(kind error, off int64, format string, args ...any) *Error {
	return newError(kind, p.entry, off, format, args...)
}

// charge adds n units of work to the machine's MaxObjects budget.
func (p *policy) charge(n int) *Error {
	if err := p.m.Charge(n); err != nil {
		return p.fromPickle(err).(*Error)
	}
	return nil
}

// FindClass checks a GLOBAL, STACK_GLOBAL (or, in scan mode, INST) name
// against the allowlist the moment it is read, as torch names it.
func (p *policy) FindClass(module, name string, off int64) (any, error) {
	module, mapped := torchModule(module, p.pids == pidZip || p.scan != nil && p.scan.rep.zipLoader)
	a, verdict, reason := classifyGlobal(module, name, p.lim.userAllow)
	if mapped != "" {
		reason = withMapping(reason, mapped)
	}
	if p.scan != nil {
		p.scan.global(module, name, off, verdict, reason)
		return &global{module: module, name: name, off: off, allow: a}, nil
	}
	full := globalName(module, name)
	switch verdict {
	case verdictAllowed, verdictUserAllowed:
		return &global{module: module, name: name, off: off, allow: a}, nil
	case verdictUnsupported:
		return nil, &Error{Kind: ErrUnsupported, Entry: p.entry, Offset: off, Global: full,
			Msg: fmt.Sprintf("refusing global %s (%s)", full, reason)}
	}
	return nil, &Error{Kind: ErrNotAllowed, Entry: p.entry, Offset: off, Global: full,
		Msg: fmt.Sprintf("refusing global %s (%s)", full, reason)}
}

// zipModuleMapping is torch's load_module_mapping: its zip loader's
// find_class imports the value where a pickle names the key (torch's
// legacy and tar loaders map nothing).
var zipModuleMapping = map[string]string{"torch.tensor": "torch._tensor"}

// torchModule returns the module torch's find_class imports for module,
// and the name as written when the zip loader mapped it ("" otherwise).
func torchModule(module string, zipLoader bool) (string, string) {
	if !zipLoader {
		return module, ""
	}
	if m, ok := zipModuleMapping[module]; ok {
		return m, module
	}
	return module, ""
}

func withMapping(reason, written string) string {
	m := "written " + written + "; torch's zip loader imports " + zipModuleMapping[written]
	if reason == "" {
		return m
	}
	return reason + " (" + m + ")"
}

// nextID returns a fresh object identity (shared by the pickles of a file
// when they share ids).
func (p *policy) nextID() int {
	if p.ids == nil {
		p.ids = new(int)
	}
	*p.ids++
	return *p.ids
}
