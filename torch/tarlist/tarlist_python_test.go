package tarlist

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/gosafetensors/safetensors/torch/internal/tartest"
)

// The differential tests below run Python's own tarfile on the same bytes
// (python3 on PATH; each test skips, saying so, where it is absent).

// extractedBefore is what torch has extracted before it reads each member.
var extractedBefore = map[string][]string{"tensors": {"storages"}}

// python returns python3's path or skips the test.
func python(t *testing.T) string {
	t.Helper()
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 not installed: the differential test against Python's tarfile does not run")
	}
	return py
}

// TestTarNegativeSizes: the variants before gh-130577 list past a
// negative size (a -1 pax header at byte 0 is a tar start), the later
// ones stop; a loop backwards ends; a member of size -1 is extracted as
// 16383 bytes (copyfileobj's remainder).
func TestTarNegativeSizes(t *testing.T) {
	c := tartest.NegCases()[0]
	if !IsTar(bytes.NewReader(c), int64(len(c))) {
		t.Fatal("a pax header of size -1 at byte 0 is a tar start to tarfile")
	}
	if c := tartest.Cat(tartest.NegSize(tartest.Hdr(false, 0, "././@PaxHeader", 100, "0000644", 156, "x"), -512), tartest.UstarMember("pickle", tartest.Pickle("N")), tartest.End); IsTar(bytes.NewReader(c), int64(len(c))) {
		t.Error("not a tar start: a size of -512 reads to the end")
	}
	old, _ := List(bytes.NewReader(c), int64(len(c)), 100, Variant{StrictPax: true})
	if len(old) != 3 || old[0].Name != "storages" {
		t.Errorf("before gh-130577: %+v", old)
	}
	if nw, _ := List(bytes.NewReader(c), int64(len(c)), 100, Variant{StrictPax: true, NegBlock: true}); len(nw) != 0 {
		t.Errorf("after gh-130577: %+v", nw)
	}
	for i, c := range tartest.NegGoCases() {
		_, ps := List(bytes.NewReader(c), int64(len(c)), 1000, Variant{})
		if len(ps) == 0 {
			t.Errorf("case %d: no problem reported", i)
		}
	}
	m := Member{Header: Header{Size: -1}, DataOffset: 512}
	if n := DataLen(m, 1<<20); n != tarCopyBuf-1 {
		t.Errorf("size -1 extracts %d bytes", n)
	}
}

// pyTarVariant picks the variant of the local python3's tarfile.
const pyTarVariantScript = `
import inspect, tarfile
src = inspect.getsource(tarfile)
print(("strict" if "_header_length_prefix_re" in src else "lenient") + " " + ("nodircheck" if "dircheck" in src else "dircheck") + (" negblock" if "invalid offset" in src else ""))
`

