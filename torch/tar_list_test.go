package torch

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// ---- tar building blocks (ustar headers as Python's tarfile writes them) ----

func ustarHdr(name string, size int, typ string, link string) []byte {
	return tarHdr(false, 0, name, 100, "0000644", 124, fmt.Sprintf("%011o", size), 156, typ, 157, link, 257, "ustar\x0000")
}

func ustarMember(name string, data []byte) []byte {
	return cat(ustarHdr(name, len(data), "0", ""), pad512(append([]byte(nil), data...)))
}

func tarLink(name, typ, target string) []byte { return ustarHdr(name, 0, typ, target) }

// gnuLong is a GNU long name ('L') or long link ('K') header and its data.
func gnuLong(typ, s string) []byte {
	return cat(tarHdr(false, 0, "././@LongLink", 100, "0000644", 124, fmt.Sprintf("%011o", len(s)+1), 156, typ), pad512([]byte(s+"\x00")))
}

// paxTyp is a pax header of type typ ('x' or 'g') holding the records.
func paxTyp(typ string, recs ...string) []byte {
	var d []byte
	for _, r := range recs {
		n := len(r) + 3
		for len(fmt.Sprintf("%d %s\n", n, r)) != n {
			n++
		}
		d = append(d, fmt.Sprintf("%d %s\n", n, r)...)
	}
	return cat(tarHdr(false, 0, "././@PaxHeader", 100, "0000644", 124, fmt.Sprintf("%011o", len(d)), 156, typ), pad512(d))
}

// tarGadget is the red team's header gadget: bytes 500..511 (unused by
// tarfile) end a text line, STOP, PROTO 2 and a BINBYTES whose length
// swallows the member data for a walker reading the whole file.
func tarGadget(h []byte, swallow int) []byte {
	g := cat("\n.", 0x80, 2, "B", le32(uint32(swallow)))
	h = append([]byte(nil), h...)
	copy(h[tarBlock-len(g):], g)
	setTarChecksum(h, false)
	return h
}

func gadgetMember(name string, data []byte) []byte {
	p := pad512(append([]byte(nil), data...))
	return cat(tarGadget(ustarHdr(name, len(data), "0", ""), len(p)), p)
}

var (
	tarStorages0 = cat(hPickle("K\x00"), hPickle("]"))
	tarTensors0  = hPickle("K\x00")
	tarEnd       = make([]byte, 2*tarBlock)
)

func tarBase(rest ...any) []byte {
	return cat(ustarMember("storages", tarStorages0), ustarMember("tensors", tarTensors0), cat(rest...), tarEnd)
}

// tarListCases are extension-header orders and pax records whose reading
// differs between a naive lister and tarfile.
func tarListCases() [][]byte {
	p := systemPickle()
	nul := ustarHdr("v7dir/", 0, "\x00", "")
	return [][]byte{
		// long name outside a pax path: the long name wins
		tarBase(gnuLong("L", "pickle"), paxTyp("x", "path=decoy"), ustarMember("other", p)),
		// pax path outside a long name: the pax path wins
		tarBase(paxTyp("x", "path=decoy"), gnuLong("L", "pickle"), ustarMember("other", p)),
		// trailing slashes of a pax path are dropped
		tarBase(paxTyp("x", "path=pickle//"), ustarMember("decoy", p)),
		// a global path names every later member; a local one wins
		tarBase(paxTyp("g", "path=pickle/"), ustarMember("a", p), paxTyp("x", "path=b"), ustarMember("c", p)),
		// a global size changes the size read, not the next header
		tarBase(paxTyp("g", "size=10"), ustarMember("a", p), ustarMember("b", p)),
		// a local size moves the next header
		tarBase(paxTyp("x", "size=600"), ustarMember("a", p), make([]byte, 512), ustarMember("pickle", p)),
		// a global pax header between a local one and its member
		tarBase(paxTyp("x", "path=one"), paxTyp("g", "path=two"), ustarMember("a", p), ustarMember("b", p)),
		// long link and pax linkpath
		tarBase(ustarMember("payload", p), gnuLong("K", "payload"), paxTyp("x", "linkpath=decoy"), tarLink("pickle", "2", "x")),
		tarBase(ustarMember("payload", p), paxTyp("x", "linkpath=decoy"), gnuLong("K", "payload"), tarLink("pickle", "2", "x")),
		// GNU.sparse.name and path in both orders
		tarBase(paxTyp("x", "path=a", "GNU.sparse.name=pickle"), ustarMember("b", p)),
		tarBase(paxTyp("x", "GNU.sparse.name=a", "path=pickle/"), ustarMember("b", p)),
		// V7 directory names after extension headers
		tarBase(paxTyp("x", "path=pickle"), nul, ustarMember("after", p)),
		tarBase(gnuLong("L", "pickle/"), ustarHdr("x", len(p), "\x00", ""), pad512(append([]byte(nil), p...))),
		tarBase(gnuLong("L", "pickle"), ustarHdr("d", len(p), "5", ""), pad512(append([]byte(nil), p...))),
		// records the strict parser refuses, the old one skips
		tarBase(paxTyp("x", "path=a"), ustarMember("b", p), cat(tarHdr(false, 0, "bad", 100, "0000644", 124, fmt.Sprintf("%011o", 8), 156, "x"), pad512([]byte("3 x=\n5 a"))), ustarMember("pickle", p)),
		tarBase(cat(tarHdr(false, 0, "bad", 100, "0000644", 124, fmt.Sprintf("%011o", 12), 156, "x"), pad512([]byte("12 path=pi\n\x0015 path=pickle\n"))), ustarMember("c", p)),
		// a record running past the declared size (tarfile reads whole blocks)
		tarBase(cat(tarHdr(false, 0, "short", 100, "0000644", 124, fmt.Sprintf("%011o", 3), 156, "x"), pad512([]byte("15 path=pickle\n"))), ustarMember("c", p)),
		// a long name then a long link then a pax header, all on one member
		tarBase(ustarMember("payload", p), gnuLong("L", "pickle"), gnuLong("K", "./payload"), paxTyp("x", "path=zz", "linkpath=yy"), tarLink("q", "1", "r")),
	}
}

