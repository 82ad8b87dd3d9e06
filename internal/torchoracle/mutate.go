package torchoracle

// The mutation engine of the oracle differential tests
// (torch/oracle_test.go, convert/oracle_test.go):
// real checkpoints are parsed just enough to change them where torch and
// scan could disagree — the pickle opcodes (payload globals inserted at
// opcode boundaries, opcodes replaced, dropped, duplicated, FRAMEs broken,
// persistent ids that hand STACK_GLOBAL strings) and the container bytes
// (zip header fields, names, sizes and offsets; tar header fields; legacy
// stream boundaries and storage sizes). Everything is driven by a seeded
// math/rand/v2 source, so mutant N of a seed is always the same file.

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// opArg describes how an opcode's argument is laid out.
type opArg int

const (
	argNone opArg = iota
	argFixed
	argLen1
	argLen4
	argLen8
	argLine
	argTwoLines
)

type opInfo struct {
	kind opArg
	n    int // argFixed: bytes
}

var opTable = func() map[byte]opInfo {
	m := map[byte]opInfo{}
	for _, c := range []byte("(.012NRQt)]ae}dsulbo\x81\x85\x86\x87\x88\x89\x8f\x90\x91\x92\x93\x94\x97\x98") {
		m[byte(c)] = opInfo{kind: argNone}
	}
	for c, n := range map[byte]int{'K': 1, 'h': 1, 'q': 1, 0x80: 1, 0x82: 1, 'M': 2, 0x83: 2, 'J': 4, 'j': 4, 'r': 4, 0x84: 4, 'G': 8, 0x95: 8} {
		m[c] = opInfo{kind: argFixed, n: n}
	}
	for _, c := range []byte("UC\x8c\x8a") {
		m[byte(c)] = opInfo{kind: argLen1}
	}
	for _, c := range []byte("TXB\x8b") {
		m[byte(c)] = opInfo{kind: argLen4}
	}
	for _, c := range []byte("\x8d\x8e\x96") {
		m[byte(c)] = opInfo{kind: argLen8}
	}
	for _, c := range []byte("ILFSVPgp") {
		m[byte(c)] = opInfo{kind: argLine}
	}
	m['c'] = opInfo{kind: argTwoLines}
	m['i'] = opInfo{kind: argTwoLines}
	return m
}()

// opcodeBytes lists every defined opcode, for replacing one with another.
var opcodeBytes = func() []byte {
	var b []byte
	for c := 0; c < 256; c++ {
		if _, ok := opTable[byte(c)]; ok {
			b = append(b, byte(c))
		}
	}
	return b
}()

// pop is one opcode of a pickle: b[off:end], opcode b[off].
type pop struct{ off, end int }

// opLen returns the length of the opcode at b[i], or -1.
func opLen(b []byte, i int) int {
	info, ok := opTable[b[i]]
	if !ok {
		return -1
	}
	rest := len(b) - i - 1
	switch info.kind {
	case argNone:
		return 1
	case argFixed:
		if rest < info.n {
			return -1
		}
		return 1 + info.n
	case argLen1, argLen4, argLen8:
		w := map[opArg]int{argLen1: 1, argLen4: 4, argLen8: 8}[info.kind]
		if rest < w {
			return -1
		}
		var n uint64
		switch w {
		case 1:
			n = uint64(b[i+1])
		case 4:
			n = uint64(binary.LittleEndian.Uint32(b[i+1:]))
		case 8:
			n = binary.LittleEndian.Uint64(b[i+1:])
		}
		if n > uint64(rest-w) {
			return -1
		}
		return 1 + w + int(n)
	case argLine:
		j := bytes.IndexByte(b[i+1:], '\n')
		if j < 0 {
			return -1
		}
		return j + 2
	case argTwoLines:
		j := bytes.IndexByte(b[i+1:], '\n')
		if j < 0 {
			return -1
		}
		k := bytes.IndexByte(b[i+2+j:], '\n')
		if k < 0 {
			return -1
		}
		return j + k + 3
	}
	return -1
}

// pickleOps parses b from off up to and including the first STOP; ok is
// false when it could not get there.
func pickleOps(b []byte, off int) (ops []pop, ok bool) {
	for i := off; i < len(b); {
		n := opLen(b, i)
		if n < 0 {
			return ops, false
		}
		ops = append(ops, pop{i, i + n})
		if b[i] == '.' {
			return ops, true
		}
		i += n
	}
	return ops, false
}

// pickleSlot is one pickle inside a byte string: the opcodes of b[start:end].
type pickleSlot struct {
	start, end int
	proto      int
	ops        []pop
}

