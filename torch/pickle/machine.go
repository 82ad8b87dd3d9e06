package pickle

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/big"
	"unicode/utf8"
)

// Machine is the inert pickle machine. One Machine decodes one pickle;
// consecutive pickles of one Stream take one Machine each.
type Machine struct {
	s      *Stream
	lim    Limits
	policy Policy
	audit  Auditor // nil: strict (stop at the first refusal)
	walks  *Walks

	stack   []any
	marks   []int
	memo    memo[any]
	objects int64
	proto   int
	seen    OpSet

	// frameEnd is the furthest end of a FRAME seen (relative offset, 0:
	// none); frameOver is set when it lies past the STOP (see Run)
	frameEnd, frameOver int64

	// where the current opcode started, for FailState
	failOff              int64
	failStack, failMarks int
	// the memo entry the current opcode (a PUT) replaced, for the state
	// before it (crossState): put says it did, had that the index was set
	put, had bool
	putIdx   uint64
	putOld   any

	// raised: an exact machine stopped where CPython's unpickler raises
	// (ErrRaises), which reads nothing after (see FailState)
	raised bool
}

// Config is what a Machine is given.
type Config struct {
	Limits Limits
	Policy Policy
	// Audit, when set, puts the machine in audit mode: it never stops at
	// what strict mode refuses (an unknown construct, a policy's refusal
	// recorded by the policy itself), pushing an *Opaque stand-in instead
	// and telling Audit; and it walks the bytes CPython may read from a
	// FRAME's end (see Walks). Only malformed bytes and limits stop it.
	Audit Auditor
	// Walks is shared by the machines and walkers of one audit (audit mode
	// only; nil: one of its own).
	Walks *Walks
}

// NewMachine returns a machine that decodes the next pickle of s.
func NewMachine(s *Stream, c Config) *Machine {
	m := &Machine{}
	m.Reset(s, c)
	return m
}

// Reset makes m a machine that decodes the next pickle of s, as
// NewMachine does, reusing m's memory (a stream of many small pickles,
// or a Machine held by value in a larger struct).
func (m *Machine) Reset(s *Stream, c Config) {
	clear(m.stack[:cap(m.stack)])
	stack, marks := m.stack[:0], m.marks[:0]
	m.memo.reset()
	*m = Machine{s: s, lim: c.Limits, policy: c.Policy, audit: c.Audit, walks: c.Walks, stack: stack, marks: marks, memo: m.memo}
	if m.audit != nil && m.walks == nil {
		m.walks = NewWalks(0)
	}
}

func (m *Machine) errf(kind error, off int64, format string, args ...any) *Error {
	return errorf(kind, off, format, args...)
}

// base is the stack index of the innermost MARK: like Python's metastack,
// nothing below it is reachable until the mark is popped.
func (m *Machine) base() int {
	if len(m.marks) == 0 {
		return 0
	}
	return m.marks[len(m.marks)-1]
}

func (m *Machine) push(v any) error {
	if len(m.stack) >= m.lim.MaxStack {
		return m.errf(ErrLimit, m.s.pos, "stack deeper than %d", m.lim.MaxStack)
	}
	m.stack = append(m.stack, v)
	return nil
}

func (m *Machine) pop(off int64) (any, error) {
	if len(m.stack) <= m.base() {
		return nil, m.errf(ErrCorrupt, off, "stack underflow")
	}
	v := m.stack[len(m.stack)-1]
	if m.audit == nil { // scan mode keeps popped values for the walker (see failState)
		m.stack[len(m.stack)-1] = nil
	}
	m.stack = m.stack[:len(m.stack)-1]
	return v, nil
}

func (m *Machine) top(off int64) (any, error) {
	if len(m.stack) <= m.base() {
		return nil, m.errf(ErrCorrupt, off, "stack underflow")
	}
	return m.stack[len(m.stack)-1], nil
}

// popMark removes and returns the items above the innermost MARK.
func (m *Machine) popMark(off int64) ([]any, error) {
	if len(m.marks) == 0 {
		return nil, m.errf(ErrCorrupt, off, "no MARK on the stack")
	}
	k := m.marks[len(m.marks)-1]
	m.marks = m.marks[:len(m.marks)-1]
	items := make([]any, len(m.stack)-k)
	copy(items, m.stack[k:])
	if m.audit == nil {
		clear(m.stack[k:])
	}
	m.stack = m.stack[:k]
	return items, nil
}

// Charge adds n units of work to the machine's MaxObjects budget: a
// Policy whose Reduce copies a container charges its length, so that a
// memo-shared container rebuilt again and again stays bounded.
func (m *Machine) Charge(n int) error { return m.count(n) }

