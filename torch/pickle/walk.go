package pickle

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"github.com/gosafetensors/safetensors/torch/internal/pylong"
	"hash/fnv"
	"io"
	"math"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// The walker is the scanner's second line: a cheap opcode-by-opcode pass,
// like pickletools.genops, that only looks for the names a real unpickler
// would import. It runs wherever full decoding stopped (a refusal, a cap, a
// parse the decoder does not accept) and over every byte no structure
// explains, to the end of the region, so that no global torch could import
// goes unreported. It keeps a shadow of the stack and memo that tracks
// strings only (what STACK_GLOBAL needs), with bounded memory, and
// resynchronises after anything it cannot parse at the next PROTO or just
// after the next STOP.

// shadow is what the walker knows about a stack or memo value.
type shadow struct {
	kind byte   // 's' str, 'o' anything else, '?' unknown (lost to a memory bound)
	s    string // the str, clipped to MaxName+1 bytes
}

// MaxName bounds how much of a str the walker keeps (and so of a global's
// module or name it reports): longer names are cut.
const MaxName = 1 << 10

const (
	maxWalkStack = 1 << 20
	maxWalkMemo  = 1 << 20
	maxWalkText  = MaxName + 1 // bytes of a string or line kept
)

// Walker is the opcode walker: see the package documentation.
type Walker struct {
	r     *bufio.Reader
	pos   int64 // offset of the next byte inside the region
	end   int64 // offset where the region ends
	audit Auditor

	stack      []shadow
	marks      []int
	memo       memo[shadow]
	memoLost   bool // puts were dropped: an unknown GET index may be one
	bottomLost bool // the bottom of the stack was dropped
	marksLost  bool // the outermost MARKs were dropped
	found      int  // globals reported

	frameEnd  int64       // furthest end of a FRAME in the current pickle (0: none)
	frameEnds []frameWalk // frame ends for the caller to walk from (see vm.checkFrameEnd, vm.checkCross)

	// frame is the end of the FRAME CPython may hold in its buffer (<= pos:
	// none); crossed is the frame end an argument crossed (0: none), see
	// source.frame
	frame, crossed int64
	crossAt        int64  // where the read that crossed started
	pre            *State // the state before the opcode whose argument crossed

	// a walk of the bytes CPython reads after an argument crossed a frame
	// end goes on at jumpTo when it reaches jumpAt (see frameWalk)
	jumpAt, jumpTo int64

	// work counts opcodes stepped, bytes skipped to resynchronise and
	// memo entries cleared: what the walk costs; the walk stops (spent)
	// when it reaches limit, what is left of the audit's budget
	work, limit int64
	spent       bool
	// partial: bytes CPython may read from a frame end were not walked
	// (more frame ends than the walker keeps)
	partial bool

	// exact: the region is what CPython reads and nothing else (see
	// Walks.SetExact): the walk ends where CPython would raise
	exact bool
}

// jump moves pos past the gap between the frame bytes CPython read and the
// frame end (the reader itself holds no gap).
func (w *Walker) jump() {
	if w.jumpAt > 0 && w.pos == w.jumpAt {
		w.pos, w.jumpAt = w.jumpTo, 0
	}
}

// frameWalk is a place to walk from: a frame end past a STOP (st nil), or
// the frame end an opcode's argument crossed (st holds the opcode and what
// is known of the state before it).
type frameWalk struct {
	from int64
	// opOff and crossAt delimit the opcode and the arguments CPython read
	// from the frame before the one that crossed (equal: none); st is what
	// is known of the state before that opcode (nil: a fresh pickle)
	opOff, crossAt int64
	st             *State
}