// findPickles lists the pickles that start at a PROTO opcode (or at offset
// 0) in b and parse to a STOP, up to max of them.
func findPickles(b []byte, max int) []pickleSlot {
	var out []pickleSlot
	for i := 0; i < len(b) && len(out) < max; i++ {
		if i != 0 && (b[i] != 0x80 || i+1 >= len(b) || b[i+1] > 5) {
			continue
		}
		ops, ok := pickleOps(b, i)
		if !ok || len(ops) < 2 {
			continue
		}
		proto := 0
		if b[i] == 0x80 {
			proto = int(b[i+1])
		}
		end := ops[len(ops)-1].end
		out = append(out, pickleSlot{start: i, end: end, proto: proto, ops: ops})
		i = end - 1
	}
	return out
}

// payloadGlobals are what the inserted opcodes name: code-running globals,
// torch names the unpickler maps or that are unsupported, allowlisted names
// in odd places, storage names (torch answers those without an audit event)
// and inert data classes torch's weights_only loader knows.
var payloadGlobals = [][2]string{
	{"posix", "system"}, {"os", "system"}, {"builtins", "eval"}, {"__builtin__", "eval"},
	{"builtins", "exec"}, {"subprocess", "Popen"}, {"runpy", "_run_code"}, {"builtins", "getattr"},
	{"torch.tensor", "Tensor"}, {"torch.tensor", "_rebuild_from_type_v2"}, {"torch._tensor", "_rebuild_from_type_v2"},
	{"torch._utils", "_rebuild_qtensor"}, {"torch.serialization", "load"},
	{"collections", "OrderedDict"}, {"torch._utils", "_rebuild_tensor_v2"}, {"_codecs", "encode"},
	{"torch", "FloatStorage"}, {"posix", "FloatStorage"}, {"torch", "float32"}, {"torch", "Size"},
	{"builtins", "set"}, {"torch", "device"}, {"argparse", "Namespace"},
	{"numpy.core.multiarray", "scalar"}, {"__main__", "Net"}, {"torch.nn.modules.linear", "Linear"},
	{"__torch__", "Net"}, {"functools", "partial"}, {"importlib", "import_module"},
}

func shortStr(s string) []byte {
	if len(s) < 256 {
		return append([]byte{0x8c, byte(len(s))}, s...)
	}
	b := []byte{'X', 0, 0, 0, 0}
	binary.LittleEndian.PutUint32(b[1:], uint32(len(s)))
	return append(b, s...)
}

// payload returns stack-neutral opcodes that make the unpickler look up
// module.name in one of several ways; persid says persistent_load hands back
// the first element of a ('module', x, None, None) tuple (legacy streams) or
// of any (x, None) tuple (the tar "pickle" member).
func payload(rng *rand.Rand, persid string) []byte {
	g := payloadGlobals[rng.IntN(len(payloadGlobals))]
	mod, name := g[0], g[1]
	var b []byte
	switch k := rng.IntN(8); {
	case k == 0:
		b = fmt.Appendf(nil, "c%s\n%s\n0", mod, name) // GLOBAL, POP
	case k == 1:
		b = append(append(shortStr(mod), shortStr(name)...), 0x93, '0') // STACK_GLOBAL
	case k == 2:
		// memo-fetched strings (the picklescan memo bypass)
		b = append(shortStr(mod), 'q', 240, '0')
		b = append(append(b, shortStr(name)...), 'q', 241, '0')
		b = append(b, 'h', 240, 'h', 241, 0x93, '0')
	case k == 3:
		// a call: GLOBAL (S'true' t R, POP
		b = fmt.Appendf(nil, "c%s\n%s\n(S'true'\ntR0", mod, name)
	case k == 4:
		b = fmt.Appendf(nil, "(i%s\n%s\n0", mod, name) // INST
	case k == 5 && persid != "":
		// persistent ids whose value is a string STACK_GLOBAL then uses
		pid := func(s string) []byte {
			x := []byte{'('}
			if persid == "legacy" {
				x = append(x, shortStr("module")...)
				x = append(append(x, shortStr(s)...), 'N', 'N', 't', 'Q')
			} else {
				x = append(append(x, shortStr(s)...), 'N', 't', 'Q')
			}
			return x
		}
		b = append(append(pid(mod), pid(name)...), 0x93, '0')
	case k == 6:
		// the global as a dict value beside the real object: DUP-free,
		// a one-entry dict built and dropped
		b = append([]byte{'}'}, shortStr("x")...)
		b = append(append(b, fmt.Appendf(nil, "c%s\n%s\n", mod, name)...), 's', '0')
	default:
		b = append(append(shortStr(mod), shortStr(name)...), 0x93, 'N', 'R', '0') // STACK_GLOBAL + REDUCE(None)
	}
	return b
}