// count charges n units of work against MaxObjects.
func (m *Machine) count(n int) error {
	m.objects += int64(n)
	if m.objects > m.lim.MaxObjects {
		return m.errf(ErrLimit, m.s.pos, "more than %d pickle objects", m.lim.MaxObjects)
	}
	return nil
}

func (m *Machine) u8() (int64, error) {
	b, err := m.s.readByte()
	return int64(b), err
}

func (m *Machine) le(n int) (uint64, error) {
	b, err := m.s.next(n)
	if err != nil {
		return 0, err
	}
	var u uint64
	for i := n - 1; i >= 0; i-- {
		u = u<<8 | uint64(b[i])
	}
	return u, nil
}

// bytesOf reads a length-prefixed payload; n comes from the file and is
// checked against the bytes that remain and the string cap before allocating.
func (m *Machine) bytesOf(n uint64, off int64) ([]byte, error) {
	if n > uint64(m.s.remaining()) {
		return nil, m.errf(ErrCorrupt, off, "length %d exceeds the %d bytes that remain", n, m.s.remaining())
	}
	if n > uint64(m.lim.MaxStringBytes) {
		return nil, m.errf(ErrLimit, off, "string of %d bytes exceeds the %d-byte limit", n, m.lim.MaxStringBytes)
	}
	return m.s.readN(int64(n))
}

func (m *Machine) utf8Of(n uint64, off int64) (string, error) {
	b, err := m.bytesOf(n, off)
	if err != nil {
		return "", err
	}
	if !utf8.Valid(b) {
		return "", m.errf(ErrCorrupt, off, "string is not valid UTF-8")
	}
	return string(b), nil
}

func (m *Machine) line(off int64) ([]byte, error) {
	// CPython reads lines of any length; MaxStringBytes bounds the memory
	return m.s.readLine(m.lim.MaxStringBytes)
}

// Run decodes one pickle, up to and including its STOP, and returns its
// value. In audit mode, where the pickle's FRAME runs past its STOP, what
// CPython may read from the frame end is walked before Run returns.
func (m *Machine) Run() (any, error) {
	v, err := m.run()
	if m.frameOver > 0 {
		m.walks.frameEnd(m.s.r, m.s.base, frameWalk{from: m.frameOver, opOff: m.frameOver, crossAt: m.frameOver}, m.s.limit, m.audit)
	}
	return v, err
}

// Opcodes returns the opcodes Run stepped.
func (m *Machine) Opcodes() OpSet { return m.seen }

func (m *Machine) run() (any, error) {
	start := m.s.pos
	// each pickle.load starts with an empty buffer; bytes after the STOP are
	// not read by the unpickler
	m.s.frame, m.s.crossed = 0, 0
	defer func() { m.s.frame, m.s.crossed = 0, 0 }()
	for {
		off := m.s.pos
		m.failOff, m.failStack, m.failMarks = off, len(m.stack), len(m.marks)
		m.put = false
		if off-start > m.lim.MaxPickleBytes {
			return nil, m.errf(ErrLimit, off, "pickle longer than %d bytes", m.lim.MaxPickleBytes)
		}
		b, err := m.s.readByte()
		if err != nil {
			return nil, err
		}
		op := Op(b)
		if err := m.count(1); err != nil {
			return nil, err
		}
		m.seen.Add(op)
		if op == OpStop {
			v, err := m.pop(off)
			if err != nil {
				return nil, err
			}
			if err := m.checkFrameEnd(off); err != nil {
				return nil, err
			}
			return v, nil
		}
		err = m.step(op, off)
		if cerr := m.checkCross(op, off); cerr != nil {
			return nil, cerr
		}
		if err != nil {
			if m.exact() && errors.Is(err, ErrRaises) {
				m.raised = true
			}
			return nil, err
		}
	}
}

// checkCross handles an argument or text line of the opcode op at off that
// crossed the end of the current FRAME. CPython's C unpickler, when it read
// the frame with read(n) (io.BytesIO as torch's zip reader gives it,
// unbuffered files, frames of 128 KiB or more), then discards the rest of
// the frame and reads the argument, and all that follows, from the frame
// end, while a buffered file that prefetched past the frame goes straight
// on. Strict mode refuses; scan mode records a problem and also walks the
// bytes CPython reads: op and its arguments read before the one that
// crossed, then the frame end on, from the state before op.
func (m *Machine) checkCross(op Op, off int64) error {
	fe, at := m.s.takeCross()
	if fe == 0 {
		return nil
	}
	msg := fmt.Sprintf("an argument crosses a frame end (offset %d): CPython reads it from the frame end", fe)
	if m.audit == nil {
		return m.errf(ErrCorrupt, off, "%s", msg)
	}
	m.audit.Problem(off, msg)
	st := m.crossState()
	m.walks.frameEnd(m.s.r, m.s.base, frameWalk{from: fe, opOff: off, crossAt: at, st: st}, m.s.limit, m.audit)
	return nil
}

