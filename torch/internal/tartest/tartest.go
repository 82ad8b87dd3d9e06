// Package tartest builds tar archives byte by byte (and the few pickles
// they hold) for the tests of tarlist and torch: headers as Python's tarfile writes them and as an
// attacker writes them (signed checksums, base-256 and negative numbers,
// GNU long names, pax records, every GNU sparse format, links), and the
// layouts on which a naive lister and tarfile disagree. Each case that
// holds a pickle holds a posix.system payload, so that a scan of it must
// name that global.
package tartest

import (
	"encoding/binary"
	"fmt"
	"slices"
	"strings"
)

// SystemCall is a protocol-2 pickle body calling posix.system('true').
const SystemCall = "cposix\nsystem\n(X\x04\x00\x00\x00truetR"

// SystemPickle is SystemCall as a whole pickle.
func SystemPickle() []byte { return Pickle(SystemCall) }

// Pickle wraps body (see Cat) in PROTO 2 and STOP.
func Pickle(body ...any) []byte { return append(Cat(0x80, 2), append(Cat(body...), '.')...) }

// block is a tar block.
const block = 512

func le32(n uint32) []byte { return binary.LittleEndian.AppendUint32(nil, n) }

// Cat concatenates strings, byte slices and bytes (ints); anything else
// is a mistake in the test and panics.
func Cat(parts ...any) []byte {
	var b []byte
	for _, p := range parts {
		switch x := p.(type) {
		case string:
			b = append(b, x...)
		case []byte:
			b = append(b, x...)
		case byte:
			b = append(b, x)
		case int:
			b = append(b, byte(x))
		default:
			panic(fmt.Sprintf("Cat: %T", p))
		}
	}
	return b
}

// tarHeader builds a 512-byte header block: fields are (offset, bytes).
// The checksum is computed unsigned, or signed when signed is set.
func Hdr(signed bool, fields ...any) []byte {
	b := make([]byte, block)
	for i := 0; i+1 < len(fields); i += 2 {
		copy(b[fields[i].(int):], fields[i+1].(string))
	}
	SetChecksum(b, signed)
	return b
}

func SetChecksum(b []byte, signed bool) {
	copy(b[148:156], "        ")
	var sum int64
	for _, c := range b[:block] {
		if signed {
			sum += int64(int8(c))
		} else {
			sum += int64(c)
		}
	}
	copy(b[148:156], fmt.Sprintf("%06o\x00 ", sum))
}

func Pad(b []byte) []byte {
	for len(b)%block != 0 {
		b = append(b, 0)
	}
	return b
}

func Ustar(name string, size int, typ string, link string) []byte {
	return Hdr(false, 0, name, 100, "0000644", 124, fmt.Sprintf("%011o", size), 156, typ, 157, link, 257, "ustar\x0000")
}

func UstarMember(name string, data []byte) []byte {
	return Cat(Ustar(name, len(data), "0", ""), Pad(append([]byte(nil), data...)))
}

func Link(name, typ, target string) []byte { return Ustar(name, 0, typ, target) }

// GNULong is a GNU long name ('L') or long link ('K') header and its data.
func GNULong(typ, s string) []byte {
	return Cat(Hdr(false, 0, "././@LongLink", 100, "0000644", 124, fmt.Sprintf("%011o", len(s)+1), 156, typ), Pad([]byte(s+"\x00")))
}

// Pax is a pax header of type typ ('x' or 'g') holding the records.
func Pax(typ string, recs ...string) []byte {
	d := paxRecords(recs)
	return Cat(Hdr(false, 0, "././@PaxHeader", 100, "0000644", 124, fmt.Sprintf("%011o", len(d)), 156, typ), Pad(d))
}

// paxRecords is the data of a pax header holding recs ("key=value").
func paxRecords(recs []string) []byte {
	var d []byte
	for _, r := range recs {
		n := len(r) + 3
		for len(fmt.Sprintf("%d %s\n", n, r)) != n {
			n++
		}
		d = append(d, fmt.Sprintf("%d %s\n", n, r)...)
	}
	return d
}

// Gadget is the red team's header gadget: bytes 500..511 (unused by
// tarfile) end a text line, STOP, PROTO 2 and a BINBYTES whose length
// swallows the member data for a walker reading the whole file.
func Gadget(h []byte, swallow int) []byte {
	g := Cat("\n.", 0x80, 2, "B", le32(uint32(swallow)))
	h = append([]byte(nil), h...)
	copy(h[block-len(g):], g)
	SetChecksum(h, false)
	return h
}