// mutatePickle changes one pickle (b[s.start:s.end]) and returns the new
// pickle bytes and a description.
func mutatePickle(rng *rand.Rand, b []byte, s pickleSlot, persid string) ([]byte, string) {
	p := append([]byte(nil), b[s.start:s.end]...)
	ops := make([]pop, len(s.ops))
	for i, o := range s.ops {
		ops[i] = pop{o.off - s.start, o.end - s.start}
	}
	at := func() pop { return ops[rng.IntN(len(ops))] }
	splice := func(off, end int, with []byte) []byte {
		return append(append(append([]byte(nil), p[:off]...), with...), p[end:]...)
	}
	// a boundary strictly after PROTO (where an insertion still runs)
	boundary := func() int {
		o := ops[rng.IntN(len(ops))]
		if o.off == 0 && len(ops) > 1 && p[0] == 0x80 {
			o = ops[1]
		}
		return o.off
	}
	switch k := rng.IntN(12); k {
	case 0, 1, 2, 3:
		pl := payload(rng, persid)
		i := boundary()
		return splice(i, i, pl), fmt.Sprintf("insert %q at %d", pl, i)
	case 4:
		o := at()
		c := opcodeBytes[rng.IntN(len(opcodeBytes))]
		return splice(o.off, o.off+1, []byte{c}), fmt.Sprintf("opcode at %d -> %s", o.off, strconv.QuoteToASCII(string(c)))
	case 5:
		o := at()
		return splice(o.off, o.end, nil), fmt.Sprintf("drop op at %d", o.off)
	case 6:
		o := at()
		return splice(o.end, o.end, p[o.off:o.end]), fmt.Sprintf("duplicate op at %d", o.off)
	case 7:
		o := at()
		if o.end-o.off < 2 {
			return splice(o.off, o.off, []byte{'N', '0'}), fmt.Sprintf("insert None,POP at %d", o.off)
		}
		i := o.off + 1 + rng.IntN(o.end-o.off-1)
		v := interestingByte(rng, p[i])
		return splice(i, i+1, []byte{v}), fmt.Sprintf("arg byte %d -> %#x", i, v)
	case 8:
		i := rng.IntN(len(p))
		return p[:i], fmt.Sprintf("truncate pickle at %d", i)
	case 9:
		// FRAME: a frame header over some following ops, or a frame's
		// length changed, or a frame duplicated
		var frames []pop
		for _, o := range ops {
			if p[o.off] == 0x95 {
				frames = append(frames, o)
			}
		}
		if len(frames) > 0 && rng.IntN(2) == 0 {
			f := frames[rng.IntN(len(frames))]
			n := binary.LittleEndian.Uint64(p[f.off+1:])
			d := []int64{-1, 1, -8, 8, -int64(n), int64(rng.IntN(64))}[rng.IntN(6)]
			q := append([]byte(nil), p...)
			binary.LittleEndian.PutUint64(q[f.off+1:], uint64(int64(n)+d))
			if rng.IntN(3) == 0 {
				return splice(f.off, f.off, p[f.off:f.end]), fmt.Sprintf("duplicate FRAME header at %d", f.off)
			}
			return q, fmt.Sprintf("FRAME at %d length %+d", f.off, d)
		}
		i := boundary()
		n := rng.IntN(len(p)-i+1) + rng.IntN(3) - 1
		h := []byte{0x95, 0, 0, 0, 0, 0, 0, 0, 0}
		binary.LittleEndian.PutUint64(h[1:], uint64(max(n, 0)))
		return splice(i, i, h), fmt.Sprintf("FRAME(%d) inserted at %d", n, i)
	case 10:
		// a string argument rewritten to a module or name
		var strs []pop
		for _, o := range ops {
			if c := p[o.off]; c == 0x8c || c == 'X' || c == 'U' || c == 'T' {
				strs = append(strs, o)
			}
		}
		if len(strs) == 0 {
			break
		}
		o := strs[rng.IntN(len(strs))]
		g := payloadGlobals[rng.IntN(len(payloadGlobals))]
		return splice(o.off, o.end, shortStr(g[rng.IntN(2)])), fmt.Sprintf("string at %d -> %s", o.off, g)
	case 11:
		// two ops swapped
		a, c := at(), at()
		if a.off > c.off {
			a, c = c, a
		}
		if a.off == c.off {
			break
		}
		q := append([]byte(nil), p[:a.off]...)
		q = append(q, p[c.off:c.end]...)
		q = append(q, p[a.end:c.off]...)
		q = append(q, p[a.off:a.end]...)
		q = append(q, p[c.end:]...)
		return q, fmt.Sprintf("swap ops at %d and %d", a.off, c.off)
	}
	pl := payload(rng, persid)
	i := boundary()
	return splice(i, i, pl), fmt.Sprintf("insert %q at %d", pl, i)
}

func interestingByte(rng *rand.Rand, old byte) byte {
	return []byte{0, 1, 0x7f, 0x80, 0xff, old + 1, old - 1, '\n', '.', byte(rng.IntN(256))}[rng.IntN(10)]
}