// checkFrameEnd handles a FRAME that runs past the STOP at off. Python's
// Unpickler leaves the file either just after the STOP (a buffered file
// that prefetched the frame) or at the frame's end (a frame read with
// read(n): unbuffered files, BytesIO, frames larger than the buffer), so
// the next pickle torch reads may start at either. Pickle writers end the
// last frame with the STOP. Strict mode refuses; scan mode records a
// problem and leaves frameOver for the caller to scan from the frame end.
func (m *Machine) checkFrameEnd(off int64) error {
	if m.frameEnd <= m.s.pos {
		return nil
	}
	msg := fmt.Sprintf("FRAME runs %d bytes past the STOP (to offset %d): the next pickle may start after the STOP or at the frame end; both are scanned", m.frameEnd-m.s.pos, m.frameEnd)
	if m.audit == nil {
		return m.errf(ErrCorrupt, off, "%s", msg)
	}
	m.audit.Problem(off, msg)
	m.frameOver = m.frameEnd
	return nil
}

// crossState returns a bounded copy of the state before the current opcode
// (see failState) for a walk from a frame end an argument crossed: the top
// of the stack, and the memo only when it is small.
func (m *Machine) crossState() *State {
	st := &State{}
	stack := m.stack[:min(m.failStack, cap(m.stack))]
	cut := max(len(stack)-maxCrossStack, 0)
	st.bottomLost = cut > 0
	for _, v := range stack[cut:] {
		st.stack = append(st.stack, shadowOf(v))
	}
	for _, k := range m.marks[:min(m.failMarks, cap(m.marks))] {
		if k >= cut {
			st.marks = append(st.marks, k-cut)
		} else {
			st.marksLost = true
		}
	}
	if len(st.marks) > maxCrossStack {
		st.marks, st.marksLost = st.marks[len(st.marks)-maxCrossStack:], true
	}
	if len(m.memo.dense)+len(m.memo.sparse) > maxCrossMemo {
		st.memoLost = true
		return st
	}
	// as it was before the opcode: a PUT whose index crossed the frame
	// end has set the index the machine read, not the one CPython reads
	before := func(k uint64, v any) {
		if m.put && k == m.putIdx {
			if !m.had {
				return
			}
			v = m.putOld
		}
		st.memo.put(k, shadowOf(v))
	}
	for i, v := range m.memo.dense {
		before(uint64(i), v)
	}
	for k, v := range m.memo.sparse {
		before(k, v)
	}
	return st
}

// maxCrossMemo bounds the memo copied for a walk from a frame end.
const maxCrossMemo = 4096

// FailState returns, after Run failed in audit mode, the offset of the
// opcode it failed on and the stack, marks and memo as they were before
// that opcode (popped values are not cleared in audit mode, and the memo
// only changes on success), for a walker to go on from (see Walks.Walk).
func (m *Machine) FailState() (int64, *State) {
	st := &State{}
	if m.failStack <= cap(m.stack) {
		for _, v := range m.stack[:m.failStack] {
			st.stack = append(st.stack, shadowOf(v))
		}
	}
	if m.failMarks <= cap(m.marks) {
		st.marks = append(st.marks, m.marks[:m.failMarks]...)
	}
	for i, v := range m.memo.dense {
		if st.memo.count >= maxWalkMemo {
			st.memoLost = true
			break
		}
		st.memo.put(uint64(i), shadowOf(v))
	}
	for k, v := range m.memo.sparse {
		if st.memo.count >= maxWalkMemo {
			st.memoLost = true
			break
		}
		st.memo.put(k, shadowOf(v))
	}
	st.raised = m.raised
	return m.failOff, st
}