func GadgetMember(name string, data []byte) []byte {
	p := Pad(append([]byte(nil), data...))
	return Cat(Gadget(Ustar(name, len(data), "0", ""), len(p)), p)
}

var (
	Storages0 = Cat(Pickle("K\x00"), Pickle("]"))
	Tensors0  = Pickle("K\x00")
	End       = make([]byte, 2*block)
)

func Base(rest ...any) []byte {
	return Cat(UstarMember("storages", Storages0), UstarMember("tensors", Tensors0), Cat(rest...), End)
}

// ListCases are extension-header orders and pax records whose reading
// differs between a naive lister and tarfile.
func ListCases() [][]byte {
	p := SystemPickle()
	nul := Ustar("v7dir/", 0, "\x00", "")
	return [][]byte{
		// long name outside a pax path: the long name wins
		Base(GNULong("L", "pickle"), Pax("x", "path=decoy"), UstarMember("other", p)),
		// pax path outside a long name: the pax path wins
		Base(Pax("x", "path=decoy"), GNULong("L", "pickle"), UstarMember("other", p)),
		// trailing slashes of a pax path are dropped
		Base(Pax("x", "path=pickle//"), UstarMember("decoy", p)),
		// a global path names every later member; a local one wins
		Base(Pax("g", "path=pickle/"), UstarMember("a", p), Pax("x", "path=b"), UstarMember("c", p)),
		// a global size changes the size read, not the next header
		Base(Pax("g", "size=10"), UstarMember("a", p), UstarMember("b", p)),
		// a local size moves the next header
		Base(Pax("x", "size=600"), UstarMember("a", p), make([]byte, 512), UstarMember("pickle", p)),
		// a global pax header between a local one and its member
		Base(Pax("x", "path=one"), Pax("g", "path=two"), UstarMember("a", p), UstarMember("b", p)),
		// long link and pax linkpath
		Base(UstarMember("payload", p), GNULong("K", "payload"), Pax("x", "linkpath=decoy"), Link("pickle", "2", "x")),
		Base(UstarMember("payload", p), Pax("x", "linkpath=decoy"), GNULong("K", "payload"), Link("pickle", "2", "x")),
		// GNU.sparse.name and path in both orders
		Base(Pax("x", "path=a", "GNU.sparse.name=pickle"), UstarMember("b", p)),
		Base(Pax("x", "GNU.sparse.name=a", "path=pickle/"), UstarMember("b", p)),
		// V7 directory names after extension headers
		Base(Pax("x", "path=pickle"), nul, UstarMember("after", p)),
		Base(GNULong("L", "pickle/"), Ustar("x", len(p), "\x00", ""), Pad(append([]byte(nil), p...))),
		Base(GNULong("L", "pickle"), Ustar("d", len(p), "5", ""), Pad(append([]byte(nil), p...))),
		// records the strict parser refuses, the old one skips
		Base(Pax("x", "path=a"), UstarMember("b", p), Cat(Hdr(false, 0, "bad", 100, "0000644", 124, fmt.Sprintf("%011o", 8), 156, "x"), Pad([]byte("3 x=\n5 a"))), UstarMember("pickle", p)),
		Base(Cat(Hdr(false, 0, "bad", 100, "0000644", 124, fmt.Sprintf("%011o", 12), 156, "x"), Pad([]byte("12 path=pi\n\x0015 path=pickle\n"))), UstarMember("c", p)),
		// a record running past the declared size (tarfile reads whole blocks)
		Base(Cat(Hdr(false, 0, "short", 100, "0000644", 124, fmt.Sprintf("%011o", 3), 156, "x"), Pad([]byte("15 path=pickle\n"))), UstarMember("c", p)),
		// a long name then a long link then a pax header, all on one member
		Base(UstarMember("payload", p), GNULong("L", "pickle"), GNULong("K", "./payload"), Pax("x", "path=zz", "linkpath=yy"), Link("q", "1", "r")),
	}
}

// NegSize sets the size field of header block h (a copy) to the
// base-256 negative n and fixes its checksum.
func NegSize(h []byte, n int64) []byte {
	h = append([]byte(nil), h...)
	NegStruct(h, 124, n)
	return h
}