// zipRecord is one member of a zip checkpoint.
type zipRecord struct {
	name string
	data []byte
}

func readZip(b []byte) ([]zipRecord, error) {
	zr, err := zip.NewReader(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		return nil, err
	}
	var recs []zipRecord
	for _, f := range zr.File {
		rc, err := f.Open()
		if err != nil {
			return nil, err
		}
		d, err := io.ReadAll(rc)
		rc.Close()
		if err != nil {
			return nil, err
		}
		recs = append(recs, zipRecord{f.Name, d})
	}
	return recs, nil
}

// writeZip lays records out as torch.save does: STORED, data on a 64-byte
// boundary (an "FB" padding extra field), data descriptors.
func writeZip(recs []zipRecord) []byte {
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, r := range recs {
		off := buf.Len() + 30 + len(r.name) + 4
		pad := (64 - off%64) % 64
		extra := make([]byte, 4+pad)
		copy(extra, "FB")
		binary.LittleEndian.PutUint16(extra[2:], uint16(pad))
		w, err := zw.CreateHeader(&zip.FileHeader{Name: r.name, Method: zip.Store, Extra: extra})
		if err != nil {
			panic(err)
		}
		w.Write(r.data)
		zw.Flush()
	}
	zw.Close()
	return buf.Bytes()
}

// tarMember is one member of a tar checkpoint.
type tarMember struct {
	name string
	data []byte
}

func readTar(b []byte) ([]tarMember, error) {
	tr := tar.NewReader(bytes.NewReader(b))
	var ms []tarMember
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return ms, nil
		}
		if err != nil {
			return nil, err
		}
		d, err := io.ReadAll(tr)
		if err != nil {
			return nil, err
		}
		ms = append(ms, tarMember{h.Name, d})
	}
}

func writeTar(ms []tarMember) []byte {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, m := range ms {
		tw.WriteHeader(&tar.Header{Name: m.name, Mode: 0o644, Size: int64(len(m.data)), Typeflag: tar.TypeReg, Format: tar.FormatUSTAR})
		tw.Write(m.data)
	}
	tw.Close()
	return buf.Bytes()
}

// field is a numeric or name field of a container header.
type field struct {
	off, size int
	what      string
	name      bool // a name: mutated as text
}

// zipFields lists the header fields of every local header, central
// directory entry and end record found in b.
func zipFields(b []byte) []field {
	var fs []field
	u16 := func(i int) int { return int(binary.LittleEndian.Uint16(b[i:])) }
	for i := 0; i+4 <= len(b); i++ {
		switch {
		case bytes.HasPrefix(b[i:], []byte("PK\x03\x04")) && i+30 <= len(b):
			for _, f := range [][2]int{{4, 2}, {6, 2}, {8, 2}, {14, 4}, {18, 4}, {22, 4}, {26, 2}, {28, 2}} {
				fs = append(fs, field{off: i + f[0], size: f[1], what: fmt.Sprintf("local@%d+%d", i, f[0])})
			}
			if n := u16(i + 26); i+30+n <= len(b) {
				fs = append(fs, field{off: i + 30, size: n, what: fmt.Sprintf("local name@%d", i), name: true})
			}
		case bytes.HasPrefix(b[i:], []byte("PK\x01\x02")) && i+46 <= len(b):
			for _, f := range [][2]int{{6, 2}, {8, 2}, {10, 2}, {16, 4}, {20, 4}, {24, 4}, {28, 2}, {30, 2}, {32, 2}, {42, 4}} {
				fs = append(fs, field{off: i + f[0], size: f[1], what: fmt.Sprintf("central@%d+%d", i, f[0])})
			}
			n, e := u16(i+28), u16(i+30)
			if i+46+n <= len(b) {
				fs = append(fs, field{off: i + 46, size: n, what: fmt.Sprintf("central name@%d", i), name: true})
			}
			// ZIP64 extra: sizes and offset
			for x := i + 46 + n; x+4 <= i+46+n+e && x+4 <= len(b); {
				id, l := u16(x), u16(x+2)
				if id == 1 {
					for j := 0; j+8 <= l && x+4+j+8 <= len(b); j += 8 {
						fs = append(fs, field{off: x + 4 + j, size: 8, what: fmt.Sprintf("zip64 extra@%d+%d", x, j)})
					}
				}
				x += 4 + l
			}
		case bytes.HasPrefix(b[i:], []byte("PK\x05\x06")) && i+22 <= len(b):
			for _, f := range [][2]int{{8, 2}, {10, 2}, {12, 4}, {16, 4}, {20, 2}} {
				fs = append(fs, field{off: i + f[0], size: f[1], what: fmt.Sprintf("eocd@%d+%d", i, f[0])})
			}
		case bytes.HasPrefix(b[i:], []byte("PK\x06\x06")) && i+56 <= len(b):
			for _, f := range [][2]int{{24, 8}, {32, 8}, {40, 8}, {48, 8}} {
				fs = append(fs, field{off: i + f[0], size: f[1], what: fmt.Sprintf("eocd64@%d+%d", i, f[0])})
			}
		case bytes.HasPrefix(b[i:], []byte("PK\x06\x07")) && i+20 <= len(b):
			fs = append(fs, field{off: i + 8, size: 8, what: fmt.Sprintf("locator@%d", i)})
		}
	}
	return fs
}