// step executes one opcode (other than STOP).
func (m *Machine) step(op Op, off int64) error {
	switch op {
	case OpProto:
		p, err := m.u8()
		if err != nil {
			return err
		}
		if p > 5 {
			return m.errf(ErrUnsupported, off, "pickle protocol %d", p)
		}
		m.proto = int(p)
		return nil
	case OpFrame:
		n, err := m.le(8)
		if err != nil {
			return err
		}
		if n > uint64(m.s.remaining()) {
			return m.errf(ErrCorrupt, off, "FRAME of %d bytes exceeds the %d bytes that remain", n, m.s.remaining())
		}
		m.frameEnd = max(m.frameEnd, m.s.pos+int64(n))
		m.s.startFrame(int64(n))
		return nil
	case OpMark:
		if len(m.marks) >= m.lim.MaxMarks {
			return m.errf(ErrLimit, off, "more than %d nested MARKs", m.lim.MaxMarks)
		}
		m.marks = append(m.marks, len(m.stack))
		return nil
	case OpPop:
		if len(m.stack) > m.base() {
			_, err := m.pop(off)
			return err
		}
		_, err := m.popMark(off)
		return err
	case OpPopMark:
		_, err := m.popMark(off)
		return err
	case OpDup:
		v, err := m.top(off)
		if err != nil {
			return err
		}
		return m.push(v)

	case OpNone:
		return m.push(nil)
	case OpNewTrue:
		return m.push(true)
	case OpNewFalse:
		return m.push(false)
	case OpInt:
		l, err := m.line(off)
		if err != nil {
			return err
		}
		v, ok := parseIntOp(l, 3*m.lim.MaxLongBytes)
		if !ok {
			return m.errf(ErrCorrupt, off, "bad INT literal %q (not what CPython's unpickler accepts, or over %d digits)", truncate(l), 3*m.lim.MaxLongBytes)
		}
		return m.push(v)
	case OpLong:
		l, err := m.line(off)
		if err != nil {
			return err
		}
		v, ok := parseLongOp(l, 3*m.lim.MaxLongBytes)
		if !ok {
			return m.errf(ErrCorrupt, off, "bad LONG literal %q (not what CPython's unpickler accepts, or over %d digits)", truncate(l), 3*m.lim.MaxLongBytes)
		}
		return m.push(v)
	case OpBinInt:
		u, err := m.le(4)
		if err != nil {
			return err
		}
		return m.push(int64(int32(uint32(u))))
	case OpBinInt1:
		u, err := m.le(1)
		if err != nil {
			return err
		}
		return m.push(int64(u))
	case OpBinInt2:
		u, err := m.le(2)
		if err != nil {
			return err
		}
		return m.push(int64(u))
	case OpLong1, OpLong4:
		n, err := m.signedLen(op == OpLong1, "LONG4", off)
		if err != nil {
			return err
		}
		if n > uint64(m.lim.MaxLongBytes) {
			return m.errf(ErrLimit, off, "integer of %d bytes exceeds the %d-byte limit", n, m.lim.MaxLongBytes)
		}
		b, err := m.bytesOf(n, off)
		if err != nil {
			return err
		}
		return m.push(decodeLong(b))
	case OpFloat:
		l, err := m.line(off)
		if err != nil {
			return err
		}
		f, ok := parseFloatOp(l)
		if !ok {
			return m.errf(ErrCorrupt, off, "bad FLOAT literal %q", truncate(l))
		}
		return m.push(f)
	case OpBinFloat:
		b, err := m.s.next(8)
		if err != nil {
			return err
		}
		return m.push(math.Float64frombits(binary.BigEndian.Uint64(b)))

	case OpShortBinUnicode, OpBinUnicode, OpBinUnicode8:
		n, err := m.le(lenWidth(op))
		if err != nil {
			return err
		}
		// CPython decodes these with "surrogatepass": lone surrogates are
		// kept (as their 3-byte encodings, which stay distinct)
		b, err := m.bytesOf(n, off)
		if err != nil {
			return err
		}
		if !validWTF8(b) {
			return m.errf(ErrCorrupt, off, "string is not valid UTF-8")
		}
		return m.push(string(b))
	case OpShortBinBytes, OpBinBytes, OpBinBytes8:
		n, err := m.le(lenWidth(op))
		if err != nil {
			return err
		}
		b, err := m.bytesOf(n, off)
		if err != nil {
			return err
		}
		return m.push(b)
	case OpShortBinString, OpBinString:
		n, err := m.signedLen(op == OpShortBinString, "BINSTRING", off)
		if err != nil {
			return err
		}
		s, err := m.utf8Of(n, off)
		if err != nil {
			return err
		}
		return m.push(s)
	case OpString:
		l, err := m.line(off)
		if err != nil {
			return err
		}
		b, ok := parseStringRepr(l)
		if !ok || !utf8.Valid(b) {
			return m.errf(ErrCorrupt, off, "bad STRING literal %q", truncate(l))
		}
		return m.push(string(b))
	case OpUnicode:
		l, err := m.line(off)
		if err != nil {
			return err
		}
		s, ok := decodeRawUnicodeEscape(l)
		if !ok {
			return m.errf(ErrCorrupt, off, "bad UNICODE literal %q", truncate(l))
		}
		return m.push(s)
	case OpByteArray8:
		// a bytearray, protocol 5's in-band form (torch.save writes it
		// for a bytearray value)
		n, err := m.le(8)
		if err != nil {
			return err
		}
		b, err := m.bytesOf(n, off)
		if err != nil {
			return err
		}
		return m.push(ByteArray(b))
	case OpNextBuffer, OpReadOnlyBuffer:
		return m.buffers(op, off)

	case OpEmptyTuple:
		return m.push(Tuple{})
	case OpTuple:
		items, err := m.popMark(off)
		if err != nil {
			return err
		}
		if err := m.count(len(items)); err != nil {
			return err
		}
		return m.push(Tuple(items))
	case OpTuple1, OpTuple2, OpTuple3:
		n := int(op-OpTuple1) + 1
		if len(m.stack)-m.base() < n {
			return m.errf(ErrCorrupt, off, "stack underflow")
		}
		t := make(Tuple, n)
		copy(t, m.stack[len(m.stack)-n:])
		if m.audit == nil {
			clear(m.stack[len(m.stack)-n:])
		}
		m.stack = m.stack[:len(m.stack)-n]
		return m.push(t)
	case OpEmptyList:
		return m.push(&List{})
	case OpList:
		items, err := m.popMark(off)
		if err != nil {
			return err
		}
		if err := m.count(len(items)); err != nil {
			return err
		}
		return m.push(&List{Items: items})
	case OpEmptyDict:
		return m.push(&Dict{})
	case OpDict:
		items, err := m.popMark(off)
		if err != nil {
			return err
		}
		d := &Dict{}
		if err := m.setItems(d, items, off); err != nil {
			return err
		}
		return m.push(d)
	case OpAppend:
		v, err := m.pop(off)
		if err != nil {
			return err
		}
		return m.appendTo([]any{v}, op, off)
	case OpAppends:
		items, err := m.popMark(off)
		if err != nil {
			return err
		}
		return m.appendTo(items, op, off)
	case OpSetItem:
		v, err := m.pop(off)
		if err != nil {
			return err
		}
		k, err := m.pop(off)
		if err != nil {
			return err
		}
		return m.setItemsOn([]any{k, v}, op, off)
	case OpSetItems:
		items, err := m.popMark(off)
		if err != nil {
			return err
		}
		return m.setItemsOn(items, op, off)
	case OpEmptySet, OpFrozenSet, OpAddItems:
		return m.sets(op, off)

	case OpGet, OpBinGet, OpLongBinGet:
		idx, err := m.memoIndex(op, off)
		if err != nil {
			return err
		}
		v, ok := m.memo.get(idx)
		if !ok {
			return m.errf(ErrCorrupt, off, "memo index %d is undefined", idx)
		}
		return m.push(v)
	case OpPut, OpBinPut, OpLongBinPut, OpMemoize:
		var idx uint64
		if op == OpMemoize {
			idx = uint64(m.memo.count)
		} else {
			var err error
			if idx, err = m.memoIndex(op, off); err != nil {
				return err
			}
		}
		v, err := m.top(off)
		if err != nil {
			return err
		}
		m.put, m.putIdx = true, idx
		m.putOld, m.had = m.memo.get(idx)
		m.memo.put(idx, v)
		if m.memo.count > m.lim.MaxMemo {
			return m.errf(ErrLimit, off, "more than %d memo entries", m.lim.MaxMemo)
		}
		return nil

	case OpGlobal:
		mod, err := m.line(off)
		if err != nil {
			return err
		}
		name, err := m.line(off)
		if err != nil {
			return err
		}
		if len(mod) == 0 || len(name) == 0 {
			return m.errf(ErrCorrupt, off, "GLOBAL with an empty module or name")
		}
		if !utf8.Valid(mod) || !utf8.Valid(name) {
			return m.errf(ErrCorrupt, off, "GLOBAL name is not valid UTF-8")
		}
		return m.global(string(mod), string(name), off)
	case OpStackGlobal:
		nv, err := m.pop(off)
		if err != nil {
			return err
		}
		mv, err := m.pop(off)
		if err != nil {
			return err
		}
		mod, ok1 := mv.(string)
		name, ok2 := nv.(string)
		if !ok1 || !ok2 {
			if m.audit != nil && mayBeStr(mv) && mayBeStr(nv) {
				// the operands are results the inert machine did not compute
				// (a refused call such as _codecs.encode(..., 'rot13')): at
				// run time they may be any names
				m.audit.Import(Import{Module: "?", Name: "?", Offset: off, How: Unknown,
					Detail: fmt.Sprintf("STACK_GLOBAL operands are %s and %s, computed at load time: they may name any callable", Describe(mv), Describe(nv))})
				return m.push(&Opaque{What: "?.?", Offset: off})
			}
			return m.errf(ErrCorrupt, off, "STACK_GLOBAL operands are %s and %s, not strings", TypeName(mv), TypeName(nv))
		}
		return m.global(mod, name, off)
	case OpInst, OpObj, OpNewObj, OpNewObjEx:
		return m.construct(op, off)
	case OpExt1, OpExt2, OpExt4:
		n, err := m.le(lenWidth(op))
		if err != nil {
			return err
		}
		if ep, ok := m.policy.(Extensions); ok {
			v, err := ep.Extension(n, off)
			if err != nil {
				return err
			}
			return m.push(v)
		}
		name := fmt.Sprintf("<copyreg-extension>.%d", n)
		if m.audit == nil {
			return &Error{Kind: ErrNotAllowed, Offset: off, Global: name,
				Msg: fmt.Sprintf("refusing %s %s (copyreg extension codes resolve to arbitrary callables)", op.String(), name)}
		}
		m.audit.Import(Import{Module: "<copyreg-extension>", Name: fmt.Sprint(n), Offset: off, How: Extension})
		m.audit.Call(op, off, name)
		return m.push(&Opaque{What: name, Offset: off})
	case OpPersID:
		l, err := m.line(off)
		if err != nil {
			return err
		}
		if m.audit == nil {
			return m.errf(ErrUnsupported, off, "text persistent id (PERSID %q) is not supported (only BINPERSID is)", truncate(l))
		}
		if m.exact() {
			// CPython hands a text id to persistent_load, as a binary one
			if _, err := m.policy.PersistentLoad(string(l), off); err != nil {
				return err
			}
		}
		m.audit.Problem(off, fmt.Sprintf("text persistent id PERSID %q", truncate(l)))
		return m.push(&Opaque{What: "persistent id", Offset: off})
	case OpBinPersID:
		pid, err := m.pop(off)
		if err != nil {
			return err
		}
		v, err := m.policy.PersistentLoad(pid, off)
		if err != nil {
			return err
		}
		return m.push(v)
	case OpReduce:
		args, err := m.pop(off)
		if err != nil {
			return err
		}
		callee, err := m.pop(off)
		if err != nil {
			return err
		}
		if m.exact() && native(callee) {
			return m.raise(op, off, "TypeError: a %s is not callable", TypeName(callee))
		}
		v, err := m.policy.Reduce(callee, args, off)
		if err != nil {
			return err
		}
		return m.push(v)
	case OpBuild:
		state, err := m.pop(off)
		if err != nil {
			return err
		}
		inst, err := m.top(off)
		if err != nil {
			return err
		}
		if m.exact() && native(inst) {
			if done, err := m.buildNative(inst, state, off); done {
				return err
			}
		}
		return m.policy.Build(inst, state, off)
	}
	return m.errf(ErrCorrupt, off, "unknown opcode 0x%02x", byte(op))
}