// NegCases are negative (base-256) sizes as tarfile before gh-130577
// reads them: -511..-1 round to no data, so the next header follows.
func NegCases() [][]byte {
	p := SystemPickle()
	negPax := NegSize(Hdr(false, 0, "././@PaxHeader", 100, "0000644", 156, "x"), -1)
	negL := NegSize(Hdr(false, 0, "././@LongLink", 100, "0000644", 156, "L"), -300)
	return [][]byte{
		Cat(negPax, GadgetMember("storages", p), UstarMember("tensors", Tensors0), UstarMember("pickle", Pickle("}")), End),
		Base(negPax, GadgetMember("pickle", p)),
		Base(negL, GadgetMember("pickle", p)),
		// a regular member of size -1: the next header follows its header
		Base(NegSize(Ustar("pickle", 0, "0", ""), -1), GadgetMember("x", p)),
		// pax size=-5 on a member
		Base(Pax("x", "size=-5"), Ustar("pickle", 0, "0", ""), GadgetMember("y", p)),
	}
}

// NegGoCases are negative sizes tarfile would loop on or fail with,
// not run through python: a size of -1024 moves the next header back
// (here onto itself: tarfile never ends), -512 on a pax header reads to
// the end of the file. The payload stays scanned.
func NegGoCases() [][]byte {
	p := SystemPickle()
	return [][]byte{
		Base(GadgetMember("pickle", p), NegSize(Ustar("loop", 0, "0", ""), -1024)),
		Base(GadgetMember("pickle", p), NegSize(Ustar("back", 0, "0", ""), -(1<<40))),
		Base(GadgetMember("pickle", p), NegSize(Hdr(false, 0, "././@PaxHeader", 100, "0000644", 156, "x"), -512)),
	}
}

// LinkCases are links torch's legacy loader follows.
func LinkCases() [][]byte {
	p := SystemPickle()
	return [][]byte{
		Base(GadgetMember("payload", p), Link("pickle", "2", "payload")),
		Base(GadgetMember("payload", p), Link("pickle", "1", "./payload")),
		Base(GadgetMember("d/payload", p), Link("d/x", "2", "payload"), Link("pickle", "2", "d/x")),
		Base(GadgetMember("payload", p), Link("pickle", "2", "d/../payload")),
		Base(GadgetMember("payload", p), Link("pickle", "1", "d/../payload")),
		// a chain: symlink to a hard link to a member
		Base(GadgetMember("payload", p), Link("h", "1", "payload"), Link("pickle", "2", "h")),
		// a symlink to a member after it; a hard link to one (not found)
		Cat(UstarMember("storages", Storages0), UstarMember("tensors", Tensors0), Link("pickle", "2", "later"), GadgetMember("later", p), End),
		Cat(UstarMember("storages", Storages0), UstarMember("tensors", Tensors0), Link("pickle", "1", "later"), GadgetMember("later", p), End),
		// two members of the target's name: the last one before the link
		Base(UstarMember("payload", Pickle("N")), GadgetMember("payload", p), Link("pickle", "1", "payload"), UstarMember("payload", Pickle("N"))),
		// storages and tensors as links
		Cat(GadgetMember("payload", Cat(Pickle("K\x00"), p)), Link("storages", "1", "payload"), Link("tensors", "2", "storages"), UstarMember("pickle", Pickle("N")), End),
		// a loop, and a link out of the archive
		Base(GadgetMember("payload", p), Link("a", "2", "pickle"), Link("pickle", "2", "a")),
		Base(GadgetMember("payload", p), Link("pickle", "2", "../payload")),
		// a long link naming the target
		Base(GadgetMember("payload", p), GNULong("K", "./payload"), Link("pickle", "1", "nothing")),
	}
}

// SparseHdr is an old GNU sparse ('S') header: stored size, original size,
// the four header structs and the isextended flag (byte 482).
func SparseHdr(name string, stored, orig int64, structs [][2]int64, ext bool) []byte {
	b := Hdr(false, 0, name, 100, "0000644", 124, fmt.Sprintf("%011o", stored), 156, "S",
		483, fmt.Sprintf("%011o", orig))
	for i := 0; i < 4; i++ {
		var s [2]int64
		if i < len(structs) {
			s = structs[i]
		}
		copy(b[386+24*i:], fmt.Sprintf("%011o\x00%011o\x00", s[0], s[1]))
	}
	if ext {
		b[482] = 1
	}
	SetChecksum(b, false)
	return b
}