// negSize sets the size field of header block h (a copy) to the
// base-256 negative n and fixes its checksum.
func negSize(h []byte, n int64) []byte {
	h = append([]byte(nil), h...)
	negStruct(h, 124, n)
	return h
}

// tarNegCases are negative (base-256) sizes as tarfile before gh-130577
// reads them: -511..-1 round to no data, so the next header follows.
func tarNegCases() [][]byte {
	p := systemPickle()
	negPax := negSize(tarHdr(false, 0, "././@PaxHeader", 100, "0000644", 156, "x"), -1)
	negL := negSize(tarHdr(false, 0, "././@LongLink", 100, "0000644", 156, "L"), -300)
	return [][]byte{
		cat(negPax, gadgetMember("storages", p), ustarMember("tensors", tarTensors0), ustarMember("pickle", hPickle("}")), tarEnd),
		tarBase(negPax, gadgetMember("pickle", p)),
		tarBase(negL, gadgetMember("pickle", p)),
		// a regular member of size -1: the next header follows its header
		tarBase(negSize(ustarHdr("pickle", 0, "0", ""), -1), gadgetMember("x", p)),
		// pax size=-5 on a member
		tarBase(paxTyp("x", "size=-5"), ustarHdr("pickle", 0, "0", ""), gadgetMember("y", p)),
	}
}

// tarNegGoCases are negative sizes tarfile would loop on or fail with,
// not run through python: a size of -1024 moves the next header back
// (here onto itself: tarfile never ends), -512 on a pax header reads to
// the end of the file. The payload stays scanned.
func tarNegGoCases() [][]byte {
	p := systemPickle()
	return [][]byte{
		tarBase(gadgetMember("pickle", p), negSize(ustarHdr("loop", 0, "0", ""), -1024)),
		tarBase(gadgetMember("pickle", p), negSize(ustarHdr("back", 0, "0", ""), -(1<<40))),
		tarBase(gadgetMember("pickle", p), negSize(tarHdr(false, 0, "././@PaxHeader", 100, "0000644", 156, "x"), -512)),
	}
}