// tarFields lists the header fields of the tar headers in b (walking the
// chain of sizes from block 0).
func tarFields(b []byte) []field {
	var fs []field
	for off := 0; off+512 <= len(b); {
		h := b[off : off+512]
		if bytes.Count(h, []byte{0}) == 512 {
			break
		}
		for _, f := range []struct {
			o, n int
			name bool
		}{{0, 100, true}, {100, 8, false}, {124, 12, false}, {148, 8, false}, {156, 1, false}, {157, 100, true}, {257, 8, false}, {345, 155, true}} {
			fs = append(fs, field{off: off + f.o, size: f.n, what: fmt.Sprintf("tar@%d+%d", off, f.o), name: f.name})
		}
		size, err := strconv.ParseInt(strings.Trim(string(h[124:136]), " \x00"), 8, 64)
		if err != nil || size < 0 {
			break
		}
		off += 512 + int((size+511)/512*512)
	}
	return fs
}

// tarChecksum recomputes the checksum of the header at off.
func tarChecksum(b []byte, off int) {
	if off+512 > len(b) {
		return
	}
	h := b[off : off+512]
	copy(h[148:156], "        ")
	sum := 0
	for _, c := range h {
		sum += int(c)
	}
	copy(h[148:156], fmt.Sprintf("%06o\x00 ", sum))
}

var checkpointNames = []string{"data.pkl", "archive/data.pkl", "archive/data/0", "archive/version", "constants.pkl",
	"archive/constants.pkl", "pickle", "storages", "tensors", "DATA.PKL", "archive/Data.pkl", "archive/data/1"}

// mutateField changes one container field.
func mutateField(rng *rand.Rand, b []byte, f field, isTar bool) ([]byte, string) {
	q := append([]byte(nil), b...)
	if f.name {
		var v string
		switch rng.IntN(3) {
		case 0:
			v = checkpointNames[rng.IntN(len(checkpointNames))]
		case 1:
			v = strings.ToUpper(string(q[f.off : f.off+f.size]))
		default:
			x := []byte(string(q[f.off : f.off+f.size]))
			if len(x) > 0 {
				x[rng.IntN(len(x))] = interestingByte(rng, 0)
			}
			v = string(x)
		}
		nv := make([]byte, f.size)
		copy(nv, v)
		if !isTar && len(v) < f.size {
			nv = []byte(v + strings.Repeat("x", f.size-len(v)))
		}
		copy(q[f.off:], nv)
		if isTar && rng.IntN(4) != 0 {
			tarChecksum(q, f.off-(f.off%512))
		}
		return q, fmt.Sprintf("%s -> %q", f.what, v)
	}
	if isTar {
		// a numeric tar field as text: octal, blanks, base-256, garbage
		var v []byte
		old, _ := strconv.ParseInt(strings.Trim(string(q[f.off:f.off+f.size]), " \x00"), 8, 64)
		switch rng.IntN(5) {
		case 0:
			v = fmt.Appendf(nil, "%0*o\x00", f.size-1, old+int64(rng.IntN(3)-1)*512)
		case 1:
			v = fmt.Appendf(nil, "%0*o\x00", f.size-1, rng.IntN(1<<16))
		case 2:
			v = bytes.Repeat([]byte{0xff}, f.size) // base-256 -1
		case 3:
			v = fmt.Appendf(nil, " %o ", old)
		default:
			v = []byte{byte(rng.IntN(256))}
		}
		if len(v) > f.size {
			v = v[:f.size]
		}
		copy(q[f.off:f.off+f.size], v)
		if rng.IntN(4) != 0 && f.off%512 != 148 {
			tarChecksum(q, f.off-(f.off%512))
		}
		return q, fmt.Sprintf("%s -> %q", f.what, v)
	}
	var old uint64
	switch f.size {
	case 2:
		old = uint64(binary.LittleEndian.Uint16(q[f.off:]))
	case 4:
		old = uint64(binary.LittleEndian.Uint32(q[f.off:]))
	case 8:
		old = binary.LittleEndian.Uint64(q[f.off:])
	}
	v := []uint64{0, 1, old + 1, old - 1, old + 64, old - 64, old + 512, 0xffffffff, 0xffff, uint64(len(b)), old * 2, uint64(rng.IntN(len(b) + 1))}[rng.IntN(12)]
	switch f.size {
	case 2:
		binary.LittleEndian.PutUint16(q[f.off:], uint16(v))
	case 4:
		binary.LittleEndian.PutUint32(q[f.off:], uint32(v))
	case 8:
		binary.LittleEndian.PutUint64(q[f.off:], v)
	}
	return q, fmt.Sprintf("%s %d -> %d", f.what, old, v)
}

