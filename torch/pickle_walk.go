package torch

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
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
	s    string // the str, clipped to maxGlobalPart+1 bytes
}

const (
	maxWalkStack = 1 << 20
	maxWalkMemo  = 1 << 20
	maxWalkText  = maxGlobalPart + 1 // bytes of a string or line kept
)

type walker struct {
	r     *bufio.Reader
	pos   int64 // offset of the next byte inside entry
	end   int64 // offset where the region ends
	entry string
	rep   *ScanReport

	stack      []shadow
	marks      []int
	memo       map[uint64]shadow
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
	crossAt        int64      // where the read that crossed started
	pre            *walkState // the state before the opcode whose argument crossed

	// a walk of the bytes CPython reads after an argument crossed a frame
	// end goes on at jumpTo when it reaches jumpAt (see frameWalk)
	jumpAt, jumpTo int64
}

// jump moves pos past the gap between the frame bytes CPython read and the
// frame end (the reader itself holds no gap).
func (w *walker) jump() {
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
	st             *walkState
}

// maxFrameEnds bounds the frame ends one walker records.
const maxFrameEnds = 64

// walkRegion walks [start, end) of an entry read through r (positioned at
// start), starting from the shadow state st (nil: a fresh pickle).
func walkRegion(r io.Reader, start, end int64, entry string, rep *ScanReport, st *walkState) *walker {
	w := newWalker(r, start, end, entry, rep, st)
	w.run()
	return w
}

func newWalker(r io.Reader, start, end int64, entry string, rep *ScanReport, st *walkState) *walker {
	w := &walker{r: bufio.NewReaderSize(r, 32<<10), pos: start, end: end, entry: entry, rep: rep}
	if st != nil {
		w.stack, w.marks, w.memo, w.memoLost = st.stack, st.marks, st.memo, st.memoLost
	}
	if w.memo == nil {
		w.memo = make(map[uint64]shadow)
	}
	if st != nil {
		w.bottomLost, w.marksLost = st.bottomLost, st.marksLost
	}
	return w
}

// walkState seeds a walker with what the decoder had when it stopped.
type walkState struct {
	stack                 []shadow
	marks                 []int
	memo                  map[uint64]shadow
	memoLost              bool
	bottomLost, marksLost bool
}

// maxCrossStack bounds the stack values the walker keeps for a walk from
// a frame end an argument crossed; what is below is unknown.
const maxCrossStack = 256