// fingerprint hashes what st knows (stack, marks, memo, what was lost);
// nil, a fresh pickle, is 0.
func (st *State) fingerprint() uint64 {
	if st == nil {
		return 0
	}
	h := fnv.New64a()
	var b [8]byte
	num := func(v uint64) {
		binary.LittleEndian.PutUint64(b[:], v)
		h.Write(b[:])
	}
	sh := func(v shadow) {
		num(uint64(v.kind))
		num(uint64(len(v.s)))
		io.WriteString(h, v.s)
	}
	flag := func(f bool) uint64 {
		if f {
			return 1
		}
		return 0
	}
	num(flag(st.memoLost) | flag(st.bottomLost)<<1 | flag(st.marksLost)<<2 | flag(st.raised)<<3)
	num(uint64(len(st.stack)))
	for _, v := range st.stack {
		sh(v)
	}
	num(uint64(len(st.marks)))
	for _, k := range st.marks {
		num(uint64(k))
	}
	num(uint64(len(st.memo.dense)))
	for _, v := range st.memo.dense {
		sh(v)
	}
	// the sparse memo in any order: a sum of each entry's hash
	var sparse uint64
	for k, v := range st.memo.sparse {
		e := fnv.New64a()
		binary.LittleEndian.PutUint64(b[:], k)
		e.Write(b[:])
		e.Write([]byte{v.kind})
		io.WriteString(e, v.s)
		sparse += e.Sum64()
	}
	num(sparse)
	return h.Sum64()
}

// maxFrameEnds bounds the frame ends one walker records.
const maxFrameEnds = 64

func newWalker(r io.Reader, start, end int64, a Auditor, st *State) *Walker {
	// no larger than the region: a file of thousands of tiny regions must
	// not cost 32 KiB each
	size := int(min(max(end-start, 16), 32<<10))
	w := &Walker{r: bufio.NewReaderSize(r, size), pos: start, end: end, audit: a, limit: math.MaxInt64}
	if st != nil {
		w.stack, w.marks, w.memo, w.memoLost = st.stack, st.marks, st.memo, st.memoLost
		w.bottomLost, w.marksLost = st.bottomLost, st.marksLost
	}
	return w
}

// State is what a machine knew when it stopped (see Machine.FailState),
// for the walker that goes on from there: the stack and memo, as far as
// strings go.
type State struct {
	stack                 []shadow
	marks                 []int
	memo                  memo[shadow]
	memoLost              bool
	bottomLost, marksLost bool
	// raised: the machine stopped where CPython raises (ErrRaises):
	// nothing after it is read, so there is nothing to walk
	raised bool
}

// maxCrossStack bounds the stack values the walker keeps for a walk from
// a frame end an argument crossed; what is below is unknown.
const maxCrossStack = 256

// crossState returns a bounded copy of what the walker knows before the
// current opcode: the top of the stack, the marks within it, and the memo
// when it is small.
func (w *Walker) crossState() *State {
	st := &State{memoLost: w.memoLost, bottomLost: w.bottomLost, marksLost: w.marksLost}
	if w.memo.count > maxCrossMemo {
		st.memoLost = true
	} else {
		st.memo.dense = append([]shadow(nil), w.memo.dense...)
		for k, v := range w.memo.sparse {
			st.memo.put(k, v)
		}
		st.memo.count = w.memo.count
	}
	cut := max(len(w.stack)-maxCrossStack, 0)
	if cut > 0 {
		st.bottomLost = true
	}
	st.stack = append([]shadow(nil), w.stack[cut:]...)
	for _, k := range w.marks {
		if k >= cut {
			st.marks = append(st.marks, k-cut)
		} else {
			st.marksLost = true
		}
	}
	if len(st.marks) > maxCrossStack {
		st.marks = st.marks[len(st.marks)-maxCrossStack:]
		st.marksLost = true
	}
	return st
}

// checkCross handles an argument of the opcode op at off that crossed a
// frame end (see vm.checkCross); st is the state before op.
func (w *Walker) checkCross(off int64) {
	fe := w.crossed
	w.crossed = 0
	if fe == 0 {
		return
	}
	w.audit.Problem(off, fmt.Sprintf("an argument crosses a frame end (offset %d): CPython reads it from the frame end; both are walked", fe))
	if len(w.frameEnds) >= maxFrameEnds {
		w.audit.Problem(off, fmt.Sprintf("more than %d frame ends to walk from; the bytes from this frame end were not walked again", maxFrameEnds))
		w.partial = true
		return
	}
	w.frameEnds = append(w.frameEnds, frameWalk{from: fe, opOff: off, crossAt: w.crossAt, st: w.pre})
}

// arg notes that the next n bytes are an opcode's argument.
func (w *Walker) arg(n uint64) {
	w.jump()
	if w.frame > w.pos && n > uint64(w.frame-w.pos) {
		w.cross(w.pos)
	}
}

