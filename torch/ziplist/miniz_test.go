package ziplist

import (
	"bytes"
	"compress/flate"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The differential test below runs PyTorch's own zip reader,
// torch._C.PyTorchFileReader (miniz as torch.load uses it), on the same
// bytes: /usr/bin/python3 with torch installed, or python3 on PATH. It
// skips, saying why, where neither imports torch.

var (
	ver  = zent{name: "archive/version", data: []byte("3\n")}
	pkl  = []byte("\x80\x02}q\x00.the-pickle-record")
	pkl2 = []byte("\x80\x02}q\x00.another-pickle-record-of-other-length")
	st   = []byte("0123456789abcdef")
)

func data(name string, b []byte) zent { return zent{name: name, data: b} }

// minizCases are archives on which zip readers disagree, each with a
// version record so that torch's reader opens it.
func minizCases() map[string][]byte {
	long := "archive/" + strings.Repeat("n", 600) + ".pkl"
	cases := map[string][]byte{
		"plain":            buildZip([]zent{data("archive/data.pkl", pkl), data("archive/data/0", st), ver}, zopts{}),
		"prefix stem":      buildZip([]zent{data("model/data.pkl", pkl), data("model/data/0", st), {name: "model/version", data: []byte("3\n")}}, zopts{}),
		"case":             buildZip([]zent{data("archive/DATA.pkl", pkl), ver}, zopts{}),
		"duplicate":        buildZip([]zent{data("archive/data.pkl", pkl), data("archive/data.pkl", pkl2), ver}, zopts{}),
		"case duplicate":   buildZip([]zent{data("archive/data.pkl", pkl), data("archive/Data.PKL", pkl2), ver}, zopts{}),
		"directory attr":   buildZip([]zent{{name: "archive/data.pkl", data: pkl, ext: 0x10}, ver}, zopts{}),
		"directory slash":  buildZip([]zent{data("archive/data.pkl/", pkl), data("archive/data.pkl", pkl2), ver}, zopts{}),
		"nul name":         buildZip([]zent{data("archive/constants.pkl\x00x", pkl), data("archive/data.pkl", pkl2), ver}, zopts{}),
		"long name":        buildZip([]zent{data(long, pkl), data("archive/data.pkl", pkl2), ver}, zopts{}),
		"local name":       buildZip([]zent{{name: "archive/data.pkl", data: pkl, local: str("archive/evil.pkl")}, ver}, zopts{}),
		"encrypted":        buildZip([]zent{{name: "archive/data.pkl", data: pkl, flags: 1}, ver}, zopts{}),
		"deflated":         buildZip([]zent{{name: "archive/data.pkl", data: deflate(pkl), raw: pkl, method: 8}, ver}, zopts{}),
		"usize longer":     buildZip([]zent{{name: "archive/data.pkl", data: pkl, usize: u32(uint32(len(pkl) + 5))}, data("archive/x", st), ver}, zopts{}),
		"usize longer dos": buildZip([]zent{{name: "archive/data.pkl", data: pkl, usize: u32(uint32(len(pkl) + 5)), dosTime: 0x6000}, data("archive/x", st), ver}, zopts{}),
		"usize shorter":    buildZip([]zent{{name: "archive/data.pkl", data: pkl, usize: u32(4), dosTime: 0x6000}, ver}, zopts{}),
		"csize longer":     buildZip([]zent{{name: "archive/data.pkl", data: pkl, csize: u32(uint32(len(pkl) + 20)), dosTime: 0x6000}, data("archive/x", st), ver}, zopts{}),
		"shared header":    buildZip([]zent{data("archive/a.pkl", pkl), {name: "archive/data.pkl", sameAs: 1, data: pkl}, ver}, zopts{}),
		"shared usize":     buildZip([]zent{{name: "archive/a.pkl", data: pkl, usize: u32(2), dosTime: 0x6000}, {name: "archive/data.pkl", sameAs: 1, data: pkl, dosTime: 0x6000}, ver}, zopts{}),
		"gap":              buildZip([]zent{data("archive/data.pkl", pkl), {name: "archive/version", data: []byte("3\n"), gapBefore: []byte("\x80\x02hidden.")}}, zopts{}),
		"before dir":       buildZip([]zent{data("archive/data.pkl", pkl), ver}, zopts{beforeDir: []byte("spare bytes")}),
		"comment":          buildZip([]zent{data("archive/data.pkl", pkl), ver}, zopts{comment: []byte("a comment")}),
		"comment short":    buildZip([]zent{data("archive/data.pkl", pkl), ver}, zopts{comment: []byte("a comment"), trailing: []byte("xyz")}),
		"trailing":         buildZip([]zent{data("archive/data.pkl", pkl), ver}, zopts{trailing: []byte("trailing bytes")}),
		"trailing 66000":   buildZip([]zent{data("archive/data.pkl", pkl), ver}, zopts{trailing: make([]byte, 66000)}),
		"zip64":            buildZip([]zent{data("archive/data.pkl", pkl), ver}, zopts{zip64: true}),
		"count":            buildZip([]zent{data("archive/data.pkl", pkl), ver}, zopts{countDiff: 1}),
		"two zip64 extras": buildZip([]zent{{name: "archive/data.pkl", data: pkl, extra: append(zip64Field(1), zip64Field(2)...)}, ver}, zopts{}),
		"dot data version": buildZip([]zent{data("archive/data.pkl", pkl), {name: "archive/.data/version", data: []byte("3\n")}}, zopts{}),
	}
	// a fake end record in the real one's comment
	inner := buildZip([]zent{data("archive/data.pkl", pkl2), ver}, zopts{})
	cases["fake end in comment"] = buildZip([]zent{data("archive/data.pkl", pkl), ver}, zopts{comment: inner[len(inner)-lenEnd:]})
	// the data.pkl local header inside the end record's comment
	base := buildZip([]zent{ver}, zopts{})
	rec := buildZip([]zent{data("archive/data.pkl", pkl)}, zopts{})
	recLocal := rec[:lenLocal+len("archive/data.pkl")+len(pkl)]
	cases["record in comment"] = inComment(base, recLocal)
	return cases
}

// zip64Field is a ZIP64 extra field holding one 8-byte value (for a
// placeholder that is not there: a field miniz and others parse
// differently).
func zip64Field(v uint64) []byte {
	return le64(le16(le16(nil, 1), 8), v)
}

// inComment appends a central entry for archive/data.pkl (whose local
// header and data are rec) to base's directory, and places rec in the end
// record's comment.
func inComment(base, rec []byte) []byte {
	z, err := NewReader(bytes.NewReader(base), int64(len(base)), 100)
	if err != nil {
		panic(err)
	}
	name := "archive/data.pkl"
	dirLen := int(z.DirEnd-z.DirOffset) + lenCentral + len(name)
	recAt := int(z.DirOffset) + dirLen + lenEnd
	var c []byte
	c = le32(c, sigCentral)
	c = le16(le16(c, 20), 20)
	c = le16(le16(c, 0), 0)
	c = le16(le16(c, 0), 0)
	c = append(c, rec[14:26]...) // CRC and sizes, from the local header
	c = le16(c, uint16(len(name)))
	c = le16(le16(le16(le16(c, 0), 0), 0), 0)
	c = le32(c, 0)
	c = le32(c, uint32(recAt))
	c = append(c, name...)
	f := append([]byte(nil), base[:z.DirEnd]...)
	f = append(f, c...)
	f = le32(f, sigEnd)
	f = le16(le16(f, 0), 0)
	f = le16(le16(f, uint16(len(z.Entries)+1)), uint16(len(z.Entries)+1))
	f = le32(f, uint32(dirLen))
	f = le32(f, uint32(z.DirOffset))
	f = le16(f, uint16(len(rec)))
	return append(f, rec...)
}

// minizScript opens each file with torch._C.PyTorchFileReader and prints,
// per file, the records it lists and, for each record and each extra name
// asked for, the SHA-256 of the bytes get_record returns (or "error: ...").
const minizScript = `
import hashlib, json, sys
import torch
out = []
for job in json.load(sys.stdin):
    res = {"open": None, "records": [], "reads": {}}
    try:
        r = torch._C.PyTorchFileReader(job["path"])
    except Exception as e:
        res["open"] = "error: %s" % str(e).split("\n")[0][:200]
        out.append(res)
        continue
    try:
        res["records"] = list(r.get_all_records())
    except Exception as e:
        res["open"] = "error listing: %s" % str(e).split("\n")[0][:200]
    for n in res["records"] + job["names"]:
        try:
            res["reads"][n] = hashlib.sha256(bytes(r.get_record(n))).hexdigest()
        except Exception as e:
            res["reads"][n] = "error: %s" % str(e).split("\n")[0][:120]
    out.append(res)
print(json.dumps(out))
`

type minizResult struct {
	Open    *string           `json:"open"`
	Records []string          `json:"records"`
	Reads   map[string]string `json:"reads"`
}

// torchPython returns an interpreter that imports torch, or skips.
func torchPython(t *testing.T) string {
	t.Helper()
	for _, py := range []string{"/usr/bin/python3", "python3"} {
		if p, err := exec.LookPath(py); err == nil && exec.Command(p, "-c", "import importlib.util, sys; sys.exit(importlib.util.find_spec('torch') is None)").Run() == nil {
			return p
		}
	}
	t.Skip("no python3 that imports torch (apt-get install python3-torch): the differential test against torch's miniz reader does not run")
	return ""
}

// entryBytes is what a reader of e gets: a STORED entry's Size bytes
// from its data offset, or a DEFLATE entry inflated.
func entryBytes(f []byte, e *Entry) ([]byte, bool) {
	if e.DataOffset < 0 || e.Size < 0 || e.DataOffset > int64(len(f)) {
		return nil, false
	}
	switch e.Method {
	case 0:
		if e.Size > int64(len(f))-e.DataOffset {
			return nil, false
		}
		return f[e.DataOffset : e.DataOffset+e.Size], true
	case 8:
		b, err := io.ReadAll(io.LimitReader(flate.NewReader(bytes.NewReader(f[e.DataOffset:])), e.Size))
		return b, err == nil
	}
	return nil, false
}

// TestMatchesMiniz lists crafted archives and torch's own zip fixtures
// with NewReader and with torch's reader. Where NewReader lists an archive
// without a problem, torch must list the same records with the same
// bytes; wherever NewReader lists it at all, every record torch reads
// must be the bytes of an entry of that name (what a scanner decodes), or
// that entry must carry a problem.
func TestMatchesMiniz(t *testing.T) {
	py := torchPython(t)
	dir := t.TempDir()
	files := map[string][]byte{}
	for name, b := range minizCases() {
		files["case "+name] = b
	}
	for _, glob := range []string{"../../testdata/torch/*", "../../testdata/crafted/*", "../../testdata/malicious/*"} {
		paths, _ := filepath.Glob(glob)
		for _, p := range paths {
			if b, err := os.ReadFile(p); err == nil && bytes.HasPrefix(b, []byte("PK\x03\x04")) && len(b) < 1<<20 {
				files[p] = b
			}
		}
	}
	type job struct {
		Path  string   `json:"path"`
		Names []string `json:"names"`
	}
	var names []string
	var jobs []job
	for name, b := range files {
		p := filepath.Join(dir, fmt.Sprintf("%d.pt", len(names)))
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		j := job{Path: p, Names: []string{}}
		if z, err := NewReader(bytes.NewReader(b), int64(len(b)), 1000); err == nil {
			for k, e := range z.Entries {
				if i := strings.IndexByte(e.Name, '/'); i > 0 && k < 8 {
					// the records themselves are read anyway; ask for a
					// few names in other cases (miniz finds them without case)
					j.Names = append(j.Names, strings.ToUpper(e.Name[i+1:]))
				}
			}
		}
		names = append(names, name)
		jobs = append(jobs, j)
	}
	in, _ := json.Marshal(jobs)
	cmd := exec.Command(py, "-c", minizScript)
	cmd.Stdin = bytes.NewReader(in)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	var res []minizResult
	if err := json.Unmarshal(out, &res); err != nil || len(res) != len(jobs) {
		t.Fatalf("python: %v", err)
	}
	var clean, listed, refused, reads int
	for i, name := range names {
		f, r := files[name], res[i]
		z, err := NewReader(bytes.NewReader(f), int64(len(f)), 1000)
		if err != nil {
			refused++
			if r.Open == nil {
				t.Logf("%s: refused (%v); torch reads %d records (a scanner falls back to every candidate)", name, err, len(r.Records))
			}
			continue
		}
		listed++
		prefix := ""
		if len(z.Entries) > 0 {
			if i := strings.IndexByte(z.Entries[0].Name, '/'); i > 0 {
				prefix = z.Entries[0].Name[:i+1]
			}
		}
		problem := func(e *Entry) bool {
			for _, p := range z.Problems {
				if p.Entry == e.Name {
					return true
				}
			}
			return false
		}
		if len(z.Problems) == 0 {
			clean++
			if r.Open != nil {
				// torch's own checks after miniz (a version record) are
				// not the lister's
				if !strings.Contains(*r.Open, "version") {
					t.Errorf("%s: listed without a problem, torch refuses it: %s", name, *r.Open)
				}
				continue
			}
			var ours []string
			for _, e := range z.Entries {
				// torch lists names through a 512-byte buffer
				ours = append(ours, strings.TrimPrefix(e.Name[:min(len(e.Name), 511)], prefix))
			}
			if fmt.Sprint(ours) != fmt.Sprint(r.Records) {
				t.Errorf("%s: records %q, torch %q", name, ours, r.Records)
			}
		}
		for rec, got := range r.Reads {
			if strings.HasPrefix(got, "error") {
				continue
			}
			reads++
			e := z.Lookup(prefix + rec)
			if e == nil {
				if len(z.Problems) == 0 {
					t.Errorf("%s: torch reads %q, which Lookup does not find", name, rec)
				}
				continue
			}
			if ours, ok := entryBytes(f, e); ok && sha(ours) == got {
				continue
			}
			// another entry of the name (a duplicate) may be the one torch read
			found := false
			for _, o := range z.Entries {
				ob, ok := entryBytes(f, o)
				found = found || (ok && FoldName(o.Name) == FoldName(prefix+rec) && sha(ob) == got)
			}
			if !found && !problem(e) {
				t.Errorf("%s: torch reads %q (sha256 %s); our entry %q holds other bytes and no problem says so", name, rec, got, e.Name)
			}
		}
	}
	if clean < 10 || reads < 50 {
		t.Fatalf("degenerate corpus: %d clean archives, %d records read", clean, reads)
	}
	t.Logf("%d archives: %d listed (%d without a problem), %d refused; %d records torch read are what we read", len(names), listed, clean, refused, reads)
}

func sha(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}