func (m *Machine) memoIndex(op Op, off int64) (uint64, error) {
	switch op {
	case OpBinGet, OpBinPut:
		return m.le(1)
	case OpLongBinGet, OpLongBinPut:
		return m.le(4)
	}
	l, err := m.line(off)
	if err != nil {
		return 0, err
	}
	v, ok := parsePyLong(l, 10, 40)
	i, isInt := v.(int64)
	if !ok || !isInt || i < 0 {
		return 0, m.errf(ErrCorrupt, off, "bad memo index %q", truncate(l))
	}
	return uint64(i), nil
}

// global handles GLOBAL, STACK_GLOBAL: the policy resolves the name.
func (m *Machine) global(module, name string, off int64) error {
	v, err := m.policy.FindClass(module, name, off)
	if err != nil {
		return err
	}
	return m.push(v)
}

// construct handles INST, OBJ, NEWOBJ and NEWOBJ_EX, which instantiate a
// class without REDUCE: refused, but for NEWOBJ of a class the policy
// builds (Constructor).
func (m *Machine) construct(op Op, off int64) error {
	var target string
	switch op {
	case OpInst:
		if m.exact() && len(m.marks) == 0 {
			// CPython's INST looks for its MARK before it reads a line
			return m.raise(op, off, "UnpicklingError: could not find MARK")
		}
		mod, err := m.line(off)
		if err != nil {
			return err
		}
		name, err := m.line(off)
		if err != nil {
			return err
		}
		if m.exact() && (!ascii(mod) || !ascii(name)) {
			// ... and decodes both lines as strict ASCII before find_class
			return m.raise(op, off, "UnicodeDecodeError: INST lines are ASCII, or empty")
		}
		target = globalName(string(mod), string(name))
		if m.audit != nil {
			// CPython's INST calls find_class: the policy records the name
			if _, err := m.policy.FindClass(string(mod), string(name), off); err != nil {
				return err
			}
		}
		if _, err := m.popMark(off); err != nil {
			return err
		}
	case OpObj:
		items, err := m.popMark(off)
		if err != nil {
			return err
		}
		if len(items) == 0 {
			return m.errf(ErrCorrupt, off, "OBJ without a class")
		}
		if m.exact() && native(items[0]) {
			return m.raise(op, off, "TypeError: a %s is not callable", TypeName(items[0]))
		}
		target = Describe(items[0])
	case OpNewObj, OpNewObjEx:
		if op == OpNewObjEx {
			if _, err := m.pop(off); err != nil { // kwargs
				return err
			}
		}
		args, err := m.pop(off)
		if err != nil {
			return err
		}
		cls, err := m.pop(off)
		if err != nil {
			return err
		}
		if m.exact() && native(cls) {
			return m.raise(op, off, "UnpicklingError: the class argument is a %s, not a type", TypeName(cls))
		}
		if c, isC := m.policy.(Constructor); isC && op == OpNewObj {
			v, ok, err := c.NewObj(cls, args, off)
			if err != nil {
				return err
			}
			if ok {
				return m.push(v)
			}
		}
		target = Describe(cls)
	}
	if m.audit == nil {
		return &Error{Kind: ErrNotAllowed, Offset: off, Global: target,
			Msg: fmt.Sprintf("refusing %s %s (the %s opcode instantiates a class the policy was not asked about)", op.String(), target, op.String())}
	}
	m.audit.Call(op, off, target)
	return m.push(&Opaque{What: target + " instance", Offset: off})
}