// SparseExt is one extension block of up to 21 structs.
func SparseExt(structs [][2]int64, more bool) []byte {
	b := make([]byte, block)
	for i, s := range structs {
		copy(b[24*i:], fmt.Sprintf("%011o\x00%011o\x00", s[0], s[1]))
	}
	if more {
		b[504] = 1
	}
	return b
}

func V7(name string, data []byte) []byte {
	return Cat(Hdr(false, 0, name, 100, "0000644", 124, fmt.Sprintf("%011o", len(data)), 156, "0"), Pad(append([]byte(nil), data...)))
}

func PaxHdr(recs ...string) []byte {
	d := paxRecords(recs)
	return Cat(Hdr(false, 0, "pax", 100, "0000644", 124, fmt.Sprintf("%011o", len(d)), 156, "x"), Pad(d))
}

var Harmless = Cat(V7("storages", Cat(Pickle("K\x00"), Pickle("]"))), V7("tensors", Pickle("K\x00")))

// SparseExtPickle is the red-team t1 layout: a sparse member with one
// extension block, whose tarfile data is a decoy header (what a lister
// ignoring the extension block reads) whose size swallows the real
// "pickle" header and data.
func SparseExtPickle() []byte {
	pk := V7("pickle", []byte("c"+SystemCall[1:]+"."))
	return Cat(Harmless, SparseHdr("sp", 512, 512, nil, true), SparseExt(nil, false),
		Hdr(false, 0, "dummy", 100, "0000644", 124, fmt.Sprintf("%011o", len(pk)), 156, "0"), pk, make([]byte, 2*block))
}

// SparseCases are sparse layouts for the comparison with tarfile.
func SparseCases() [][]byte {
	p := SystemPickle()
	h := len(p) / 2
	// the pickle itself sparse: two runs around a hole, the second run
	// described in a second extension block
	twoRuns := Cat(Harmless,
		SparseHdr("pickle", int64(len(p)), int64(len(p)+700), [][2]int64{{0, int64(h)}}, true),
		SparseExt([][2]int64{{0, 5}, {3, 0}}, true), SparseExt([][2]int64{{int64(h + 600), int64(len(p) - h)}}, false),
		Pad(append([]byte(nil), p...)), V7("after", []byte("x")), make([]byte, 2*block))
	zeros := Cat(Harmless, SparseHdr("pickle", int64(len(p)), int64(len(p)), [][2]int64{{0, 0}, {0, int64(len(p))}, {0, 0}}, false),
		Pad(append([]byte(nil), p...)), V7("after", []byte("y")), make([]byte, 2*block))
	paxSize := Cat(Harmless, PaxHdr("size=1000"), SparseHdr("sp", 512, 40, nil, true), SparseExt(nil, false),
		make([]byte, 1024), V7("pickle", p), make([]byte, 2*block))
	longName := Cat(Harmless, Hdr(false, 0, "././@LongLink", 100, "0000644", 124, fmt.Sprintf("%011o", 7), 156, "L"), Pad([]byte("pickle\x00")),
		SparseHdr("sp", int64(len(p)), int64(len(p)), [][2]int64{{0, int64(len(p))}}, true), SparseExt(nil, true), SparseExt(nil, false),
		Pad(append([]byte(nil), p...)), make([]byte, 2*block))
	sparseName := Cat(Harmless, PaxHdr("GNU.sparse.name=pickle"), V7("decoy", p), make([]byte, 2*block))
	badExt := Cat(Harmless, SparseHdr("sp", 0, 0, nil, true), SparseExt([][2]int64{{1, 1}}, false), V7("pickle", p), make([]byte, 2*block))
	copy(badExt[len(Harmless)+block+30:], "9")
	return slices.Concat([][]byte{SparseExtPickle(), twoRuns, zeros, paxSize, longName, sparseName, badExt}, PaxSparseCases())
}