// mutateRaw applies a container-blind change.
func mutateRaw(rng *rand.Rand, b []byte) ([]byte, string) {
	if len(b) == 0 {
		return []byte("\x80\x02cposix\nsystem\n."), "empty -> payload"
	}
	switch rng.IntN(6) {
	case 0:
		i := rng.IntN(len(b))
		return b[:i], fmt.Sprintf("truncate at %d", i)
	case 1:
		i := rng.IntN(len(b))
		q := append([]byte(nil), b...)
		q[i] = interestingByte(rng, q[i])
		return q, fmt.Sprintf("byte %d -> %#x", i, q[i])
	case 2:
		pl := append(append([]byte{0x80, 2}, payload(rng, "")...), 'N', '.')
		return append(append([]byte(nil), b...), pl...), "append a payload pickle"
	case 3:
		i, n := rng.IntN(len(b)), 1+rng.IntN(64)
		j := min(i+n, len(b))
		return append(append(append([]byte(nil), b[:j]...), b[i:j]...), b[j:]...), fmt.Sprintf("duplicate [%d,%d)", i, j)
	case 4:
		i := rng.IntN(len(b))
		n := 1 + rng.IntN(16)
		return append(append(append([]byte(nil), b[:i]...), make([]byte, n)...), b[i:]...), fmt.Sprintf("insert %d NULs at %d", n, i)
	default:
		// the same file twice (a zip after a zip, a legacy stream after itself)
		return append(append([]byte(nil), b...), b...), "file doubled"
	}
}

// Base is a real checkpoint mutants are made from.
type Base struct {
	Name    string
	Data    []byte
	Kind    string // "zip", "legacy" or "tar"
	recs    []zipRecord
	members []tarMember
}

// isTar reports whether b's first block passes a tar header checksum (as
// Python's tarfile checks it, unsigned or signed).
func isTar(b []byte) bool {
	if len(b) < 512 {
		return false
	}
	s := strings.Trim(string(b[148:156]), " \x00")
	want, err := strconv.ParseInt(s, 8, 64)
	if err != nil {
		return false
	}
	var u, sg int64
	for i, c := range b[:512] {
		if i >= 148 && i < 156 {
			c = ' '
		}
		u += int64(c)
		sg += int64(int8(c))
	}
	return want == u || want == sg
}

// LoadBases reads the checkpoints at paths (zip, legacy or tar, by content).
func LoadBases(paths []string) ([]Base, error) {
	var bases []Base
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, err
		}
		base := Base{Name: filepath.Base(p), Data: b}
		switch {
		case strings.HasPrefix(string(b), "PK\x03\x04"):
			base.Kind = "zip"
			if base.recs, err = readZip(b); err != nil {
				return nil, fmt.Errorf("%s: %v", p, err)
			}
		case isTar(b):
			base.Kind = "tar"
			if base.members, err = readTar(b); err != nil {
				return nil, fmt.Errorf("%s: %v", p, err)
			}
		default:
			base.Kind = "legacy"
		}
		bases = append(bases, base)
	}
	return bases, nil
}