// buffers handles NEXT_BUFFER and READONLY_BUFFER: out-of-band buffers,
// which torch.load never supplies (pickle then refuses the stream).
func (m *Machine) buffers(op Op, off int64) error {
	if m.exact() {
		if op == OpNextBuffer {
			return m.raise(op, off, "UnpicklingError: torch.load passes no out-of-band buffers")
		}
		t, err := m.top(off)
		if err != nil {
			return err
		}
		switch t.(type) {
		case []byte, ByteArray:
			return nil // a read-only view of it
		}
		if native(t) {
			return m.raise(op, off, "TypeError: a %s is not a bytes-like object", TypeName(t))
		}
	}
	if m.audit == nil {
		return m.errf(ErrUnsupported, off, "opcode %s (out-of-band buffers) is not supported", op.String())
	}
	m.audit.Problem(off, "opcode "+op.String()+" (out-of-band buffers)")
	if op == OpNextBuffer {
		return m.push(&Opaque{What: "buffer", Offset: off})
	}
	_, err := m.top(off)
	return err
}

// sets handles EMPTY_SET, ADDITEMS and FROZENSET: inert values (torch.save
// writes them for a set or frozenset at protocol 4 and 5).
func (m *Machine) sets(op Op, off int64) error {
	switch op {
	case OpEmptySet:
		return m.push(&Set{})
	case OpFrozenSet:
		items, err := m.popMark(off)
		if err != nil {
			return err
		}
		if err := m.count(len(items)); err != nil {
			return err
		}
		return m.push(&Set{Items: items, Frozen: true})
	}
	items, err := m.popMark(off)
	if err != nil {
		return err
	}
	t, err := m.top(off)
	if err != nil {
		return err
	}
	if err := m.count(len(items)); err != nil {
		return err
	}
	set, ok := t.(*Set)
	if !ok || set.Frozen {
		return m.wrongTarget(op, off, t, len(items), "sets may receive items")
	}
	set.Items = append(set.Items, items...)
	return nil
}

