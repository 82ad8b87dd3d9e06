package torch

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/big"
	"unicode/utf8"
)

// pidMode says which persistent ids a pickle may contain.
type pidMode int

const (
	pidNone   pidMode = iota // plain pickle: BINPERSID is an error
	pidZip                   // ('storage', type, key, location, numel)
	pidLegacy                // ('storage', type, key, location, numel, view_metadata)
)

// vm is the inert pickle machine. One vm decodes one pickle stream; several
// vms may share the storages table (the five pickles of a legacy file).
type vm struct {
	src   *source
	lim   *Limits
	entry string
	pids  pidMode
	scan  *scanSink // nil: strict mode (stop at the first refusal)

	stack   []any
	marks   []int
	memo    memo
	objects int64
	proto   int
	encoded int64 // bytes produced by _codecs.encode calls

	// frameEnd is the furthest end of a FRAME seen (relative offset, 0:
	// none); frameOver is set when it lies past the STOP (see run)
	frameEnd, frameOver int64

	storages map[string]*storageRef
	ids      *int

	// where the current opcode started, for failState
	failOff              int64
	failStack, failMarks int
}

func newVM(src *source, lim *Limits, entry string, pids pidMode, storages map[string]*storageRef, ids *int) *vm {
	if storages == nil {
		storages = make(map[string]*storageRef)
	}
	if ids == nil {
		ids = new(int)
	}
	return &vm{src: src, lim: lim, entry: entry, pids: pids, storages: storages, ids: ids}
}

func (m *vm) errf(kind error, off int64, format string, args ...any) *Error {
	return newError(kind, m.entry, off, format, args...)
}

// base is the stack index of the innermost MARK: like Python's metastack,
// nothing below it is reachable until the mark is popped.
func (m *vm) base() int {
	if len(m.marks) == 0 {
		return 0
	}
	return m.marks[len(m.marks)-1]
}

func (m *vm) push(v any) error {
	if len(m.stack) >= m.lim.MaxStack {
		return m.errf(ErrLimit, m.src.pos, "stack deeper than %d", m.lim.MaxStack)
	}
	m.stack = append(m.stack, v)
	return nil
}

func (m *vm) pop(off int64) (any, error) {
	if len(m.stack) <= m.base() {
		return nil, m.errf(ErrCorrupt, off, "stack underflow")
	}
	v := m.stack[len(m.stack)-1]
	if m.scan == nil { // scan mode keeps popped values for the walker (see failState)
		m.stack[len(m.stack)-1] = nil
	}
	m.stack = m.stack[:len(m.stack)-1]
	return v, nil
}

func (m *vm) top(off int64) (any, error) {
	if len(m.stack) <= m.base() {
		return nil, m.errf(ErrCorrupt, off, "stack underflow")
	}
	return m.stack[len(m.stack)-1], nil
}

// popMark removes and returns the items above the innermost MARK.
func (m *vm) popMark(off int64) ([]any, error) {
	if len(m.marks) == 0 {
		return nil, m.errf(ErrCorrupt, off, "no MARK on the stack")
	}
	k := m.marks[len(m.marks)-1]
	m.marks = m.marks[:len(m.marks)-1]
	items := make([]any, len(m.stack)-k)
	copy(items, m.stack[k:])
	if m.scan == nil {
		clear(m.stack[k:])
	}
	m.stack = m.stack[:k]
	return items, nil
}

// count charges n units of work against MaxObjects.
func (m *vm) count(n int) error {
	m.objects += int64(n)
	if m.objects > m.lim.MaxObjects {
		return m.errf(ErrLimit, m.src.pos, "more than %d pickle objects", m.lim.MaxObjects)
	}
	return nil
}

func (m *vm) u8() (int64, error) {
	b, err := m.src.readByte()
	return int64(b), err
}