// cross records that the read starting at at crossed the frame end.
func (w *Walker) cross(at int64) {
	if w.crossed == 0 {
		// arguments are read before the opcode changes the stack
		w.crossed, w.crossAt, w.pre = w.frame, at, w.crossState()
	}
	w.frame = 0
}

func shadowOf(v any) shadow {
	if s, ok := v.(string); ok {
		if len(s) > maxWalkText {
			s = s[:maxWalkText]
		}
		return shadow{kind: 's', s: s}
	}
	return shadow{kind: 'o'}
}

func (w *Walker) byte() (byte, bool) {
	w.jump()
	if w.pos >= w.end {
		return 0, false
	}
	b, err := w.r.ReadByte()
	if err != nil {
		w.end = w.pos
		return 0, false
	}
	w.pos++
	return b, true
}

// le reads an n-byte little-endian unsigned operand.
func (w *Walker) le(n int) (uint64, bool) {
	w.arg(uint64(n))
	var u uint64
	for i := 0; i < n; i++ {
		b, ok := w.byte()
		if !ok {
			return 0, false
		}
		u |= uint64(b) << (8 * i)
	}
	return u, true
}

// payload reads n bytes, keeping at most maxWalkText of them.
func (w *Walker) payload(n uint64) (string, bool) {
	w.arg(n)
	if n > uint64(w.end-w.pos) {
		return "", false
	}
	keep := min(n, maxWalkText)
	buf := make([]byte, keep)
	if _, err := io.ReadFull(w.r, buf); err != nil {
		w.end = w.pos
		return "", false
	}
	w.pos += int64(keep)
	if rest := int64(n - keep); rest > 0 {
		if k, err := w.r.Discard(int(min(rest, int64(^uint(0)>>1)))); int64(k) < rest || err != nil {
			w.end = w.pos
			return "", false
		}
		w.pos += rest
	}
	return string(buf), true
}

// line reads up to and including '\n', keeping at most maxWalkText bytes.
func (w *Walker) line() ([]byte, bool) {
	var out []byte
	w.jump()
	start := w.pos
	inFrame := w.frame > w.pos
	for {
		b, ok := w.byte()
		if !ok {
			return nil, false
		}
		if b == '\n' {
			return out, true
		}
		if inFrame && w.pos == w.frame {
			w.cross(start) // no '\n' before the frame end: CPython reads the line from there
			inFrame = false
		}
		if len(out) < maxWalkText {
			out = append(out, b)
		}
	}
}

// validLine reports whether a line line() returned is strict UTF-8 as
// far as it was kept (a line cut at maxWalkText bytes may end inside a
// character).
func validLine(b []byte) bool {
	if len(b) >= maxWalkText {
		for i := 0; i < utf8.UTFMax && len(b) > 0 && !utf8.Valid(b); i++ {
			b = b[:len(b)-1]
		}
	}
	return utf8.Valid(b)
}

func (w *Walker) push(s shadow) {
	if len(w.stack) >= maxWalkStack {
		// drop the older half: what is below can only come back as unknown
		h := len(w.stack) / 2
		w.stack = append(w.stack[:0], w.stack[h:]...)
		for i := range w.marks {
			w.marks[i] = max(w.marks[i]-h, 0)
		}
		w.bottomLost = true
	}
	w.stack = append(w.stack, s)
}

func (w *Walker) base() int {
	if len(w.marks) == 0 {
		return 0
	}
	return w.marks[len(w.marks)-1]
}

func (w *Walker) pop() (shadow, bool) {
	if len(w.stack) <= w.base() {
		if w.bottomLost {
			return shadow{kind: '?'}, true
		}
		return shadow{}, false
	}
	s := w.stack[len(w.stack)-1]
	w.stack = w.stack[:len(w.stack)-1]
	return s, true
}

func (w *Walker) popN(n int) bool {
	for i := 0; i < n; i++ {
		if _, ok := w.pop(); !ok {
			return false
		}
	}
	return true
}