// wrongTarget handles APPEND(S), SETITEM(S) or ADDITEMS of n items onto
// an object of another type: CPython would call one of its methods
// (append, __setitem__, add). Strict mode refuses; audit mode reports the
// call and goes on. An exact machine knows what CPython does with a value
// the pickle built: nothing for no items; bytearray.extend, or a list's or
// bytearray's __setitem__ (builtins, which may raise or not: it goes on);
// for any other, AttributeError or TypeError (it stops).
func (m *Machine) wrongTarget(op Op, off int64, t any, n int, only string) error {
	if m.exact() && native(t) {
		_, isBA := t.(ByteArray)
		_, isList := t.(*List)
		switch {
		case n == 0:
			return nil
		case isBA && (op == OpAppend || op == OpAppends || op == OpSetItem || op == OpSetItems),
			isList && (op == OpSetItem || op == OpSetItems):
			return nil
		}
		return m.raise(op, off, "a %s has no such method, or refuses the items", TypeName(t))
	}
	if m.audit != nil {
		m.audit.Call(op, off, Describe(t))
		return nil
	}
	return m.errf(ErrNotAllowed, off, "%s onto a %s (only %s)", op.String(), Describe(t), only)
}

func (m *Machine) appendTo(items []any, op Op, off int64) error {
	t, err := m.top(off)
	if err != nil {
		return err
	}
	if err := m.count(len(items)); err != nil {
		return err
	}
	l, ok := t.(*List)
	if !ok {
		return m.wrongTarget(op, off, t, len(items), "lists may be appended to")
	}
	l.Items = append(l.Items, items...)
	return nil
}