// Mutant makes mutant i of seed from one of bases: zero to two pickle
// mutations (container rebuilt around the changed pickle), then zero or one
// container mutation, at least one in all. desc says what was done.
func Mutant(seed uint64, i int, bases []Base) (data []byte, desc string) {
	rng := rand.New(rand.NewPCG(seed, uint64(i)))
	base := bases[rng.IntN(len(bases))]
	steps := []string{base.Name}
	data = base.Data
	pickleSteps, containerSteps := rng.IntN(3), rng.IntN(2)
	if pickleSteps+containerSteps == 0 {
		pickleSteps = 1
	}
	recs := slices.Clone(base.recs)
	members := slices.Clone(base.members)
	for range pickleSteps {
		var d string
		switch base.Kind {
		case "zip":
			var cand []int
			for j, r := range recs {
				if len(findPickles(r.data, 1)) > 0 && (strings.HasSuffix(r.name, ".pkl") || rng.IntN(8) == 0) {
					cand = append(cand, j)
				}
			}
			if len(cand) == 0 {
				data, d = mutateRaw(rng, data)
				break
			}
			j := cand[rng.IntN(len(cand))]
			s := findPickles(recs[j].data, 1)[0]
			var np []byte
			np, d = mutatePickle(rng, recs[j].data, s, "")
			recs[j].data = slices.Concat(recs[j].data[:s.start], np, recs[j].data[s.end:])
			d = recs[j].name + ": " + d
			data = writeZip(recs)
		case "tar":
			j := rng.IntN(len(members))
			slots := findPickles(members[j].data, 8)
			if len(slots) == 0 {
				data, d = mutateRaw(rng, data)
				break
			}
			s := slots[rng.IntN(len(slots))]
			persid := ""
			if members[j].name == "pickle" {
				persid = "tar"
			}
			var np []byte
			np, d = mutatePickle(rng, members[j].data, s, persid)
			members[j] = tarMember{members[j].name, slices.Concat(members[j].data[:s.start], np, members[j].data[s.end:])}
			d = fmt.Sprintf("member %s pickle@%d: %s", members[j].name, s.start, d)
			data = writeTar(members)
		default:
			slots := legacyPickles(data)
			if len(slots) == 0 {
				data, d = mutateRaw(rng, data)
				break
			}
			k := rng.IntN(len(slots))
			persid := ""
			if k == 3 {
				persid = "legacy"
			}
			var np []byte
			np, d = mutatePickle(rng, data, slots[k], persid)
			data = slices.Concat(data[:slots[k].start], np, data[slots[k].end:])
			d = fmt.Sprintf("pickle %d: %s", k+1, d)
		}
		steps = append(steps, d)
	}
	// Structural steps draw from their own stream, so that mutants without
	// one are the same as before they existed.
	srng := rand.New(rand.NewPCG(seed^0x9e3779b97f4a7c15, uint64(i)))
	if srng.IntN(4) == 0 {
		var d string
		switch base.Kind {
		case "zip":
			recs, d = mutateZipRecords(srng, recs)
			data = writeZip(recs)
		case "tar":
			members, d = mutateTarMembers(srng, members)
			data = writeTar(members)
		default:
			data, d = mutateLegacyStream(srng, data)
		}
		steps = append(steps, d)
	}
	for range containerSteps {
		var fs []field
		switch base.Kind {
		case "zip":
			fs = zipFields(data)
		case "tar":
			fs = tarFields(data)
		default:
			if slots := legacyPickles(data); len(slots) == 5 && slots[4].end+8 <= len(data) {
				fs = []field{{off: slots[4].end, size: 8, what: "first storage numel"}}
			}
		}
		var d string
		if len(fs) > 0 && rng.IntN(3) != 0 {
			data, d = mutateField(rng, data, fs[rng.IntN(len(fs))], base.Kind == "tar")
		} else {
			data, d = mutateRaw(rng, data)
		}
		steps = append(steps, d)
	}
	return data, strings.Join(steps, "; ")
}

// legacyPickles returns the pickles of a legacy stream from offset 0, back
// to back, as torch reads them (at most five).
func legacyPickles(b []byte) []pickleSlot {
	var out []pickleSlot
	for off := 0; off < len(b) && len(out) < 5; {
		ops, ok := pickleOps(b, off)
		if !ok {
			break
		}
		end := ops[len(ops)-1].end
		out = append(out, pickleSlot{start: off, end: end, ops: ops})
		off = end
	}
	return out
}

// CorpusPaths lists the real checkpoints mutants are made from under the
// repository's testdata directory: torch.save output (zip and legacy) in
// testdata/torch and the files of testdata/oracle whose INDEX.json line has
// "corpus": true (written with torch by make_checkpoints.py: tar, legacy
// protocol 5, training checkpoints). Files join the corpus only by that
// mark, so that adding fixtures does not renumber the mutants.
func CorpusPaths(testdata string) []string {
	var paths []string
	for _, pat := range []string{"torch/*.pt", "torch/*.bin", "torch/*.pth"} {
		m, _ := filepath.Glob(filepath.Join(testdata, pat))
		paths = append(paths, m...)
	}
	if b, err := os.ReadFile(filepath.Join(testdata, "oracle", "INDEX.json")); err == nil {
		var idx []struct {
			Name   string `json:"name"`
			Corpus bool   `json:"corpus"`
		}
		if json.Unmarshal(b, &idx) == nil {
			for _, e := range idx {
				if e.Corpus {
					paths = append(paths, filepath.Join(testdata, "oracle", e.Name))
				}
			}
		}
	}
	sort.Strings(paths)
	return paths
}

// payloadPickle is a whole pickle (protocol 2) whose only work is the
// payload.
func payloadPickle(rng *rand.Rand) []byte {
	return slices.Concat([]byte{0x80, 2}, payload(rng, ""), []byte("N."))
}