func (w *Walker) popMark() bool {
	if len(w.marks) == 0 {
		if w.bottomLost || w.marksLost {
			// the mark was dropped: what is below it is unknown
			w.stack = w.stack[:0]
			w.bottomLost = true
			return true
		}
		return false
	}
	k := w.marks[len(w.marks)-1]
	w.marks = w.marks[:len(w.marks)-1]
	w.stack = w.stack[:min(k, len(w.stack))]
	return true
}

func (w *Walker) reset() {
	w.stack, w.marks = w.stack[:0], w.marks[:0]
	w.work += int64(len(w.memo.dense) + len(w.memo.sparse))
	w.memo.reset()
	w.memoLost, w.bottomLost, w.marksLost = false, false, false
	w.frameEnd, w.frame, w.crossed = 0, 0, 0
}

func (w *Walker) run() {
	for w.pos < w.end {
		if w.work >= w.limit {
			w.spent = true
			return
		}
		off := w.pos
		b, ok := w.byte()
		if !ok {
			return
		}
		op := Op(b)
		w.work++
		if op == OpStop {
			if w.frameEnd > w.pos {
				w.audit.Problem(off, fmt.Sprintf("FRAME runs %d bytes past the STOP (to offset %d): the next pickle may start after the STOP or at the frame end; both are walked", w.frameEnd-w.pos, w.frameEnd))
				if len(w.frameEnds) < maxFrameEnds {
					w.frameEnds = append(w.frameEnds, frameWalk{from: w.frameEnd})
				} else {
					w.audit.Problem(off, fmt.Sprintf("more than %d FRAMEs run past their STOP; the bytes from this frame end were not walked again", maxFrameEnds))
					w.partial = true
				}
			}
			w.reset()
			continue
		}
		ok = w.step(op, off)
		w.checkCross(off)
		if !ok {
			if w.exact {
				// CPython raises here (the walker gives up only where
				// it would), and reads nothing after
				w.end = w.pos
				return
			}
			w.resync()
		}
	}
}

// resync skips to the next PROTO opcode or just past the next STOP byte.
func (w *Walker) resync() {
	w.reset()
	for {
		b, err := w.r.Peek(1)
		if err != nil || w.pos >= w.end {
			w.end = min(w.end, w.pos)
			return
		}
		if w.work >= w.limit {
			return // run stops
		}
		if Op(b[0]) == OpProto {
			if b2, err := w.r.Peek(2); err == nil && b2[1] <= 5 {
				return
			}
		}
		w.r.ReadByte()
		w.pos++
		w.work++
		if Op(b[0]) == OpStop {
			return
		}
	}
}

// report hands a global the walker found to the auditor; only names
// find_class may import a module for (MayImport) are reported, so that
// noise in bytes that are not pickles is not taken for a module.
func (w *Walker) report(module, name string, off int64, unknown bool) bool {
	if unknown {
		w.found++
		w.audit.Import(Import{Module: "?", Name: "?", Offset: off, How: Unknown, Walked: true})
		return true
	}
	if !MayImport(module) {
		// find_class fails before importing: in an exact walk CPython
		// stops here
		return !w.exact
	}
	w.found++
	w.audit.Import(Import{Module: module, Name: name, Offset: off, How: Named, Walked: true})
	return true
}

// MayImport reports whether find_class, handed module, may import a
// module (run its code) before it can fail. CPython's importer imports a
// dotted name's parents first, from the left, and takes a name with one
// leading dot for a top-level module found by its last part: so this.py
// runs for "this", ".this", "this.", "this.\x00" or "this.a b", and for any
// attribute name, even one getattr then fails on ("x y", ""). The first
// module imported is the first part of module (the second, after one
// leading dot); it is found only if it is an identifier (builtin and frozen
// modules are; a file on sys.path named otherwise is not looked for).
func MayImport(module string) bool {
	first, rest, _ := strings.Cut(module, ".")
	if first == "" {
		first, _, _ = strings.Cut(rest, ".")
	}
	return Importable(first)
}

// Importable reports whether s is a dotted sequence of Python identifiers.
func Importable(s string) bool {
	if s == "" || !utf8.ValidString(s) {
		return false
	}
	start := true
	for _, r := range s {
		switch {
		case r == '.':
			if start {
				return false
			}
			start = true
		case r == '_' || unicode.IsLetter(r):
			start = false
		case unicode.IsDigit(r) || unicode.Is(unicode.Mn, r) || unicode.Is(unicode.Mc, r) || unicode.Is(unicode.Pc, r):
			if start {
				return false
			}
		default:
			return false
		}
	}
	return !start
}