func (m *Machine) setItemsOn(items []any, op Op, off int64) error {
	t, err := m.top(off)
	if err != nil {
		return err
	}
	d, ok := t.(*Dict)
	if !ok {
		return m.wrongTarget(op, off, t, len(items), "dicts may receive items")
	}
	return m.setItems(d, items, off)
}

func (m *Machine) setItems(d *Dict, items []any, off int64) error {
	if len(items)%2 != 0 {
		return m.errf(ErrCorrupt, off, "odd number of items (%d) for a dict", len(items))
	}
	if err := m.count(len(items)); err != nil {
		return err
	}
	for i := 0; i < len(items); i += 2 {
		if c := keyCost(items[i]); c > 0 {
			if err := m.count(c); err != nil {
				return err
			}
		}
		if !d.Set(items[i], items[i+1]) {
			if m.audit != nil {
				continue
			}
			return m.errf(ErrUnsupported, off, "dict key of type %s is not supported", TypeName(items[i]))
		}
	}
	return nil
}

func truncate(b []byte) string {
	if len(b) > 80 {
		return string(b[:80]) + "..."
	}
	return string(b)
}

// lenWidth is the size in bytes of the length or code operand of op.
func lenWidth(op Op) int {
	switch op {
	case OpShortBinUnicode, OpShortBinBytes, OpExt1:
		return 1
	case OpExt2:
		return 2
	case OpBinUnicode, OpBinBytes, OpExt4:
		return 4
	}
	return 8
}

// signedLen reads the length operand of an opcode pair whose short form
// has a 1-byte length and whose long form a signed 4-byte one (LONG1/LONG4,
// SHORT_BINSTRING/BINSTRING); a negative long length is corrupt.
func (m *Machine) signedLen(short bool, long string, off int64) (uint64, error) {
	if short {
		return m.le(1)
	}
	n, err := m.le(4)
	if err == nil && int32(uint32(n)) < 0 {
		return 0, m.errf(ErrCorrupt, off, "%s with negative length", long)
	}
	return n, err
}

// globalName is module.name for messages, each part cut to MaxName bytes.
func globalName(module, name string) string { return clip(module) + "." + clip(name) }

func clip(s string) string {
	if len(s) > MaxName {
		return s[:MaxName] + "..."
	}
	return s
}

// exact reports whether m is an exact audit machine (Walks.SetExact): it
// stops where CPython's unpickler raises on a value the pickle built.
func (m *Machine) exact() bool { return m.audit != nil && m.walks != nil && m.walks.exact }

// raise ends an exact machine where CPython's unpickler raises on a value
// the pickle built itself (no global: nothing was imported or called), so
// that nothing after it, which CPython never reads, is taken for part of
// the pickle.
func (m *Machine) raise(op Op, off int64, format string, args ...any) error {
	e := m.errf(ErrRaises, off, "%s: CPython's unpickler raises here (%s) and reads nothing after", op.String(), fmt.Sprintf(format, args...))
	m.raised = true
	return e
}

// buildNative is BUILD on a value the pickle built, in an exact machine:
// a builtin value has no __setstate__ and no __dict__, so CPython does
// nothing for a state of None or (None, {}), and raises for a state it
// would store (a dict, slot attributes) or cannot read. done is false
// where the state is not the machine's own (the policy then judges it).
func (m *Machine) buildNative(inst, state any, off int64) (done bool, err error) {
	if state == nil {
		return true, nil
	}
	if t, ok := state.(Tuple); ok && len(t) == 2 && t[0] == nil {
		if d, isDict := t[1].(*Dict); isDict && d.Type == "" && d.Len() == 0 {
			return true, nil
		}
		if !native(t[1]) {
			return false, nil
		}
	} else if !native(state) {
		return false, nil
	}
	return true, m.raise(OpBuild, off, "a %s has no __setstate__ and no __dict__ for the state", TypeName(inst))
}

// ascii reports whether b is a non-empty line of ASCII bytes (what
// CPython's INST decodes its lines as).
func ascii(b []byte) bool {
	for _, c := range b {
		if c >= 0x80 {
			return false
		}
	}
	return len(b) > 0
}

// native reports whether v is a value the machine built from the pickle's
// own opcodes (no Policy result, no stand-in): a builtin Python value,
// which is not callable, not a type, and has no methods a pickle can
// reach but its builtin ones.
func native(v any) bool {
	switch x := v.(type) {
	case nil, bool, int64, *big.Int, float64, string, []byte, ByteArray, Tuple, *List, *Set:
		return true
	case *Dict:
		return x.Type == ""
	}
	return false
}