// crossState returns a bounded copy of what the walker knows before the
// current opcode: the top of the stack, the marks within it, and the memo
// when it is small.
func (w *walker) crossState() *walkState {
	st := &walkState{memo: make(map[uint64]shadow), memoLost: w.memoLost,
		bottomLost: w.bottomLost, marksLost: w.marksLost}
	if len(w.memo) > maxCrossMemo {
		st.memoLost = true
	} else {
		for k, v := range w.memo {
			st.memo[k] = v
		}
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
func (w *walker) checkCross(op byte, off int64) {
	fe := w.crossed
	w.crossed = 0
	if fe == 0 {
		return
	}
	w.rep.addProblem(fmt.Sprintf("%s offset %d: an argument crosses a frame end (offset %d): CPython reads it from the frame end; both are walked", w.entry, off, fe))
	if len(w.frameEnds) >= maxFrameEnds {
		w.rep.addProblem(fmt.Sprintf("%s offset %d: more than %d frame ends to walk from; the bytes from this frame end were not walked again", w.entry, off, maxFrameEnds))
		return
	}
	w.frameEnds = append(w.frameEnds, frameWalk{from: fe, opOff: off, crossAt: w.crossAt, st: w.pre})
}

// arg notes that the next n bytes are an opcode's argument.
func (w *walker) arg(n uint64) {
	w.jump()
	if w.frame > w.pos && n > uint64(w.frame-w.pos) {
		w.cross(w.pos)
	}
}

// cross records that the read starting at at crossed the frame end.
func (w *walker) cross(at int64) {
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

func (w *walker) byte() (byte, bool) {
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
func (w *walker) le(n int) (uint64, bool) {
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
func (w *walker) payload(n uint64) (string, bool) {
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
func (w *walker) line() ([]byte, bool) {
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

func (w *walker) push(s shadow) {
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

func (w *walker) base() int {
	if len(w.marks) == 0 {
		return 0
	}
	return w.marks[len(w.marks)-1]
}

func (w *walker) pop() (shadow, bool) {
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

func (w *walker) popN(n int) bool {
	for i := 0; i < n; i++ {
		if _, ok := w.pop(); !ok {
			return false
		}
	}
	return true
}

func (w *walker) popMark() bool {
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

func (w *walker) reset() {
	w.stack, w.marks = w.stack[:0], w.marks[:0]
	if len(w.memo) > 0 {
		// a fresh map: clear would cost the old map's capacity at every STOP
		w.memo = make(map[uint64]shadow)
	}
	w.memoLost, w.bottomLost, w.marksLost = false, false, false
	w.frameEnd, w.frame, w.crossed = 0, 0, 0
}

func (w *walker) run() {
	for w.pos < w.end {
		off := w.pos
		op, ok := w.byte()
		if !ok {
			return
		}
		if op == opStop {
			if w.frameEnd > w.pos {
				w.rep.addProblem(fmt.Sprintf("%s offset %d: FRAME runs %d bytes past the STOP (to offset %d): the next pickle may start after the STOP or at the frame end; both are walked", w.entry, off, w.frameEnd-w.pos, w.frameEnd))
				if len(w.frameEnds) < maxFrameEnds {
					w.frameEnds = append(w.frameEnds, frameWalk{from: w.frameEnd})
				} else {
					w.rep.addProblem(fmt.Sprintf("%s offset %d: more than %d FRAMEs run past their STOP; the bytes from this frame end were not walked again", w.entry, off, maxFrameEnds))
				}
			}
			w.reset()
			continue
		}
		ok = w.step(op, off)
		w.checkCross(op, off)
		if !ok {
			w.resync()
		}
	}
}

// resync skips to the next PROTO opcode or just past the next STOP byte.
func (w *walker) resync() {
	w.reset()
	for {
		b, err := w.r.Peek(1)
		if err != nil || w.pos >= w.end {
			w.end = min(w.end, w.pos)
			return
		}
		if b[0] == opProto {
			if b2, err := w.r.Peek(2); err == nil && b2[1] <= 5 {
				return
			}
		}
		w.r.ReadByte()
		w.pos++
		if b[0] == opStop {
			return
		}
	}
}

// report records a global the walker found; only names that could be
// imported (dotted identifiers) are reported, so that noise in bytes that
// are not pickles is not taken for a module.
func (w *walker) report(module, name string, off int64, unknown bool) {
	reason := " (found by the opcode walker past the point where full decoding stopped)"
	if unknown {
		w.found++
		w.rep.addGlobal(GlobalUse{Module: "?", Name: "?", Offset: off, Entry: w.entry, Verdict: "not allowed",
			Reason: "STACK_GLOBAL operands the walker could not track" + reason})
		return
	}
	if !importable(module) || !importable(name) {
		return
	}
	w.found++
	_, v, why := classifyGlobal(module, name)
	if v != verdictAllowed {
		why += reason
	}
	w.rep.addGlobal(GlobalUse{Module: clip(module), Name: clip(name), Offset: off, Entry: w.entry,
		Allowed: v == verdictAllowed, Verdict: [...]string{"allowed", "unsupported", "not allowed"}[v], Reason: why})
}

// importable reports whether s is a dotted sequence of Python identifiers.
func importable(s string) bool {
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
func (w *walker) step(op byte, off int64) bool {
	other := shadow{kind: 'o'}
	switch op {
	case opMark:
		if len(w.marks) >= maxWalkStack {
			// CPython has no MARK limit: drop the outer half and go on
			// (popping past the rest clears the stack, see popMark)
			h := len(w.marks) / 2
			w.marks = append(w.marks[:0], w.marks[h:]...)
			w.marksLost = true
		}
		w.marks = append(w.marks, len(w.stack))
	case opPop:
		if len(w.stack) > w.base() {
			w.pop()
		} else {
			return w.popMark()
		}
	case opPopMark:
		return w.popMark()
	case opDup:
		s, ok := w.pop()
		if !ok {
			return false
		}
		w.push(s)
		w.push(s)
	case opNone, opNewTrue, opNewFalse, opEmptyTuple, opEmptyList, opEmptyDict, opEmptySet, opNextBuffer:
		w.push(other)
	case opReadOnlyBuffer:
	case opProto:
		p, ok := w.le(1)
		if !ok || p > 5 {
			return false
		}
	case opFrame:
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
	case opBinInt1:
		return w.skipPush(1)
	case opBinInt2:
		return w.skipPush(2)
	case opBinInt:
		return w.skipPush(4)
	case opBinFloat:
		return w.skipPush(8)
	case opInt, opLong, opFloat, opPersID:
		if _, ok := w.line(); !ok {
			return false
		}
		w.push(other)
	case opString, opUnicode:
		l, ok := w.line()
		if !ok {
			return false
		}
		s := ""
		if op == opString {
			b, ok := parseStringRepr(l)
			if !ok {
				return false
			}
			s = string(b)
		} else if s, ok = decodeRawUnicodeEscape(l); !ok {
			s = string(l) // surrogates: not a name torch could import anyway
		}
		w.push(shadowOf(s))
	case opLong1, opShortBinString, opShortBinBytes, opShortBinUnicode:
		return w.lenPush(op, 1)
	case opLong4, opBinString, opBinBytes, opBinUnicode:
		return w.lenPush(op, 4)
	case opBinUnicode8, opBinBytes8, opByteArray8:
		return w.lenPush(op, 8)
	case opTuple, opList, opDict, opFrozenSet:
		if !w.popMark() {
			return false
		}
		w.push(other)
	case opTuple1, opTuple2, opTuple3:
		if !w.popN(int(op-opTuple1) + 1) {
			return false
		}
		w.push(other)
	case opAppend, opBuild:
		return w.popN(1)
	case opSetItem:
		return w.popN(2)
	case opAppends, opSetItems, opAddItems:
		return w.popMark()
	case opBinPersID:
		if !w.popN(1) {
			return false
		}
		w.push(other)
	case opReduce, opNewObj:
		if !w.popN(2) {
			return false
		}
		w.push(other)
	case opNewObjEx:
		if !w.popN(3) {
			return false
		}
		w.push(other)
	case opObj:
		if !w.popMark() {
			return false
		}
		w.push(other)
	case opGet, opBinGet, opLongBinGet:
		idx, ok := w.memoIndex(op)
		if !ok {
			return false
		}
		s, found := w.memo[idx]
		if !found {
			if !w.memoLost {
				return false // KeyError in a real unpickler
			}
			s = shadow{kind: '?'}
		}
		w.push(s)
	case opPut, opBinPut, opLongBinPut, opMemoize:
		var idx uint64
		if op == opMemoize {
			idx = uint64(len(w.memo))
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
		if _, exists := w.memo[idx]; exists || len(w.memo) < maxWalkMemo {
			w.memo[idx] = s
		} else {
			w.memoLost = true
		}
	case opGlobal, opInst:
		mod, ok := w.line()
		if !ok {
			return false
		}
		name, ok := w.line()
		if !ok {
			return false
		}
		w.report(string(mod), string(name), off, false)
		if op == opInst && !w.popMark() {
			return false
		}
		w.push(other)
	case opStackGlobal:
		n, ok1 := w.pop()
		m, ok2 := w.pop()
		if !ok1 || !ok2 {
			return false
		}
		switch {
		case m.kind == '?' || n.kind == '?':
			w.report("", "", off, true)
		case m.kind == 's' && n.kind == 's':
			w.report(m.s, n.s, off, false)
		default:
			return false // STACK_GLOBAL requires str: a real unpickler stops
		}
		w.push(other)
	case opExt1, opExt2, opExt4:
		code, ok := w.le(lenWidth(op))
		if !ok {
			return false
		}
		w.found++
		w.rep.addGlobal(GlobalUse{Module: "<copyreg-extension>", Name: strconv.FormatUint(code, 10), Offset: off, Entry: w.entry,
			Verdict: "not allowed", Reason: "copyreg extension code (found by the opcode walker)"})
		w.push(other)
	default:
		return false
	}
	return true
}

func (w *walker) skipPush(n int) bool {
	if _, ok := w.le(n); !ok {
		return false
	}
	w.push(shadow{kind: 'o'})
	return true
}

// lenPush handles the length-prefixed opcodes.
func (w *walker) lenPush(op byte, width int) bool {
	n, ok := w.le(width)
	if !ok {
		return false
	}
	if width == 4 && (op == opLong4 || op == opBinString) && int32(uint32(n)) < 0 {
		return false
	}
	s, ok := w.payload(n)
	if !ok {
		return false
	}
	switch op {
	case opShortBinUnicode, opBinUnicode, opBinUnicode8, opShortBinString, opBinString:
		w.push(shadowOf(s))
	default:
		w.push(shadow{kind: 'o'})
	}
	return true
}

func (w *walker) memoIndex(op byte) (uint64, bool) {
	switch op {
	case opBinGet, opBinPut:
		return w.le(1)
	case opLongBinGet, opLongBinPut:
		return w.le(4)
	}
	l, ok := w.line()
	if !ok {
		return 0, false
	}
	v, ok := parsePyLong(l, 10)
	if !ok {
		return 0, false
	}
	i, isInt := v.(int64)
	return uint64(i), isInt && i >= 0
}