// step interprets one opcode; false means the walker lost sync.
func (w *Walker) step(op Op, off int64) bool {
	other := shadow{kind: 'o'}
	switch op {
	case OpMark:
		if len(w.marks) >= maxWalkStack {
			// CPython has no MARK limit: drop the outer half and go on
			// (popping past the rest clears the stack, see popMark)
			h := len(w.marks) / 2
			w.marks = append(w.marks[:0], w.marks[h:]...)
			w.marksLost = true
		}
		w.marks = append(w.marks, len(w.stack))
	case OpPop:
		if len(w.stack) > w.base() {
			w.pop()
		} else {
			return w.popMark()
		}
	case OpPopMark:
		return w.popMark()
	case OpDup:
		s, ok := w.pop()
		if !ok {
			return false
		}
		w.push(s)
		w.push(s)
	case OpNone, OpNewTrue, OpNewFalse, OpEmptyTuple, OpEmptyList, OpEmptyDict, OpEmptySet, OpNextBuffer:
		w.push(other)
	case OpReadOnlyBuffer:
	case OpProto:
		p, ok := w.le(1)
		if !ok || p > 5 {
			return false
		}
	case OpFrame:
		n, ok := w.le(8)
		if !ok {
			return false
		}
		w.jump()
		if n <= uint64(w.end-w.pos) {
			w.frameEnd = max(w.frameEnd, w.pos+int64(n))
			// as source.startFrame
			if w.frame <= w.pos || w.pos+int64(n) > w.frame {
				if w.frame > w.pos {
					w.cross(w.pos)
				}
				w.frame = w.pos + int64(n)
			}
		}
	case OpBinInt1:
		return w.skipPush(1)
	case OpBinInt2:
		return w.skipPush(2)
	case OpBinInt:
		return w.skipPush(4)
	case OpBinFloat:
		return w.skipPush(8)
	case OpInt, OpLong, OpFloat, OpPersID:
		if _, ok := w.line(); !ok {
			return false
		}
		w.push(other)
	case OpString, OpUnicode:
		l, ok := w.line()
		if !ok {
			return false
		}
		s := ""
		if op == OpString {
			b, ok := parseStringRepr(l)
			if !ok {
				return false
			}
			s = string(b)
		} else if s, ok = decodeRawUnicodeEscape(l); !ok {
			s = string(l) // surrogates: not a name Python could import anyway
		}
		w.push(shadowOf(s))
	case OpLong1, OpShortBinString, OpShortBinBytes, OpShortBinUnicode:
		return w.lenPush(op, 1)
	case OpLong4, OpBinString, OpBinBytes, OpBinUnicode:
		return w.lenPush(op, 4)
	case OpBinUnicode8, OpBinBytes8, OpByteArray8:
		return w.lenPush(op, 8)
	case OpTuple, OpList, OpDict, OpFrozenSet:
		if !w.popMark() {
			return false
		}
		w.push(other)
	case OpTuple1, OpTuple2, OpTuple3:
		if !w.popN(int(op-OpTuple1) + 1) {
			return false
		}
		w.push(other)
	case OpAppend, OpBuild:
		return w.popN(1)
	case OpSetItem:
		return w.popN(2)
	case OpAppends, OpSetItems, OpAddItems:
		return w.popMark()
	case OpBinPersID:
		if !w.popN(1) {
			return false
		}
		w.push(other)
	case OpReduce, OpNewObj:
		if !w.popN(2) {
			return false
		}
		w.push(other)
	case OpNewObjEx:
		if !w.popN(3) {
			return false
		}
		w.push(other)
	case OpObj:
		if !w.popMark() {
			return false
		}
		w.push(other)
	case OpGet, OpBinGet, OpLongBinGet:
		idx, ok := w.memoIndex(op)
		if !ok {
			return false
		}
		s, found := w.memo.get(idx)
		if !found {
			if !w.memoLost {
				return false // KeyError in a real unpickler
			}
			s = shadow{kind: '?'}
		}
		w.push(s)
	case OpPut, OpBinPut, OpLongBinPut, OpMemoize:
		var idx uint64
		if op == OpMemoize {
			idx = uint64(w.memo.count)
		} else {
			var ok bool
			if idx, ok = w.memoIndex(op); !ok {
				return false
			}
		}
		if len(w.stack) <= w.base() && !w.bottomLost {
			return false
		}
		s := shadow{kind: '?'}
		if len(w.stack) > 0 {
			s = w.stack[len(w.stack)-1]
		}
		if w.memo.has(idx) || w.memo.count < maxWalkMemo {
			w.memo.put(idx, s)
		} else {
			w.memoLost = true
		}
	case OpGlobal, OpInst:
		if op == OpInst && w.exact && len(w.marks) == 0 && !w.bottomLost && !w.marksLost {
			// CPython's INST looks for its MARK before it reads the
			// lines: "could not find MARK", nothing imported
			return false
		}
		mod, ok := w.line()
		if !ok {
			return false
		}
		name, ok := w.line()
		if !ok {
			return false
		}
		if len(mod) == 0 || len(name) == 0 || !validLine(mod) || !validLine(name) {
			// CPython refuses an empty line, and decodes both as strict
			// UTF-8, before find_class
			if w.exact {
				return false
			}
		} else if !w.report(string(mod), string(name), off, false) {
			return false
		}
		if op == OpInst && !w.popMark() {
			return false
		}
		w.push(other)
	case OpStackGlobal:
		n, ok1 := w.pop()
		m, ok2 := w.pop()
		if !ok1 || !ok2 {
			return false
		}
		switch {
		case m.kind == '?' || n.kind == '?':
			w.report("", "", off, true)
		case m.kind == 's' && n.kind == 's':
			if !w.report(m.s, n.s, off, false) {
				return false
			}
		default:
			return false // STACK_GLOBAL requires str: a real unpickler stops
		}
		w.push(other)
	case OpExt1, OpExt2, OpExt4:
		code, ok := w.le(lenWidth(op))
		if !ok || w.exact {
			// in an exact walk, CPython's registry is empty (see
			// SetExact): the code is unregistered and the unpickler
			// raises before importing anything
			return false
		}
		w.found++
		w.audit.Import(Import{Module: "<copyreg-extension>", Name: strconv.FormatUint(code, 10), Offset: off, How: Extension, Walked: true})
		w.push(other)
	default:
		return false
	}
	return true
}

