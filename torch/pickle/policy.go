package pickle

// Policy is what the machine asks the outside world, as CPython's
// Unpickler asks find_class and persistent_load and then calls what they
// return: the machine itself resolves nothing and calls nothing. What a
// Policy returns is pushed as it is; an error stops a strict machine (and
// is returned by Run unchanged). In audit mode a Policy is expected to
// record its refusals itself and return a stand-in (an *Opaque), so that
// the machine goes on.
type Policy interface {
	// FindClass resolves the global module.name of a GLOBAL or
	// STACK_GLOBAL opcode at off (and, in audit mode, of INST).
	FindClass(module, name string, off int64) (any, error)
	// PersistentLoad resolves the persistent id of a BINPERSID.
	PersistentLoad(pid any, off int64) (any, error)
	// Reduce is REDUCE: what callable(*args) would build. callable is
	// what FindClass (or anything else) put on the stack.
	Reduce(callable, args any, off int64) (any, error)
	// Build is BUILD: state applied to inst, which stays on the stack.
	Build(inst, state any, off int64) error
}

// Constructor is implemented by a Policy that builds what NEWOBJ
// (cls.__new__(cls, *args)) makes of a class it resolved. Without it, or
// when it declines (ok false), the machine refuses NEWOBJ as it refuses
// INST, OBJ and NEWOBJ_EX.
type Constructor interface {
	NewObj(cls, args any, off int64) (v any, ok bool, err error)
}

// Extensions is implemented by a Policy that knows copyreg's extension
// registry, which EXT1, EXT2 and EXT4 look codes up in. Extension returns
// what code names, pushed as FindClass's result is; an error stops the
// machine, as CPython's unpickler raises "unregistered extension code".
// Without it, a machine in audit mode reports the code (an Import of How
// Extension, and a Call) and goes on, and a strict machine refuses it.
type Extensions interface {
	Extension(code uint64, off int64) (any, error)
}

// Auditor receives what a machine in audit mode, and the walker, find
// beyond what they hand to the Policy.
type Auditor interface {
	// Import reports a global a real unpickler would import that the
	// Policy was not asked about (the walker's finds, EXT codes,
	// STACK_GLOBAL operands the machine did not compute).
	Import(g Import)
	// Call reports an opcode at off that would run code in a real
	// unpickler (INST, OBJ, NEWOBJ, NEWOBJ_EX, EXT codes, APPEND or
	// SETITEM onto an object that is not a list or dict); target names
	// what it acts on.
	Call(op Op, off int64, target string)
	// Problem reports something a torch-written pickle never holds (a
	// FRAME running past its STOP, an argument crossing a frame end, a
	// text persistent id, a limit of the walker).
	Problem(off int64, msg string)
	// FrameEnd returns the Auditor for the walks of what CPython reads
	// from a FRAME's end (it may name them differently).
	FrameEnd() Auditor
}

// How says how a machine or walker came by an Import.
type How int

const (
	// Named: the walker read module and name (GLOBAL, INST, or a
	// STACK_GLOBAL whose operands it tracked); only names Python could
	// import (dotted identifiers) are reported.
	Named How = iota
	// Unknown: STACK_GLOBAL operands that are not known strings (values
	// the machine did not compute, or that the walker lost track of): at
	// load time they may name anything. Module and Name are "?".
	Unknown
	// Extension: an EXT1/2/4 copyreg extension code; Module is
	// "<copyreg-extension>" and Name the code.
	Extension
)

// Import is a global found by the machine or the walker.
type Import struct {
	Module, Name string
	Offset       int64
	How          How
	Walked       bool   // found by the walker, past where full decoding stopped
	Detail       string // Unknown from the machine: what the operands are
}

// OpSet is a set of opcodes.
type OpSet [4]uint64

// Add adds op to the set.
func (s *OpSet) Add(op Op) { s[op>>6] |= 1 << (op & 63) }

// Has reports whether op is in the set.
func (s *OpSet) Has(op Op) bool { return s[op>>6]&(1<<(op&63)) != 0 }

// Union adds every opcode of t to s.
func (s *OpSet) Union(t OpSet) {
	for i := range s {
		s[i] |= t[i]
	}
}