// PaxSparse is a member in a pax GNU sparse format ("0.0", "0.1" or
// "1.0") named name, of original size real, with the map and stored data.
func PaxSparse(format, name string, real int, smap [][2]int64, stored []byte) []byte {
	var nums []string
	for _, s := range smap {
		nums = append(nums, fmt.Sprint(s[0]), fmt.Sprint(s[1]))
	}
	switch format {
	case "0.0":
		recs := []string{fmt.Sprintf("GNU.sparse.size=%d", real), fmt.Sprintf("GNU.sparse.numblocks=%d", len(smap))}
		for _, s := range smap {
			recs = append(recs, fmt.Sprintf("GNU.sparse.offset=%d", s[0]), fmt.Sprintf("GNU.sparse.numbytes=%d", s[1]))
		}
		recs = append(recs, "path="+name)
		return Cat(Pax("x", recs...), Ustar("sparse0", len(stored), "0", ""), Pad(append([]byte(nil), stored...)))
	case "0.1":
		return Cat(Pax("x", "GNU.sparse.major=0", "GNU.sparse.minor=1", "GNU.sparse.name="+name, fmt.Sprintf("GNU.sparse.realsize=%d", real),
			"GNU.sparse.map="+strings.Join(nums, ",")), Ustar("GNUSparseFile.0/"+name, len(stored), "0", ""), Pad(append([]byte(nil), stored...)))
	}
	m := Pad([]byte(fmt.Sprintf("%d\n%s\n", len(smap), strings.Join(nums, "\n"))))
	return Cat(Pax("x", "GNU.sparse.major=1", "GNU.sparse.minor=0", "GNU.sparse.name="+name, fmt.Sprintf("GNU.sparse.realsize=%d", real)),
		Ustar("GNUSparseFile.0/"+name, len(m)+len(stored), "0", ""), m, Pad(append([]byte(nil), stored...)))
}

// PaxSparseCases are pax GNU sparse members (formats 0.0, 0.1, 1.0):
// runs reordered, a hole, a 1.0 map longer than a block, a global map.
func PaxSparseCases() [][]byte {
	p := SystemPickle()
	h := len(p) / 2
	split := [][2]int64{{0, int64(h)}, {int64(h + 100), int64(len(p) - h)}}
	swap := [][2]int64{{int64(len(p) - h), int64(h)}, {0, int64(len(p) - h)}}
	var out [][]byte
	for _, f := range []string{"0.0", "0.1", "1.0"} {
		out = append(out,
			Base(PaxSparse(f, "pickle", len(p)+100, split, p)),
			Base(PaxSparse(f, "pickle", len(p), swap, Cat(p[h:], p[:h]))),
			Cat(UstarMember("tensors", Tensors0), PaxSparse(f, "storages", len(Storages0)+10, [][2]int64{{10, int64(len(Storages0))}}, Storages0), End))
	}
	var long [][2]int64
	for i := range 120 {
		long = append(long, [2]int64{int64(i * 4), 2})
	}
	out = append(out, Base(PaxSparse("1.0", "pickle", 480, long, make([]byte, 240))))
	out = append(out, Base(Pax("g", "GNU.sparse.map=0,3,10,3"), UstarMember("pickle", []byte("abcdef")), UstarMember("x", []byte("ghijkl"))))
	return out
}

// NegStruct writes a base-256 negative number n into the 12-byte field at
// b[at:] and fixes the checksum of the header block.
func NegStruct(b []byte, at int, n int64) {
	f := b[at : at+12]
	f[0], f[1], f[2], f[3] = 0xff, 0xff, 0xff, 0xff
	binary.BigEndian.PutUint64(f[4:], uint64(n))
	SetChecksum(b[:block], false)
}