func (w *Walker) skipPush(n int) bool {
	if _, ok := w.le(n); !ok {
		return false
	}
	w.push(shadow{kind: 'o'})
	return true
}

// lenPush handles the length-prefixed opcodes.
func (w *Walker) lenPush(op Op, width int) bool {
	n, ok := w.le(width)
	if !ok {
		return false
	}
	if width == 4 && (op == OpLong4 || op == OpBinString) && int32(uint32(n)) < 0 {
		return false
	}
	s, ok := w.payload(n)
	if !ok {
		return false
	}
	switch op {
	case OpShortBinUnicode, OpBinUnicode, OpBinUnicode8, OpShortBinString, OpBinString:
		w.push(shadowOf(s))
	default:
		w.push(shadow{kind: 'o'})
	}
	return true
}

func (w *Walker) memoIndex(op Op) (uint64, bool) {
	switch op {
	case OpBinGet, OpBinPut:
		return w.le(1)
	case OpLongBinGet, OpLongBinPut:
		return w.le(4)
	}
	l, ok := w.line()
	if !ok {
		return 0, false
	}
	v, ok := pylong.Parse(l, 10)
	if !ok {
		return 0, false
	}
	i, isInt := v.(int64)
	return uint64(i), isInt && i >= 0
}

// maxCrossPrefix bounds the opcode bytes read from a frame before an
// argument that crossed its end (a GLOBAL's module line, at most).
const maxCrossPrefix = 64 << 10