// TestTarNegativeSizes: the variants before gh-130577 list past a
// negative size (a -1 pax header at byte 0 is a tar start), the later
// ones stop; a loop backwards ends; a member of size -1 is extracted as
// 16383 bytes (copyfileobj's remainder).
func TestTarNegativeSizes(t *testing.T) {
	c := tarNegCases()[0]
	if !isTarStart(bytes.NewReader(c), int64(len(c))) {
		t.Fatal("a pax header of size -1 at byte 0 is a tar start to tarfile")
	}
	if c := cat(negSize(tarHdr(false, 0, "././@PaxHeader", 100, "0000644", 156, "x"), -512), ustarMember("pickle", hPickle("N")), tarEnd); isTarStart(bytes.NewReader(c), int64(len(c))) {
		t.Error("not a tar start: a size of -512 reads to the end")
	}
	old, _ := listTarVariant(bytes.NewReader(c), int64(len(c)), 100, tarVariant{strictPax: true})
	if len(old) != 3 || old[0].name != "storages" {
		t.Errorf("before gh-130577: %+v", old)
	}
	if nw, _ := listTarVariant(bytes.NewReader(c), int64(len(c)), 100, tarVariant{strictPax: true, negBlock: true}); len(nw) != 0 {
		t.Errorf("after gh-130577: %+v", nw)
	}
	for i, c := range tarNegGoCases() {
		_, ps := listTarVariant(bytes.NewReader(c), int64(len(c)), 1000, tarVariant{})
		if len(ps) == 0 {
			t.Errorf("case %d: no problem reported", i)
		}
	}
	m := tarMember{tarHeader: tarHeader{size: -1}, dataOff: 512}
	if n := tarDataLen(m, 1<<20); n != tarCopyBuf-1 {
		t.Errorf("size -1 extracts %d bytes", n)
	}
}

// tarLinkCases are links torch's legacy loader follows.
func tarLinkCases() [][]byte {
	p := systemPickle()
	return [][]byte{
		tarBase(gadgetMember("payload", p), tarLink("pickle", "2", "payload")),
		tarBase(gadgetMember("payload", p), tarLink("pickle", "1", "./payload")),
		tarBase(gadgetMember("d/payload", p), tarLink("d/x", "2", "payload"), tarLink("pickle", "2", "d/x")),
		tarBase(gadgetMember("payload", p), tarLink("pickle", "2", "d/../payload")),
		tarBase(gadgetMember("payload", p), tarLink("pickle", "1", "d/../payload")),
		// a chain: symlink to a hard link to a member
		tarBase(gadgetMember("payload", p), tarLink("h", "1", "payload"), tarLink("pickle", "2", "h")),
		// a symlink to a member after it; a hard link to one (not found)
		cat(ustarMember("storages", tarStorages0), ustarMember("tensors", tarTensors0), tarLink("pickle", "2", "later"), gadgetMember("later", p), tarEnd),
		cat(ustarMember("storages", tarStorages0), ustarMember("tensors", tarTensors0), tarLink("pickle", "1", "later"), gadgetMember("later", p), tarEnd),
		// two members of the target's name: the last one before the link
		tarBase(ustarMember("payload", hPickle("N")), gadgetMember("payload", p), tarLink("pickle", "1", "payload"), ustarMember("payload", hPickle("N"))),
		// storages and tensors as links
		cat(gadgetMember("payload", cat(hPickle("K\x00"), p)), tarLink("storages", "1", "payload"), tarLink("tensors", "2", "storages"), ustarMember("pickle", hPickle("N")), tarEnd),
		// a loop, and a link out of the archive
		tarBase(gadgetMember("payload", p), tarLink("a", "2", "pickle"), tarLink("pickle", "2", "a")),
		tarBase(gadgetMember("payload", p), tarLink("pickle", "2", "../payload")),
		// a long link naming the target
		tarBase(gadgetMember("payload", p), gnuLong("K", "./payload"), tarLink("pickle", "1", "nothing")),
	}
}

// pyTarVariant picks the variant of the local python3's tarfile.
const pyTarVariantScript = `
import inspect, tarfile
src = inspect.getsource(tarfile)
print(("strict" if "_header_length_prefix_re" in src else "lenient") + " " + ("nodircheck" if "dircheck" in src else "dircheck") + (" negblock" if "invalid offset" in src else ""))
`

func localTarVariant(t *testing.T, py string) tarVariant {
	out, err := exec.Command(py, "-c", pyTarVariantScript).Output()
	if err != nil {
		t.Fatal(err)
	}
	s := string(out)
	return tarVariant{strictPax: strings.Contains(s, "strict"), noFollowDircheck: strings.Contains(s, "nodircheck"), negBlock: strings.Contains(s, "negblock")}
}

const tarMembersScript = `
import io, json, sys, tarfile
out = []
for h in json.load(sys.stdin):
    b = bytes.fromhex(h)
    ms, reads = [], {}
    try:
        t = tarfile.open(fileobj=io.BytesIO(b), mode="r:")
        for m in t.getmembers():
            ms.append([m.name, m.linkname, m.type[0] if m.type else 0, m.offset, m.offset_data, m.size])
        for n in ("storages", "tensors", "pickle"):
            try:
                f = t.extractfile(n)
                reads[n] = f.read().hex() if f is not None else "none"
            except RecursionError:
                reads[n] = "recursion"
            except Exception as e:
                reads[n] = "error: %r" % e
    except Exception as e:
        ms.append(["error: %r" % e, "", 0, 0, 0, 0])
    out.append([ms, reads])
print(json.dumps(out))
`