func localTarVariant(t *testing.T, py string) Variant {
	out, err := exec.Command(py, "-c", pyTarVariantScript).Output()
	if err != nil {
		t.Fatal(err)
	}
	s := string(out)
	return Variant{StrictPax: strings.Contains(s, "strict"), NoFollowDircheck: strings.Contains(s, "nodircheck"), NegBlock: strings.Contains(s, "negblock")}
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
// type, header and data offsets, size); the union ListUnion returns must
// hold every one of them.
func TestTarListMatchesPython(t *testing.T) {
	py := python(t)
	v := localTarVariant(t, py)
	cases := slices.Concat(tartest.ListCases(), tartest.LinkCases(), tartest.SparseCases(), tartest.NegCases())
	want := runTarMembersScript(t, py, cases)
	n := 0
	for i, c := range cases {
		got, _ := List(bytes.NewReader(c), int64(len(c)), 100, v)
		union, _ := ListUnion(bytes.NewReader(c), int64(len(c)), 100)
		var g, w []string
		for _, m := range got {
			g = append(g, fmt.Sprintf("%q->%q %d @%d/%d +%d", m.Name, m.Linkname, m.Type, m.HeaderOffset, m.DataOffset, m.Size))
		}
		for _, m := range want[i].members {
			w = append(w, fmt.Sprintf("%q->%q %d @%d/%d +%d", m[0], m[1], int(m[2].(float64)), int64(m[3].(float64)), int64(m[4].(float64)), int64(m[5].(float64))))
			if !slices.ContainsFunc(union, func(u Member) bool {
				return u.Name == m[0] && u.Linkname == m[1] && u.DataOffset == int64(m[4].(float64)) && u.Size == int64(m[5].(float64))
			}) {
				t.Errorf("case %d: the union misses %v", i, m)
			}
		}
		if !slices.Equal(g, w) {
			t.Errorf("case %d (%+v):\n ListUnion %v\n tarfile %v", i, v, g, w)
		}
		n += len(w)
	}
	t.Logf("%d members of %d layouts agree with tarfile (%+v)", n, len(cases), v)
}

// TestTarLinksMatchPython reads storages, tensors and pickle through
// tarfile's extractfile and requires that content to be one scanTar
// resolves the member to.
func TestTarLinksMatchPython(t *testing.T) {
	py := python(t)
	cases := slices.Concat(tartest.LinkCases(), tartest.ListCases(), tartest.NegCases())
	want := runTarMembersScript(t, py, cases)
	n := 0
	for i, c := range cases {
		lists, _ := ListAll(bytes.NewReader(c), int64(len(c)), 100)
		for _, name := range []string{"storages", "tensors", "pickle"} {
			w := want[i].reads[name]
			if w == "none" || strings.HasPrefix(w, "error") || w == "recursion" {
				continue
			}
			wb, _ := hex.DecodeString(w)
			found := false
			for _, ms := range lists {
				l := NewIndex(ms)
				for k, m := range ms {
					if m.Name != name {
						continue
					}
					targets, _, _ := l.Resolve(k, extractedBefore[name]...)
					for _, j := range targets {
						d := c[ms[j].DataOffset:min(int64(len(c)), ms[j].DataOffset+max(ms[j].Size, 0))]
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
	py := python(t)
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

const tarListScript = `
import io, json, sys, tarfile
out = []
for h in json.load(sys.stdin):
    b = bytes.fromhex(h)
    ms = []
    try:
        t = tarfile.open(fileobj=io.BytesIO(b), mode="r:")
        for m in t.getmembers():
            d = t.extractfile(m).read().hex() if m.isreg() else ""
            ms.append([m.name, m.offset_data, m.size, d])
    except Exception as e:
        ms.append(["error: %r" % e, 0, 0, ""])
    out.append(ms)
print(json.dumps(out))
`

// TestTarSparseMatchesPython lists GNU sparse layouts with ListUnion and with
// Python's tarfile: every member tarfile lists must be listed with the
// same data offset, size and content (read through the sparse map).
func TestTarSparseMatchesPython(t *testing.T) {
	py := python(t)
	cases := tartest.SparseCases()
	out := pythonOnCases(t, py, tarListScript, cases)
	var want [][][4]any
	if err := json.Unmarshal(out, &want); err != nil || len(want) != len(cases) {
		t.Fatalf("python3: %v", err)
	}
	checked := 0
	for i, c := range cases {
		got, _ := ListUnion(bytes.NewReader(c), int64(len(c)), 100)
		for _, w := range want[i] {
			name := w[0].(string)
			off, size := int64(w[1].(float64)), int64(w[2].(float64))
			j := slices.IndexFunc(got, func(m Member) bool { return m.Name == name && m.DataOffset == off && m.Size == size })
			if j < 0 {
				t.Errorf("case %d: tarfile lists %q data at %d size %d; ListUnion: %+v", i, name, off, size, got)
				continue
			}
			m := got[j]
			var r io.ReaderAt = bytes.NewReader(c)
			base := m.DataOffset
			if m.HasSparse {
				v, ok := NewSparseView(r, m.DataOffset, m.Size, m.Sparse)
				if !ok {
					t.Errorf("case %d %q: sparse map rejected", i, name)
					continue
				}
				r, base = v, 0
			}
			n := m.Size
			if v, ok := r.(*SparseView); ok {
				n = v.size // the view ends one block after the last data
			}
			data := make([]byte, n)
			if _, err := r.ReadAt(data, base); err != nil && !(err == io.EOF && n == 0) {
				t.Errorf("case %d %q: %v", i, name, err)
			}
			wantData, _ := hex.DecodeString(w[3].(string))
			if int64(len(wantData)) < n || !bytes.Equal(data, wantData[:n]) || bytes.ContainsFunc(wantData[n:], func(r rune) bool { return r != 0 }) {
				t.Errorf("case %d %q: content %x, tarfile %x", i, name, data, wantData)
			}
			checked++
		}
	}
	if checked < 2*len(cases) {
		t.Fatalf("only %d members compared", checked)
	}
	t.Logf("%d members of %d sparse layouts agree with tarfile", checked, len(cases))
}

const tarExtractScript = `
import io, json, os, sys, tarfile, tempfile, warnings
warnings.simplefilter("ignore")
out = []
for h in json.load(sys.stdin):
    t = tarfile.open(fileobj=io.BytesIO(bytes.fromhex(h)), mode="r:")
    res = []
    for m in t.getmembers():
        if not m.issparse():
            continue
        with tempfile.TemporaryDirectory() as d:
            try:
                t.extract(m, path=d, set_attrs=False)
                res.append(open(os.path.join(d, m.name), "rb").read().hex())
            except Exception as e:
                res.append("error")
    out.append(res)
print(json.dumps(out))
`

// TestTarSparseExtractMatchesPython compares NewExtractView with the file
// Python's tar.extract writes for each old GNU sparse member (what torch
// reads as "storages" and "tensors").
func TestTarSparseExtractMatchesPython(t *testing.T) {
	py := python(t)
	cases := tartest.ExtractCases()
	hexes := make([]string, len(cases))
	for i, c := range cases {
		hexes[i] = hex.EncodeToString(c)
	}
	in, _ := json.Marshal(hexes)
	cmd := exec.Command(py, "-c", tarExtractScript)
	cmd.Stdin = bytes.NewReader(in)
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	var want [][]string
	if err := json.Unmarshal(out, &want); err != nil || len(want) != len(cases) {
		t.Fatalf("python3: %v %s", err, out)
	}
	for i, c := range cases {
		ms, _ := ListUnion(bytes.NewReader(c), int64(len(c)), 100)
		var got []Member
		for _, m := range ms {
			if m.HasSparse {
				got = append(got, m)
			}
		}
		if len(got) != len(want[i]) {
			t.Fatalf("case %d: %d sparse members, tarfile %d", i, len(got), len(want[i]))
		}
		for k, m := range got {
			v, short, ok := NewExtractView(bytes.NewReader(c), int64(len(c)), m.DataOffset, m.Size, m.Sparse)
			if want[i][k] == "error" {
				if ok && !short {
					t.Errorf("case %d: tar.extract fails, the view does not say so", i)
				}
				continue
			}
			if !ok || short {
				t.Errorf("case %d: view refused (ok %v short %v), tarfile extracts it", i, ok, short)
				continue
			}
			data := make([]byte, v.size)
			if _, err := v.ReadAt(data, 0); err != nil && v.size > 0 {
				t.Fatal(err)
			}
			w, _ := hex.DecodeString(want[i][k])
			if len(w) < len(data) || !bytes.Equal(data, w[:len(data)]) || bytes.ContainsFunc(w[len(data):], func(r rune) bool { return r != 0 }) {
				t.Errorf("case %d: extracted %q, tarfile %q", i, data, w)
			}
		}
	}
}

// pythonOnCases runs script with python py, the cases as a JSON list of hex
// strings on its standard input, and returns what it prints.
func pythonOnCases(t *testing.T, py, script string, cases [][]byte) []byte {
	t.Helper()
	hexes := make([]string, len(cases))
	for i, c := range cases {
		hexes[i] = hex.EncodeToString(c)
	}
	in, _ := json.Marshal(hexes)
	cmd := exec.Command(py, "-c", script)
	cmd.Stdin = bytes.NewReader(in)
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	return out
}

const tarfileScript = `
import io, json, sys, tarfile
out = []
for h in json.load(sys.stdin):
    b = bytes.fromhex(h)
    try:
        t = tarfile.open(fileobj=io.BytesIO(b), mode="r:")
        out.append("ok")
    except tarfile.TarError:
        out.append("tarerror")
    except Exception as e:
        out.append("other")
print(json.dumps(out))
`

// TestTarHeaderMatchesPython checks IsTar against Python's own
// tarfile.open(mode="r:") on the same bytes (followed by end-of-archive
// blocks). Skipped without python3.
func TestTarHeaderMatchesPython(t *testing.T) {
	py := python(t)
	cases := tartest.HeaderCases()
	hexes := make([]string, len(cases))
	files := make([][]byte, len(cases))
	for i, c := range cases {
		files[i] = append(append([]byte(nil), c...), make([]byte, 2*BlockSize)...)
		hexes[i] = hex.EncodeToString(files[i])
	}
	in, _ := json.Marshal(hexes)
	cmd := exec.Command(py, "-c", tarfileScript)
	cmd.Stdin = bytes.NewReader(in)
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	if err := json.Unmarshal(out, &want); err != nil || len(want) != len(cases) {
		t.Fatalf("python3: %v", err)
	}
	oks := 0
	for i, f := range files {
		got := IsTar(bytes.NewReader(f), int64(len(f)))
		if got {
			oks++
		}
		if got != (want[i] != "tarerror") {
			t.Errorf("case %d %q...: IsTar %v, tarfile %s", i, cases[i][min(100, len(cases[i])):min(160, len(cases[i]))], got, want[i])
		}
	}
	if oks == 0 || oks == len(files) {
		t.Fatalf("degenerate corpus: %d of %d accepted", oks, len(files))
	}
	t.Logf("%d tar headers agree with Python's tarfile (%d accepted)", len(files), oks)
}

func TestPyIntMatchesPython(t *testing.T) {
	cases := []string{"１０２４", "\u0661\u0662", "\u0967\u0966", "\u00a012\u2003", " 1_000 ", "12\u00a0",
		"1\u2003 2", "𝟏𝟎", "\U0001D7D8\U0001D7E2", "x12", "٣", "1e3", "-５", "+\u06f7", "\u1040\u1041",
		"\u30009\u3000", "\u200b1", "\x1c5\x1f", "\u0b66\u0b67", "0x10", "007", "1__0", "_1", "", " ", "\xff1"}
	py := python(t)
	in, _ := json.Marshal(cases)
	script := `import json, sys
out = []
for c in json.load(sys.stdin):
    try: out.append(int(c))
    except Exception: out.append(None)
print(json.dumps(out))`
	cmd := exec.Command(py, "-c", script)
	cmd.Stdin = bytes.NewReader(in)
	outb, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	var want []*int64
	if err := json.Unmarshal(outb, &want); err != nil {
		t.Fatal(err)
	}
	for i, c := range cases {
		got, ok := pyInt(c)
		switch {
		case want[i] == nil && ok:
			t.Errorf("pyInt(%q) = %d, Python raises", c, got)
		case want[i] != nil && (!ok || got != *want[i]):
			t.Errorf("pyInt(%q) = %d, %v; Python gives %d", c, got, ok, *want[i])
		}
	}
}
