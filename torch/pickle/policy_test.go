package pickle

import (
	"bytes"
	"fmt"
	"testing"
)

// The tests' policy resolves every global to a name (as an Unpickler
// whose find_class returns ("global", module, name) does) and refuses
// every call; their auditor records everything.

type testGlobal struct {
	module, name string
	off          int64
}

func (g *testGlobal) TypeName() string { return "global " + g.Describe() }
func (g *testGlobal) Describe() string { return g.module + "." + g.name }

type testPolicy struct {
	found []string // module.name@offset of every FindClass
}

func (p *testPolicy) FindClass(module, name string, off int64) (any, error) {
	p.found = append(p.found, fmt.Sprint(module, ".", name, "@", off))
	return &testGlobal{module, name, off}, nil
}

func (p *testPolicy) PersistentLoad(pid any, off int64) (any, error) {
	return nil, errorf(ErrUnsupported, off, "persistent id %s", Describe(pid))
}

func (p *testPolicy) Reduce(callable, args any, off int64) (any, error) {
	return nil, &Error{Kind: ErrNotAllowed, Offset: off, Global: Describe(callable), Msg: "refusing to call " + Describe(callable)}
}

func (p *testPolicy) Build(inst, state any, off int64) error {
	return errorf(ErrNotAllowed, off, "BUILD on a %s", Describe(inst))
}

type testAudit struct {
	imports  []Import
	calls    []string
	problems []string
}

func (a *testAudit) Import(g Import) { a.imports = append(a.imports, g) }
func (a *testAudit) Call(op Op, off int64, target string) {
	a.calls = append(a.calls, fmt.Sprint(op, "@", off, ":", target))
}
func (a *testAudit) Problem(off int64, msg string) {
	a.problems = append(a.problems, fmt.Sprint(off, ": ", msg))
}
func (a *testAudit) FrameEnd() Auditor { return a }

// named returns the Named imports as module.name@offset.
func (a *testAudit) named() []string {
	var out []string
	for _, g := range a.imports {
		if g.How == Named {
			out = append(out, fmt.Sprint(g.Module, ".", g.Name, "@", g.Offset))
		}
	}
	return out
}

func testLimits() Limits {
	return Limits{MaxPickleBytes: 1 << 30, MaxStringBytes: 256 << 20, MaxLongBytes: 1024, MaxMemo: 1 << 24,
		MaxStack: 1 << 20, MaxMarks: 1 << 16, MaxObjects: 1 << 27}
}

// decode runs one strict machine over b.
func decode(b []byte) (any, error) {
	return NewMachine(NewStream(bytes.NewReader(b), 0, int64(len(b))), Config{Limits: testLimits(), Policy: &testPolicy{}}).Run()
}

// audit runs one machine in audit mode over b.
func audit(b []byte, lim Limits) (*testPolicy, *testAudit, error) {
	p, a := &testPolicy{}, &testAudit{}
	_, err := NewMachine(NewStream(bytes.NewReader(b), 0, int64(len(b))), Config{Limits: lim, Policy: p, Audit: a}).Run()
	return p, a, err
}

// walk runs the walker over b from a fresh state.
func walk(b []byte) (*testAudit, *Walks) {
	a, ws := &testAudit{}, NewWalks(0)
	ws.Walk(bytes.NewReader(b), 0, 0, int64(len(b)), a, nil)
	return a, ws
}

// TestPolicyDecides: the machine resolves and calls nothing itself; what
// the policy returns is what is pushed, and its refusals stop a strict
// machine unchanged.
func TestPolicyDecides(t *testing.T) {
	v, err := decode([]byte("\x80\x02cposix\nsystem\nq\x00h\x00\x86."))
	if err != nil {
		t.Fatal(err)
	}
	tup, ok := v.(Tuple)
	if !ok || len(tup) != 2 || tup[0] != tup[1] || Describe(tup[0]) != "posix.system" {
		t.Fatalf("got %#v", v)
	}
	_, err = decode([]byte("cposix\nsystem\n(S'true'\ntR."))
	if e, ok := err.(*Error); !ok || e.Kind != ErrNotAllowed || e.Global != "posix.system" {
		t.Fatalf("REDUCE: %v", err)
	}
	// audit mode: the construct the machine refuses itself is reported and stood in for
	p, a, err := audit([]byte("\x80\x02cposix\nsystem\n)\x81\x82\x05."), testLimits())
	if err != nil || len(a.calls) != 2 || len(a.imports) != 1 || a.imports[0].How != Extension || len(p.found) != 1 {
		t.Fatalf("audit: %v %v %v", err, a.calls, p.found)
	}
}

func TestOpString(t *testing.T) {
	if OpStackGlobal.String() != "STACK_GLOBAL" || OpFrame.String() != "FRAME" || Op(0xff).String() != "" {
		t.Fatal(OpStackGlobal, OpFrame, Op(0xff))
	}
	var s OpSet
	s.Add(OpStop)
	s.Add(OpReadOnlyBuffer)
	if !s.Has(OpStop) || !s.Has(OpReadOnlyBuffer) || s.Has(OpMark) {
		t.Fatal(s)
	}
}