func (m *vm) le(n int) (uint64, error) {
	b, err := m.src.next(n)
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
func (m *vm) bytesOf(n uint64, off int64) ([]byte, error) {
	if n > uint64(m.src.remaining()) {
		return nil, m.errf(ErrCorrupt, off, "length %d exceeds the %d bytes that remain", n, m.src.remaining())
	}
	if n > uint64(m.lim.MaxStringBytes) {
		return nil, m.errf(ErrLimit, off, "string of %d bytes exceeds the %d-byte limit", n, m.lim.MaxStringBytes)
	}
	return m.src.readN(int64(n))
}

func (m *vm) utf8Of(n uint64, off int64) (string, error) {
	b, err := m.bytesOf(n, off)
	if err != nil {
		return "", err
	}
	if !utf8.Valid(b) {
		return "", m.errf(ErrCorrupt, off, "string is not valid UTF-8")
	}
	return string(b), nil
}

func (m *vm) line(off int64) ([]byte, error) {
	// CPython reads lines of any length; MaxStringBytes bounds the memory
	return m.src.readLine(m.lim.MaxStringBytes)
}

// run decodes one pickle, up to and including its STOP, and returns the value.
func (m *vm) run() (any, error) {
	start := m.src.pos
	// each pickle.load starts with an empty buffer; bytes after the STOP are
	// not read by the unpickler
	m.src.frame, m.src.crossed = 0, 0
	defer func() { m.src.frame, m.src.crossed = 0, 0 }()
	for {
		off := m.src.pos
		m.failOff, m.failStack, m.failMarks = off, len(m.stack), len(m.marks)
		if off-start > m.lim.MaxPickleBytes {
			return nil, m.errf(ErrLimit, off, "pickle longer than %d bytes", m.lim.MaxPickleBytes)
		}
		op, err := m.src.readByte()
		if err != nil {
			return nil, err
		}
		if err := m.count(1); err != nil {
			return nil, err
		}
		if m.scan != nil {
			m.scan.sawOpcode(op)
		}
		if op == opStop {
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
func (m *vm) checkCross(op byte, off int64) error {
	fe, at := m.src.takeCross()
	if fe == 0 {
		return nil
	}
	msg := fmt.Sprintf("an argument crosses a frame end (offset %d): CPython reads it from the frame end", fe)
	if m.scan == nil {
		return m.errf(ErrCorrupt, off, "%s", msg)
	}
	m.scan.problem(m.entry, off, msg)
	st := m.crossState()
	walkFrameEnd(m.src.r, m.src.base, frameWalk{from: fe, opOff: off, crossAt: at, st: st}, m.src.limit, m.entry, m.scan.rep)
	return nil
}

// mayBeStr reports whether v may be a str when CPython unpickles: a str,
// or the stand-in for a value the inert machine did not compute.
func mayBeStr(v any) bool {
	switch v.(type) {
	case nil, bool, int64, *big.Int, float64, []byte, tuple, *list, *dict, *global, *storageRef, *tensorRec:
		return false
	}
	return true
}

// checkFrameEnd handles a FRAME that runs past the STOP at off. Python's
// Unpickler leaves the file either just after the STOP (a buffered file
// that prefetched the frame) or at the frame's end (a frame read with
// read(n): unbuffered files, BytesIO, frames larger than the buffer), so
// the next pickle torch reads may start at either. Pickle writers end the
// last frame with the STOP. Strict mode refuses; scan mode records a
// problem and leaves frameOver for the caller to scan from the frame end.
func (m *vm) checkFrameEnd(off int64) error {
	if m.frameEnd <= m.src.pos {
		return nil
	}
	msg := fmt.Sprintf("FRAME runs %d bytes past the STOP (to offset %d): the next pickle may start after the STOP or at the frame end; both are scanned", m.frameEnd-m.src.pos, m.frameEnd)
	if m.scan == nil {
		return m.errf(ErrCorrupt, off, "%s", msg)
	}
	m.scan.problem(m.entry, off, msg)
	m.frameOver = m.frameEnd
	return nil
}

// crossState returns a bounded copy of the state before the current opcode
// (see failState) for a walk from a frame end an argument crossed: the top
// of the stack, and the memo only when it is small.
func (m *vm) crossState() *walkState {
	st := &walkState{memo: make(map[uint64]shadow)}
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
	for i, v := range m.memo.dense {
		st.memo[uint64(i)] = shadowOf(v)
	}
	for k, v := range m.memo.sparse {
		st.memo[k] = shadowOf(v)
	}
	return st
}

// maxCrossMemo bounds the memo copied for a walk from a frame end.
const maxCrossMemo = 4096

// failState returns, after run failed in scan mode, the offset of the
// opcode it failed on and the stack, marks and memo as they were before
// that opcode (popped values are not cleared in scan mode, and the memo
// only changes on success), for the walker to continue from.
func (m *vm) failState() (int64, *walkState) {
	st := &walkState{memo: make(map[uint64]shadow)}
	if m.failStack <= cap(m.stack) {
		for _, v := range m.stack[:m.failStack] {
			st.stack = append(st.stack, shadowOf(v))
		}
	}
	if m.failMarks <= cap(m.marks) {
		st.marks = append(st.marks, m.marks[:m.failMarks]...)
	}
	for i, v := range m.memo.dense {
		if len(st.memo) >= maxWalkMemo {
			st.memoLost = true
			break
		}
		st.memo[uint64(i)] = shadowOf(v)
	}
	for k, v := range m.memo.sparse {
		if len(st.memo) >= maxWalkMemo {
			st.memoLost = true
			break
		}
		st.memo[k] = shadowOf(v)
	}
	return m.failOff, st
}

// step executes one opcode (other than STOP).
func (m *vm) step(op byte, off int64) error {
	switch op {
	case opProto:
		p, err := m.u8()
		if err != nil {
			return err
		}
		if p > 5 {
			return m.errf(ErrUnsupported, off, "pickle protocol %d", p)
		}
		m.proto = int(p)
		return nil
	case opFrame:
		n, err := m.le(8)
		if err != nil {
			return err
		}
		if n > uint64(m.src.remaining()) {
			return m.errf(ErrCorrupt, off, "FRAME of %d bytes exceeds the %d bytes that remain", n, m.src.remaining())
		}
		m.frameEnd = max(m.frameEnd, m.src.pos+int64(n))
		m.src.startFrame(int64(n))
		return nil
	case opMark:
		if len(m.marks) >= m.lim.MaxMarks {
			return m.errf(ErrLimit, off, "more than %d nested MARKs", m.lim.MaxMarks)
		}
		m.marks = append(m.marks, len(m.stack))
		return nil
	case opPop:
		if len(m.stack) > m.base() {
			_, err := m.pop(off)
			return err
		}
		_, err := m.popMark(off)
		return err
	case opPopMark:
		_, err := m.popMark(off)
		return err
	case opDup:
		v, err := m.top(off)
		if err != nil {
			return err
		}
		return m.push(v)

	case opNone:
		return m.push(nil)
	case opNewTrue:
		return m.push(true)
	case opNewFalse:
		return m.push(false)
	case opInt:
		l, err := m.line(off)
		if err != nil {
			return err
		}
		v, ok := parseIntOp(l, 3*m.lim.MaxLongBytes)
		if !ok {
			return m.errf(ErrCorrupt, off, "bad INT literal %q (not what CPython's unpickler accepts, or over %d digits)", truncate(l), 3*m.lim.MaxLongBytes)
		}
		return m.push(v)
	case opLong:
		l, err := m.line(off)
		if err != nil {
			return err
		}
		v, ok := parseLongOp(l, 3*m.lim.MaxLongBytes)
		if !ok {
			return m.errf(ErrCorrupt, off, "bad LONG literal %q (not what CPython's unpickler accepts, or over %d digits)", truncate(l), 3*m.lim.MaxLongBytes)
		}
		return m.push(v)
	case opBinInt:
		u, err := m.le(4)
		if err != nil {
			return err
		}
		return m.push(int64(int32(uint32(u))))
	case opBinInt1:
		u, err := m.le(1)
		if err != nil {
			return err
		}
		return m.push(int64(u))
	case opBinInt2:
		u, err := m.le(2)
		if err != nil {
			return err
		}
		return m.push(int64(u))
	case opLong1, opLong4:
		n, err := m.signedLen(op == opLong1, "LONG4", off)
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
	case opFloat:
		l, err := m.line(off)
		if err != nil {
			return err
		}
		f, ok := parseFloatOp(l)
		if !ok {
			return m.errf(ErrCorrupt, off, "bad FLOAT literal %q", truncate(l))
		}
		return m.push(f)
	case opBinFloat:
		b, err := m.src.next(8)
		if err != nil {
			return err
		}
		return m.push(math.Float64frombits(binary.BigEndian.Uint64(b)))

	case opShortBinUnicode, opBinUnicode, opBinUnicode8:
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
	case opShortBinBytes, opBinBytes, opBinBytes8:
		n, err := m.le(lenWidth(op))
		if err != nil {
			return err
		}
		b, err := m.bytesOf(n, off)
		if err != nil {
			return err
		}
		return m.push(b)
	case opShortBinString, opBinString:
		n, err := m.signedLen(op == opShortBinString, "BINSTRING", off)
		if err != nil {
			return err
		}
		s, err := m.utf8Of(n, off)
		if err != nil {
			return err
		}
		return m.push(s)
	case opString:
		l, err := m.line(off)
		if err != nil {
			return err
		}
		b, ok := parseStringRepr(l)
		if !ok || !utf8.Valid(b) {
			return m.errf(ErrCorrupt, off, "bad STRING literal %q", truncate(l))
		}
		return m.push(string(b))
	case opUnicode:
		l, err := m.line(off)
		if err != nil {
			return err
		}
		s, ok := decodeRawUnicodeEscape(l)
		if !ok {
			return m.errf(ErrCorrupt, off, "bad UNICODE literal %q", truncate(l))
		}
		return m.push(s)
	case opByteArray8, opNextBuffer, opReadOnlyBuffer:
		return m.buffers(op, off)

	case opEmptyTuple:
		return m.push(tuple{})
	case opTuple:
		items, err := m.popMark(off)
		if err != nil {
			return err
		}
		if err := m.count(len(items)); err != nil {
			return err
		}
		return m.push(tuple(items))
	case opTuple1, opTuple2, opTuple3:
		n := int(op-opTuple1) + 1
		if len(m.stack)-m.base() < n {
			return m.errf(ErrCorrupt, off, "stack underflow")
		}
		t := make(tuple, n)
		copy(t, m.stack[len(m.stack)-n:])
		if m.scan == nil {
			clear(m.stack[len(m.stack)-n:])
		}
		m.stack = m.stack[:len(m.stack)-n]
		return m.push(t)
	case opEmptyList:
		return m.push(&list{})
	case opList:
		items, err := m.popMark(off)
		if err != nil {
			return err
		}
		if err := m.count(len(items)); err != nil {
			return err
		}
		return m.push(&list{items: items})
	case opEmptyDict:
		return m.push(&dict{})
	case opDict:
		items, err := m.popMark(off)
		if err != nil {
			return err
		}
		d := &dict{}
		if err := m.setItems(d, items, off); err != nil {
			return err
		}
		return m.push(d)
	case opAppend:
		v, err := m.pop(off)
		if err != nil {
			return err
		}
		return m.appendTo([]any{v}, op, off)
	case opAppends:
		items, err := m.popMark(off)
		if err != nil {
			return err
		}
		return m.appendTo(items, op, off)
	case opSetItem:
		v, err := m.pop(off)
		if err != nil {
			return err
		}
		k, err := m.pop(off)
		if err != nil {
			return err
		}
		return m.setItemsOn([]any{k, v}, op, off)
	case opSetItems:
		items, err := m.popMark(off)
		if err != nil {
			return err
		}
		return m.setItemsOn(items, op, off)
	case opEmptySet, opFrozenSet, opAddItems:
		return m.sets(op, off)

	case opGet, opBinGet, opLongBinGet:
		idx, err := m.memoIndex(op, off)
		if err != nil {
			return err
		}
		v, ok := m.memo.get(idx)
		if !ok {
			return m.errf(ErrCorrupt, off, "memo index %d is undefined", idx)
		}
		return m.push(v)
	case opPut, opBinPut, opLongBinPut, opMemoize:
		var idx uint64
		if op == opMemoize {
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
		if !m.memo.put(idx, v) {
			return m.errf(ErrLimit, off, "more than %d memo entries", m.lim.MaxMemo)
		}
		if m.memo.count > m.lim.MaxMemo {
			return m.errf(ErrLimit, off, "more than %d memo entries", m.lim.MaxMemo)
		}
		return nil

	case opGlobal:
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
	case opStackGlobal:
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
			if m.scan != nil && mayBeStr(mv) && mayBeStr(nv) {
				// the operands are results the inert machine did not compute
				// (a refused call such as _codecs.encode(..., 'rot13')): at
				// run time they may be any names
				m.scan.global("?", "?", off, verdictNotAllowed, fmt.Sprintf("STACK_GLOBAL operands are %s and %s, computed at load time: they may name any callable", describe(mv), describe(nv)))
				return m.push(&global{module: "?", name: "?", off: off})
			}
			return m.errf(ErrCorrupt, off, "STACK_GLOBAL operands are %s and %s, not strings", typeName(mv), typeName(nv))
		}
		return m.global(mod, name, off)
	case opInst, opObj, opNewObj, opNewObjEx:
		return m.construct(op, off)
	case opExt1, opExt2, opExt4:
		n, err := m.le(lenWidth(op))
		if err != nil {
			return err
		}
		name := fmt.Sprintf("<copyreg-extension>.%d", n)
		if m.scan == nil {
			return &Error{Kind: ErrNotAllowed, Entry: m.entry, Offset: off, Global: name,
				Msg: fmt.Sprintf("refusing %s %s (copyreg extension codes resolve to arbitrary callables)", opNames[op], name)}
		}
		m.scan.global("<copyreg-extension>", fmt.Sprint(n), off, verdictNotAllowed, "copyreg extension code")
		m.scan.opcode(op, off, name)
		return m.push(&opaque{what: name, off: off})
	case opPersID:
		l, err := m.line(off)
		if err != nil {
			return err
		}
		if m.scan == nil {
			return m.errf(ErrUnsupported, off, "text persistent id (PERSID %q) is not supported; torch writes BINPERSID", truncate(l))
		}
		m.scan.problem(m.entry, off, fmt.Sprintf("text persistent id PERSID %q", truncate(l)))
		return m.push(&opaque{what: "persistent id", off: off})
	case opBinPersID:
		pid, err := m.pop(off)
		if err != nil {
			return err
		}
		v, err := m.persistentLoad(pid, off)
		if err != nil {
			return err
		}
		return m.push(v)
	case opReduce:
		args, err := m.pop(off)
		if err != nil {
			return err
		}
		callee, err := m.pop(off)
		if err != nil {
			return err
		}
		v, err := m.reduce(callee, args, off)
		if err != nil {
			return err
		}
		return m.push(v)
	case opBuild:
		state, err := m.pop(off)
		if err != nil {
			return err
		}
		inst, err := m.top(off)
		if err != nil {
			return err
		}
		return m.build(inst, state, off)
	}
	return m.errf(ErrCorrupt, off, "unknown opcode 0x%02x", op)
}

func (m *vm) memoIndex(op byte, off int64) (uint64, error) {
	switch op {
	case opBinGet, opBinPut:
		return m.le(1)
	case opLongBinGet, opLongBinPut:
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

// global handles GLOBAL, STACK_GLOBAL: the name is checked immediately.
func (m *vm) global(module, name string, off int64) error {
	a, verdict, reason := classifyGlobal(module, name)
	if m.scan != nil {
		m.scan.global(module, name, off, verdict, reason)
		return m.push(&global{module: module, name: name, off: off, allow: a})
	}
	full := globalName(module, name)
	switch verdict {
	case verdictAllowed:
		return m.push(&global{module: module, name: name, off: off, allow: a})
	case verdictUnsupported:
		return &Error{Kind: ErrUnsupported, Entry: m.entry, Offset: off, Global: full,
			Msg: fmt.Sprintf("refusing global %s (%s)", full, reason)}
	}
	return &Error{Kind: ErrNotAllowed, Entry: m.entry, Offset: off, Global: full,
		Msg: fmt.Sprintf("refusing global %s (%s)", full, reason)}
}

// construct handles INST, OBJ, NEWOBJ and NEWOBJ_EX, which instantiate a
// class without REDUCE: always refused.
func (m *vm) construct(op byte, off int64) error {
	var target string
	switch op {
	case opInst:
		mod, err := m.line(off)
		if err != nil {
			return err
		}
		name, err := m.line(off)
		if err != nil {
			return err
		}
		target = globalName(string(mod), string(name))
		if m.scan != nil {
			_, verdict, reason := classifyGlobal(string(mod), string(name))
			m.scan.global(string(mod), string(name), off, verdict, reason)
		}
		if _, err := m.popMark(off); err != nil {
			return err
		}
	case opObj:
		items, err := m.popMark(off)
		if err != nil {
			return err
		}
		if len(items) == 0 {
			return m.errf(ErrCorrupt, off, "OBJ without a class")
		}
		target = describe(items[0])
	case opNewObj, opNewObjEx:
		if op == opNewObjEx {
			if _, err := m.pop(off); err != nil { // kwargs
				return err
			}
		}
		if _, err := m.pop(off); err != nil { // args
			return err
		}
		cls, err := m.pop(off)
		if err != nil {
			return err
		}
		target = describe(cls)
	}
	if m.scan == nil {
		return &Error{Kind: ErrNotAllowed, Entry: m.entry, Offset: off, Global: target,
			Msg: fmt.Sprintf("refusing %s %s (the %s opcode instantiates classes; torch never writes it for tensors)", opNames[op], target, opNames[op])}
	}
	m.scan.opcode(op, off, target)
	return m.push(&opaque{what: target + " instance", off: off})
}

// describe names a value for messages, using module.name for globals.
func describe(v any) string {
	switch x := v.(type) {
	case *global:
		return x.String()
	case *opaque:
		return x.what
	}
	return typeName(v)
}

func (m *vm) buffers(op byte, off int64) error {
	if m.scan == nil {
		return m.errf(ErrUnsupported, off, "opcode %s (out-of-band buffers) is not supported", opNames[op])
	}
	m.scan.problem(m.entry, off, "opcode "+opNames[op]+" (out-of-band buffers)")
	switch op {
	case opByteArray8:
		n, err := m.le(8)
		if err != nil {
			return err
		}
		if n > uint64(m.src.remaining()) {
			return m.errf(ErrCorrupt, off, "length %d exceeds the %d bytes that remain", n, m.src.remaining())
		}
		if err := m.src.skip(int64(n)); err != nil {
			return err
		}
		return m.push(&opaque{what: "bytearray", off: off})
	case opNextBuffer:
		return m.push(&opaque{what: "buffer", off: off})
	}
	_, err := m.top(off)
	return err
}

func (m *vm) sets(op byte, off int64) error {
	if m.scan == nil {
		return m.errf(ErrUnsupported, off, "opcode %s (sets) is not supported; torch does not write sets for tensors", opNames[op])
	}
	switch op {
	case opEmptySet:
		return m.push(&opaque{what: "set", off: off})
	case opFrozenSet:
		if _, err := m.popMark(off); err != nil {
			return err
		}
		return m.push(&opaque{what: "frozenset", off: off})
	}
	if _, err := m.popMark(off); err != nil {
		return err
	}
	_, err := m.top(off)
	return err
}

func (m *vm) appendTo(items []any, op byte, off int64) error {
	t, err := m.top(off)
	if err != nil {
		return err
	}
	if err := m.count(len(items)); err != nil {
		return err
	}
	l, ok := t.(*list)
	if !ok {
		if m.scan != nil {
			m.scan.opcode(op, off, describe(t))
			return nil
		}
		return m.errf(ErrNotAllowed, off, "%s onto a %s (only lists may be appended to)", opNames[op], describe(t))
	}
	l.items = append(l.items, items...)
	return nil
}

func (m *vm) setItemsOn(items []any, op byte, off int64) error {
	t, err := m.top(off)
	if err != nil {
		return err
	}
	d, ok := t.(*dict)
	if !ok {
		if m.scan != nil {
			m.scan.opcode(op, off, describe(t))
			return nil
		}
		return m.errf(ErrNotAllowed, off, "%s onto a %s (only dicts may receive items)", opNames[op], describe(t))
	}
	return m.setItems(d, items, off)
}

func (m *vm) setItems(d *dict, items []any, off int64) error {
	if len(items)%2 != 0 {
		return m.errf(ErrCorrupt, off, "odd number of items (%d) for a dict", len(items))
	}
	if err := m.count(len(items)); err != nil {
		return err
	}
	for i := 0; i < len(items); i += 2 {
		if !d.set(items[i], items[i+1]) {
			if m.scan != nil {
				continue
			}
			return m.errf(ErrUnsupported, off, "dict key of type %s is not supported", typeName(items[i]))
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
func lenWidth(op byte) int {
	switch op {
	case opShortBinUnicode, opShortBinBytes, opExt1:
		return 1
	case opExt2:
		return 2
	case opBinUnicode, opBinBytes, opExt4:
		return 4
	}
	return 8
}

// signedLen reads the length operand of an opcode pair whose short form
// has a 1-byte length and whose long form a signed 4-byte one (LONG1/LONG4,
// SHORT_BINSTRING/BINSTRING); a negative long length is corrupt.
func (m *vm) signedLen(short bool, long string, off int64) (uint64, error) {
	if short {
		return m.le(1)
	}
	n, err := m.le(4)
	if err == nil && int32(uint32(n)) < 0 {
		return 0, m.errf(ErrCorrupt, off, "%s with negative length", long)
	}
	return n, err
}