// mutateZipRecords changes the record list of a zip checkpoint: a second
// data.pkl (before or after the real one) holding a payload, a record
// renamed (case, prefix, another record's name), a TorchScript marker, a
// stray pickle record, a record dropped or duplicated.
func mutateZipRecords(rng *rand.Rand, recs []zipRecord) ([]zipRecord, string) {
	recs = slices.Clone(recs)
	if len(recs) == 0 {
		return recs, "no records"
	}
	pkl := 0
	for j, r := range recs {
		if strings.HasSuffix(r.name, "data.pkl") {
			pkl = j
		}
	}
	prefix, _, _ := strings.Cut(recs[pkl].name, "/")
	evil := zipRecord{recs[pkl].name, payloadPickle(rng)}
	switch rng.IntN(9) {
	case 0:
		return slices.Insert(recs, pkl, evil), "a payload data.pkl before the real one"
	case 1:
		return slices.Insert(recs, pkl+1, evil), "a payload data.pkl after the real one"
	case 2:
		j := rng.IntN(len(recs))
		old := recs[j].name
		recs[j].name = strings.ToUpper(old)
		return recs, fmt.Sprintf("record %s renamed %s", old, recs[j].name)
	case 3:
		j, k := rng.IntN(len(recs)), rng.IntN(len(recs))
		old := recs[j].name
		recs[j].name = recs[k].name
		return recs, fmt.Sprintf("record %s renamed %s", old, recs[k].name)
	case 4:
		name := prefix + "/constants.pkl"
		if rng.IntN(2) == 0 {
			name = prefix + "/CONSTANTS.PKL"
		}
		return slices.Insert(recs, rng.IntN(len(recs)+1), zipRecord{name, payloadPickle(rng)}), "a TorchScript marker " + name + " holding a payload"
	case 5:
		name := []string{prefix + "/extra.pkl", prefix + "/data/99", "other/data.pkl", prefix + "/.data/x.pkl"}[rng.IntN(4)]
		return slices.Insert(recs, rng.IntN(len(recs)+1), zipRecord{name, payloadPickle(rng)}), "a stray record " + name + " holding a payload"
	case 6:
		j := rng.IntN(len(recs))
		name := recs[j].name
		return slices.Delete(recs, j, j+1), "record " + name + " dropped"
	case 7:
		j := rng.IntN(len(recs))
		return slices.Insert(recs, j, recs[j]), "record " + recs[j].name + " duplicated"
	}
	old := recs[pkl].name
	recs[pkl].name = "other/data.pkl"
	return recs, "record " + old + " moved to other/data.pkl"
}

// mutateTarMembers changes the member list of a tar checkpoint.
func mutateTarMembers(rng *rand.Rand, ms []tarMember) ([]tarMember, string) {
	ms = slices.Clone(ms)
	if len(ms) == 0 {
		return ms, "no members"
	}
	names := []string{"storages", "tensors", "pickle", "./pickle", "pickle/", "PICKLE"}
	switch rng.IntN(6) {
	case 0:
		n := names[rng.IntN(3)]
		return append(ms, tarMember{n, payloadPickle(rng)}), "a payload member " + n + " appended (tarfile uses the last)"
	case 1:
		n := names[rng.IntN(3)]
		return slices.Insert(ms, 0, tarMember{n, payloadPickle(rng)}), "a payload member " + n + " first"
	case 2:
		j := rng.IntN(len(ms))
		old := ms[j].name
		ms[j].name = names[rng.IntN(len(names))]
		return ms, fmt.Sprintf("member %s renamed %s", old, ms[j].name)
	case 3:
		j := rng.IntN(len(ms))
		name := ms[j].name
		return slices.Delete(ms, j, j+1), "member " + name + " dropped"
	case 4:
		j, k := rng.IntN(len(ms)), rng.IntN(len(ms))
		ms[j], ms[k] = ms[k], ms[j]
		return ms, fmt.Sprintf("members %d and %d swapped", j, k)
	}
	j := rng.IntN(len(ms))
	ms[j].data = slices.Concat(ms[j].data, payloadPickle(rng))
	return ms, "a payload pickle after member " + ms[j].name + "'s data"
}

// mutateLegacyStream changes the pickle sequence of a legacy stream.
func mutateLegacyStream(rng *rand.Rand, b []byte) ([]byte, string) {
	slots := legacyPickles(b)
	if len(slots) == 0 {
		return slices.Concat(payloadPickle(rng), b), "a payload pickle first"
	}
	k := rng.IntN(len(slots))
	s := slots[k]
	switch rng.IntN(4) {
	case 0:
		return slices.Concat(b[:s.start], payloadPickle(rng), b[s.end:]), fmt.Sprintf("pickle %d replaced by a payload", k+1)
	case 1:
		return slices.Concat(b[:s.end], payloadPickle(rng), b[s.end:]), fmt.Sprintf("a payload pickle after pickle %d", k+1)
	case 2:
		return slices.Concat(b[:s.end], b[s.start:s.end], b[s.end:]), fmt.Sprintf("pickle %d duplicated", k+1)
	}
	return slices.Concat(b[:s.start], b[s.end:]), fmt.Sprintf("pickle %d dropped", k+1)
}