// Walks is shared by the machines and walkers of one audit: it holds the
// audit's walk budget, and makes each walk from a FRAME end once per state reached there (where a
// FRAME runs past its STOP, or an argument crosses a frame end, CPython's
// buffering decides where it reads on, and both places are walked).
//
// The budget is in units of work that a file cannot amplify: opcodes
// stepped, bytes skipped to resynchronise, memo entries cleared, over
// every walk of the audit. Without it, n frames ending at n offsets of a
// long tail make n walks of the tail. When it is spent, the walk under way
// stops and no other walk starts; the auditor is told once, so the audit
// can never pass the file as clean.
type Walks struct {
	walked map[frameWalkKey]bool
	work   int64
	budget int64
	told   bool
	// partial: some bytes CPython may read were not walked for another
	// reason than the budget (see Partial)
	partial bool
	exact   bool // see SetExact

	// the memory of the last walk, for the next one: walks from many
	// frame ends must not each grow a stack and a memo from nothing
	spare *Walker
}

// walker returns a walker over r (see newWalker), reusing the memory of
// the last one released.
func (ws *Walks) walker(r io.Reader, start, end int64, a Auditor, st *State) *Walker {
	w := ws.spare
	ws.spare = nil
	if w == nil || (end-start > int64(w.r.Size()) && w.r.Size() < 32<<10) {
		w = newWalker(r, start, end, a, st)
		w.exact = ws.exact
		return w
	}
	br, stack, marks, mem := w.r, w.stack[:0], w.marks[:0], w.memo
	br.Reset(r)
	mem.reset()
	*w = Walker{r: br, pos: start, end: end, audit: a, limit: math.MaxInt64, stack: stack, marks: marks, memo: mem, exact: ws.exact}
	if st != nil {
		w.stack, w.marks, w.memo, w.memoLost = st.stack, st.marks, st.memo, st.memoLost
		w.bottomLost, w.marksLost = st.bottomLost, st.marksLost
	}
	return w
}

// release keeps w's memory for the next walk (if it is not too large to
// keep).
func (ws *Walks) release(w *Walker) {
	if cap(w.stack)+cap(w.memo.dense) <= 1<<20 {
		w.frameEnds = nil
		ws.spare = w
	}
}

type frameWalkKey struct {
	base, from, end int64
	opOff, crossAt  int64 // see frameWalk
	// state: the fingerprint of what is known of the state (see
	// State.fingerprint): two ways of reading the bytes before a frame end
	// may reach it with different stacks, and from one of them CPython
	// may go on where the other stops
	state uint64
}

// DefaultWalkBudget is the budget of NewWalks(0): what a few walks of a
// 1 MiB file cost, and about a second of walking.
const DefaultWalkBudget = 16 << 20

// NewWalks returns the walk state of one audit with a budget of that many
// units of work (0: DefaultWalkBudget).
func NewWalks(budget int64) *Walks {
	if budget <= 0 {
		budget = DefaultWalkBudget
	}
	return &Walks{budget: budget}
}

// SetExact makes every later walk exact: for a region that CPython reads
// from its start and that is nothing else (a file torch.load reads as a
// pickle although it is another format), a walk ends where CPython's
// unpickler would raise (an unknown opcode, a stack or MARK underflow the
// walker saw in full, a name find_class cannot import, an EXT code — a
// torch process registers no copyreg extension —, the end of the data)
// instead of resynchronising at the next PROTO or STOP, which is
// for bytes no structure explains. Past a STOP the walk goes on with the
// next pickle, as CPython would if the caller read on.
func (ws *Walks) SetExact() { ws.exact = true }

// Work returns what the walks of the audit cost so far: opcodes stepped,
// bytes skipped to resynchronise, memo entries cleared.
func (ws *Walks) Work() int64 { return ws.work }

// Spent reports whether the budget ran out (some bytes were not walked).
func (ws *Walks) Spent() bool { return ws.told }

// Partial reports whether some bytes CPython may read were not walked:
// the budget ran out, or a bound on the frame ends walked again (or on
// the opcode walked again from one) was reached. The auditor was told
// with a problem each time; an audit that drops the walks' problems (a
// file that is not meant to be a pickle) must still not pass the file.
func (ws *Walks) Partial() bool { return ws.told || ws.partial }