type pyTarListing struct {
	members [][6]any
	reads   map[string]string
}

func runTarMembersScript(t *testing.T, py string, cases [][]byte) []pyTarListing {
	out := pythonOnCases(t, py, tarMembersScript, cases)
	var raw [][2]json.RawMessage
	if err := json.Unmarshal(out, &raw); err != nil || len(raw) != len(cases) {
		t.Fatalf("python3: %v", err)
	}
	res := make([]pyTarListing, len(raw))
	for i, r := range raw {
		if err := json.Unmarshal(r[0], &res[i].members); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(r[1], &res[i].reads); err != nil {
			t.Fatal(err)
		}
	}
	return res
}

// TestTarListMatchesPython lists each case in the variant of the local
// python3 and requires exactly tarfile's member list (name, link name,
// type, header and data offsets, size); the union listTar returns must
// hold every one of them.
func TestTarListMatchesPython(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 not installed")
	}
	v := localTarVariant(t, py)
	cases := slices.Concat(tarListCases(), tarLinkCases(), tarSparseCases(), tarNegCases())
	want := runTarMembersScript(t, py, cases)
	n := 0
	for i, c := range cases {
		got, _ := listTarVariant(bytes.NewReader(c), int64(len(c)), 100, v)
		union, _ := listTar(bytes.NewReader(c), int64(len(c)), 100)
		var g, w []string
		for _, m := range got {
			g = append(g, fmt.Sprintf("%q->%q %d @%d/%d +%d", m.name, m.linkname, m.typ, m.header, m.dataOff, m.size))
		}
		for _, m := range want[i].members {
			w = append(w, fmt.Sprintf("%q->%q %d @%d/%d +%d", m[0], m[1], int(m[2].(float64)), int64(m[3].(float64)), int64(m[4].(float64)), int64(m[5].(float64))))
			if !slices.ContainsFunc(union, func(u tarMember) bool {
				return u.name == m[0] && u.linkname == m[1] && u.dataOff == int64(m[4].(float64)) && u.size == int64(m[5].(float64))
			}) {
				t.Errorf("case %d: the union misses %v", i, m)
			}
		}
		if !slices.Equal(g, w) {
			t.Errorf("case %d (%+v):\n listTar %v\n tarfile %v", i, v, g, w)
		}
		n += len(w)
	}
	t.Logf("%d members of %d layouts agree with tarfile (%+v)", n, len(cases), v)
}

// TestTarLinksMatchPython reads storages, tensors and pickle through
// tarfile's extractfile and requires that content to be one scanTar
// resolves the member to.
func TestTarLinksMatchPython(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 not installed")
	}
	cases := slices.Concat(tarLinkCases(), tarListCases(), tarNegCases())
	want := runTarMembersScript(t, py, cases)
	n := 0
	for i, c := range cases {
		lists, _ := listTarVariants(bytes.NewReader(c), int64(len(c)), 100)
		for _, name := range []string{"storages", "tensors", "pickle"} {
			w := want[i].reads[name]
			if w == "none" || strings.HasPrefix(w, "error") || w == "recursion" {
				continue
			}
			wb, _ := hex.DecodeString(w)
			found := false
			for _, ms := range lists {
				l := newTarList(ms)
				for k, m := range ms {
					if m.name != name {
						continue
					}
					targets, _, _ := l.resolve(k, name)
					for _, j := range targets {
						d := c[ms[j].dataOff:min(int64(len(c)), ms[j].dataOff+max(ms[j].size, 0))]
						found = found || bytes.Equal(d, wb)
					}
				}
			}
			if !found {
				t.Errorf("case %d: tarfile reads %s as %x; not among the resolved members", i, name, wb)
			}
			n++
		}
	}
	t.Logf("%d member reads agree with tarfile", n)
}