// ExtractCases are old GNU sparse members as tar.extract writes them:
// runs overwriting each other, out of order, past the original size,
// holes, extension blocks, a negative (base-256) length, a negative offset
// and runs needing more data than the file holds.
func ExtractCases() [][]byte {
	data := []byte("0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
	mk := func(orig int64, structs [][2]int64, ext ...[][2]int64) []byte {
		var stored int64
		for _, s := range slices.Concat(structs, slices.Concat(ext...)) {
			stored += s[1]
		}
		b := Cat(SparseHdr("storages", stored, orig, structs, len(ext) > 0))
		for i, e := range ext {
			b = Cat(b, SparseExt(e, i+1 < len(ext)))
		}
		return Cat(b, Pad(append([]byte(nil), data[:stored]...)), V7("after", []byte("z")), End)
	}
	neg := mk(20, [][2]int64{{0, 10}, {4, 6}})
	NegStruct(neg, 386+24+12, -(1<<14)+6) // copyfileobj copies 6 bytes
	negOff := mk(20, [][2]int64{{0, 10}, {4, 3}})
	NegStruct(negOff, 386+24, -4)
	short := Cat(SparseHdr("storages", 4, 30, [][2]int64{{0, 4}, {10, 2000}}, false), Pad(append([]byte(nil), data[:4]...)))
	return [][]byte{
		mk(20, [][2]int64{{0, 10}, {0, 5}}),
		mk(40, [][2]int64{{30, 8}, {0, 10}, {5, 10}}),
		mk(24, [][2]int64{{30, 8}, {0, 10}, {20, 10}}),
		mk(3000, [][2]int64{{1000, 4}, {0, 4}}, [][2]int64{{2, 4}, {1002, 5}}, [][2]int64{{1500, 9}}),
		mk(8, [][2]int64{{0, 0}, {0, 8}, {0, 0}, {3, 2}}),
		neg, negOff, short,
		Cat(PaxSparse("0.1", "storages", 30, [][2]int64{{20, 8}, {0, 10}, {5, 10}}, data[:28]), End),
		Cat(PaxSparse("1.0", "storages", 12, [][2]int64{{8, 4}, {0, 8}}, data[:12]), End),
		Cat(PaxSparse("0.0", "storages", 9, [][2]int64{{0, 4}, {2, 4}}, data[:8]), End),
	}
}

// HeaderCases varies every field tarfile checks in the first header:
// checksum (unsigned, signed, wrong, base-256, blanks), the numeric fields
// (octal with NUL/space termination, leading blanks, 0o prefix,
// underscores, signs, base-256, non-octal, non-ASCII), and type flags.
func HeaderCases() [][]byte {
	nums := []string{"0000644\x00", "644", " 644 ", "\x00garbage", "0o644", "0o6_44", "6__44", "_644", "644_", "+644", "-644",
		"-0o7", "648", "64 4", "\t644\x0b", "\x80\x00\x00\x00\x00\x00\x01\x00", "\xff\xff\xff\xff\xff\xff\xff\xff", "6\xe94",
		"0x10", "\x1c644\x1f", "", "        ", "0O7", "0o", "0_7"}
	var cases [][]byte
	base := func() []byte {
		b := make([]byte, block)
		copy(b, "member")
		copy(b[100:], "0000644\x00")
		copy(b[124:], "00000000000\x00")
		b[156] = '0'
		return b
	}
	for _, field := range [][2]int{{100, 108}, {108, 116}, {124, 136}, {136, 148}, {329, 337}, {337, 345}} {
		for _, n := range nums {
			b := base()
			copy(b[field[0]:field[1]], make([]byte, field[1]-field[0]))
			copy(b[field[0]:field[1]], n)
			for _, signed := range []bool{false, true} {
				c := append([]byte(nil), b...)
				SetChecksum(c, signed)
				cases = append(cases, c)
			}
		}
	}
	for _, hi := range []bool{false, true} {
		for _, mode := range []string{"unsigned", "signed", "off", "blank", "b256", "spaces", "lead"} {
			b := base()
			if hi {
				b[20], b[400] = 0xe9, 0xff
			}
			var u, s int64 = 256, 256
			for i, c := range b {
				if i < 148 || i >= 156 {
					u += int64(c)
					s += int64(int8(c))
				}
			}
			switch mode {
			case "unsigned":
				copy(b[148:], fmt.Sprintf("%06o\x00 ", u))
			case "signed":
				copy(b[148:], fmt.Sprintf("%06o\x00 ", s))
			case "off":
				copy(b[148:], fmt.Sprintf("%06o\x00 ", u+1))
			case "blank":
				copy(b[148:], "        ")
			case "b256":
				b[148] = 0x80
				copy(b[149:], []byte{0, 0, 0, 0, byte(u >> 16), byte(u >> 8), byte(u)})
			case "spaces":
				copy(b[148:], fmt.Sprintf("  %o  ", u))
			case "lead":
				copy(b[148:], fmt.Sprintf("0o%o\x00", u))
			}
			cases = append(cases, b)
		}
	}
	cases = append(cases, make([]byte, block), make([]byte, 100))
	for _, typ := range []byte{0, '0', '1', '2', '5', '7', 'g', 'Z', 0xff} {
		b := base()
		b[156] = typ
		SetChecksum(b, false)
		cases = append(cases, b)
	}
	return cases
}