// run walks w within what is left of the budget.
func (ws *Walks) run(w *Walker, off int64) {
	if ws.work >= ws.budget {
		ws.spend(w.audit, off)
		return
	}
	w.limit = ws.budget - ws.work
	w.run()
	ws.work += w.work
	ws.partial = ws.partial || w.partial
	if w.spent {
		ws.spend(w.audit, w.pos)
	}
}

// spend tells the auditor, once, that the budget is spent.
func (ws *Walks) spend(a Auditor, off int64) {
	if !ws.told {
		ws.told = true
		a.Problem(off, fmt.Sprintf("the walk budget of the scan (%d opcodes, skipped bytes and memo entries) is spent: from here on, and in every later walk, bytes were not walked for globals", ws.budget))
	}
}

// Walk walks [from, end) of the region at base of ra, reporting to a,
// starting from st (nil: a fresh pickle), and then what CPython may read
// from the frame ends it met.
func (ws *Walks) Walk(ra io.ReaderAt, base, from, end int64, a Auditor, st *State) {
	if from >= end || st != nil && st.raised {
		return
	}
	w := ws.walker(io.NewSectionReader(ra, base+from, end-from), from, end, a, st)
	ws.run(w, from)
	frameEnds := w.frameEnds
	ws.release(w)
	for _, fw := range frameEnds {
		ws.frameEnd(ra, base, fw, end, a)
	}
}

// WalkReader walks r, positioned at offset start of a region that ends
// at end, reporting to a, from st (nil: a fresh pickle); frame ends are
// not walked again (r cannot be read twice). The Walker says how far it
// read.
func (ws *Walks) WalkReader(r io.Reader, start, end int64, a Auditor, st *State) *Walker {
	w := newWalker(r, start, end, a, st)
	w.exact = ws.exact
	ws.run(w, start)
	return w
}

// Pos returns the offset the walker stopped at.
func (w *Walker) Pos() int64 { return w.pos }

// More reports whether the walker's reader holds more bytes (past Pos).
func (w *Walker) More() bool {
	_, err := w.r.ReadByte()
	return err == nil
}

// frameEnd walks what torch may read from a frame end fw.from to end of
// the region at base: the next pickle if a FRAME that ran past its STOP
// left the file at its end (see Machine.checkFrameEnd), or, where an
// argument crossed the frame end (see Machine.checkCross), the opcode and
// the arguments read before that one, then the frame end on. The caller
// already recorded the problem.
func (ws *Walks) frameEnd(ra io.ReaderAt, base int64, fw frameWalk, end int64, a Auditor) {
	// a work list, not recursion: walks from frame ends find more of them
	queue := []frameWalk{fw}
	for len(queue) > 0 {
		fw := queue[0]
		queue = queue[1:]
		if w := ws.walkFrom(ra, base, fw, end, a); w != nil {
			queue = append(queue, w.frameEnds...)
			ws.release(w)
		}
	}
}

// walkFrom walks one place of frameEnd.
func (ws *Walks) walkFrom(ra io.ReaderAt, base int64, fw frameWalk, end int64, a Auditor) *Walker {
	fe := fw.from
	if fe >= end {
		return nil
	}
	if fw.crossAt == fw.opOff { // nothing read from the frame first
		fw.opOff, fw.crossAt = fe, fe
	}
	k := frameWalkKey{base: base, from: fe, end: end, opOff: fw.opOff, crossAt: fw.crossAt, state: fw.st.fingerprint()}
	if ws.walked[k] {
		return nil
	}
	if ws.walked == nil {
		ws.walked = make(map[frameWalkKey]bool)
	}
	prefix := fw.crossAt - fw.opOff
	if prefix < 0 || prefix > maxCrossPrefix {
		a.Problem(fw.opOff, fmt.Sprintf("the opcode whose argument crosses the frame end at %d is too long to walk again", fe))
		ws.partial = true
		return nil
	}
	ws.walked[k] = true
	var r io.Reader = io.NewSectionReader(ra, base+fe, end-fe)
	if prefix > 0 {
		r = io.MultiReader(io.NewSectionReader(ra, base+fw.opOff, prefix), r)
	}
	w := ws.walker(r, fw.opOff, end, a.FrameEnd(), fw.st)
	if prefix > 0 {
		w.jumpAt, w.jumpTo = fw.crossAt, fe
	}
	ws.run(w, fe)
	return w
}