// TestPyNormpath compares pyNormpath and pyDirname with posixpath.
func TestPyNormpath(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 not installed")
	}
	in := []string{"", ".", "..", "/", "//", "///", "//a", "///a", "a//b", "a/./b", "a/../b", "../a", "/../a", "a/b/../../..", "./payload",
		"d/../payload", "payload/", "a/b/", "/a/b/../c", "..//..", "x/..", "a/./../../b", "//a/../..", "pickle", "d/x", "a/"}
	b, _ := json.Marshal(in)
	cmd := exec.Command(py, "-c", `import json, sys, posixpath
print(json.dumps([[posixpath.normpath(s), posixpath.dirname(s)] for s in json.load(sys.stdin)]))`)
	cmd.Stdin = bytes.NewReader(b)
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	var want [][2]string
	if err := json.Unmarshal(out, &want); err != nil {
		t.Fatal(err)
	}
	for i, s := range in {
		if g := pyNormpath(s); g != want[i][0] {
			t.Errorf("normpath(%q) = %q, python %q", s, g, want[i][0])
		}
		if g := pyDirname(s); g != want[i][1] {
			t.Errorf("dirname(%q) = %q, python %q", s, g, want[i][1])
		}
	}
}

// tarTensorsOnePickle is the red-team t1 layout: torch reads ONE pickle
// per tensor record, (key, storage id, tensor type), then int32 ndim, 4
// ignored bytes, sizes, strides and the storage offset. The ignored bytes
// and the storage offset are a STOP and a BINBYTES that swallows the next
// record for a reader that expects two pickles per record; the next
// record's argument pickle is posix.system.
func tarTensorsOnePickle() (tensors []byte, at int) {
	p := systemPickle()
	rec := cat(hPickle("(", hStr("k0"), hStr("s0"), "Nt"), le32(0), ".B", []byte{byte(6 + len(p)), 0}, make([]byte, 8))
	tensors = cat(hPickle("K\x02"), rec, p)
	return tensors, bytes.Index(tensors, []byte("cposix"))
}

var tarStorages1 = cat(hPickle("K\x01"), hPickle("(", hStr("s0"), hStr("cpu"), "ctorch\nFloatStorage\nt"),
	binary.LittleEndian.AppendUint64(nil, 1), f32s(1), hPickle("]"))

func TestTarTensorsOnePicklePerRecord(t *testing.T) {
	tn, at := tarTensorsOnePickle()
	f := cat(ustarMember("storages", tarStorages1), ustarMember("tensors", tn), ustarMember("pickle", hPickle("}")), tarEnd)
	rep, err := Scan(bytes.NewReader(f), int64(len(f)), "t1")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(rep.NotAllowed(), "posix.system") {
		t.Fatalf("verdict %s, globals %v, problems %q", rep.Verdict(), rep.NotAllowed(), rep.Problems)
	}
	ok := false
	for _, g := range rep.Globals {
		ok = ok || (g.String() == "posix.system" && g.Entry == "tar member tensors" && g.Offset == int64(at))
	}
	if !ok {
		t.Errorf("posix.system not found at tar member tensors offset %d: %+v", at, rep.Globals)
	}
}

// TestTarBenignRecords checks that a well-formed pre-0.4 checkpoint (one
// storage, two tensors of rank 1 and 2, as torch 0.3's _save wrote them)
// is read record by record without a problem in its members.
func TestTarBenignRecords(t *testing.T) {
	meta := func(sizes ...int64) []byte {
		b := binary.LittleEndian.AppendUint64(nil, uint64(len(sizes))) // torch 0.3 wrote ndim as 8 bytes
		for range 2 {
			for _, s := range sizes {
				b = binary.LittleEndian.AppendUint64(b, uint64(s))
			}
		}
		return binary.LittleEndian.AppendUint64(b, 0)
	}
	tn := cat(hPickle("K\x02"),
		hPickle("(", hStr("k0"), "K\x07", hStr("FloatTensor"), "t"), meta(4),
		hPickle("(", hStr("k1"), "K\x07", hStr("FloatTensor"), "t"), meta(2, 2))
	st := cat(hPickle("K\x01"), hPickle("(K\x07", hStr("cpu"), "ctorch\nFloatStorage\nt"), binary.LittleEndian.AppendUint64(nil, 4), f32s(4), hPickle("]"))
	f := cat(ustarMember("sys_info", hPickle("}")), ustarMember("pickle", hPickle("}")), ustarMember("tensors", tn), ustarMember("storages", st), tarEnd)
	rep, err := Scan(bytes.NewReader(f), int64(len(f)), "benign")
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.NotAllowed()) > 0 {
		t.Errorf("globals %v", rep.NotAllowed())
	}
	for _, p := range rep.Problems {
		if strings.Contains(p, "tar member") || strings.HasPrefix(p, "tar:") {
			t.Errorf("problem %q", p)
		}
	}
}

// TestTarUnreadMemberWalked: a payload in a member torch never reads by
// name is still named (walked), even behind the header gadget.
func TestTarUnreadMemberWalked(t *testing.T) {
	f := tarBase(gadgetMember("elsewhere", systemPickle()))
	rep, err := Scan(bytes.NewReader(f), int64(len(f)), "f")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(rep.NotAllowed(), "posix.system") {
		t.Fatalf("verdict %s, globals %v", rep.Verdict(), rep.NotAllowed())
	}
}

// TestTarLinkCasesDangerous: every link case names posix.system.
func TestTarLinkCasesDangerous(t *testing.T) {
	for i, f := range slices.Concat(tarLinkCases(), tarListCases(), tarNegCases(), tarNegGoCases()) {
		rep, err := Scan(bytes.NewReader(f), int64(len(f)), "f")
		if err != nil {
			t.Fatal(err)
		}
		if rep.Verdict() != VerdictDangerous || !slices.Contains(rep.NotAllowed(), "posix.system") {
			t.Errorf("case %d: verdict %s, globals %v, problems %q", i, rep.Verdict(), rep.NotAllowed(), rep.Problems)
		}
	}
}

// FuzzTarList scans mutated extension-header and link layouts: no panic,
// no hang, and every member torch reads resolves within bounds.
func FuzzTarList(f *testing.F) {
	sp, _ := tarSparseOverwrite()
	self, _ := tarSymlinkSelfFD()
	for _, c := range slices.Concat(tarListCases(), tarLinkCases(), tarExtractCases(), tarNegCases(), tarNegGoCases(), tarPaxSparseCases(), [][]byte{sp, self}) {
		f.Add(c)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		defer watchdog(b)()
		lim := fuzzLimits()
		if _, err := Scan(bytes.NewReader(b), int64(len(b)), "f", WithLimits(*lim)); err != nil {
			t.Fatal(err)
		}
		lists, _ := listTarVariants(bytes.NewReader(b), int64(len(b)), lim.MaxZipEntries)
		for _, ms := range lists {
			l := newTarList(ms)
			for i := range ms {
				out, _, _ := l.resolve(i, "tensors")
				for _, j := range out {
					if j < 0 || j >= len(ms) || !tarRegular(ms[j].typ) {
						t.Fatalf("resolved %d to %d", i, j)
					}
				}
			}
		}
	})
}

// TestTarLinkOutOfArchive: a link of a member torch extracts (storages,
// tensors) out of the archive makes torch unpickle a host file: it is the
// not-allowed <tar-link> finding, and the file is also scanned from byte 0
// as that member. extractfile ("pickle") does not follow such a link
// (KeyError): invalid, not dangerous, as a benign tar is (tar checkpoints
// are not supported).
func TestTarLinkOutOfArchive(t *testing.T) {
	pk := ustarMember("pickle", hPickle("}"))
	cases := []struct {
		f    []byte
		want string
		name string
	}{
		{tarBase(pk), VerdictInvalid, ""},
		{cat(tarLink("storages", "2", "/etc/passwd"), ustarMember("tensors", tarTensors0), pk, tarEnd), VerdictDangerous, "<tar-link>./etc/passwd"},
		{cat(ustarMember("storages", tarStorages0), tarLink("tensors", "1", "../../x"), pk, tarEnd), VerdictDangerous, "<tar-link>.../../x"},
		{cat(tarLink("s", "2", "/proc/self/fd/3"), ustarMember("storages", tarStorages0), tarLink("tensors", "2", "s"), pk, tarEnd), VerdictDangerous, "<tar-link>./proc/self/fd/3"},
		{tarBase(tarLink("pickle", "2", "/etc/passwd")), VerdictInvalid, ""},
	}
	for i, c := range cases {
		rep, err := Scan(bytes.NewReader(c.f), int64(len(c.f)), "f")
		if err != nil {
			t.Fatal(err)
		}
		if rep.Verdict() != c.want || (c.name != "" && !slices.Contains(rep.NotAllowed(), c.name)) {
			t.Errorf("case %d: verdict %s, globals %v, problems %q", i, rep.Verdict(), rep.NotAllowed(), rep.Problems)
		}
	}
	f, _ := tarSymlinkSelfFD()
	rep, err := Scan(bytes.NewReader(f), int64(len(f)), "f")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(rep.NotAllowed(), "posix.system") {
		t.Errorf("self fd: globals %v, problems %q", rep.NotAllowed(), rep.Problems)
	}
}
