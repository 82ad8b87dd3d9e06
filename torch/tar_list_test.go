package torch

import (
	"bytes"
	"encoding/binary"
	"github.com/gosafetensors/safetensors/torch/tarlist"
	"slices"
	"strings"
	"testing"
)

// ---- tar building blocks (ustar headers as Python's tarfile writes them) ----

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
		lists, _ := tarlist.ListAll(bytes.NewReader(b), int64(len(b)), lim.MaxZipEntries)
		for _, ms := range lists {
			l := tarlist.NewIndex(ms)
			for i := range ms {
				out, _, _ := l.Resolve(i, "storages")
				for _, j := range out {
					if j < 0 || j >= len(ms) || !ms[j].IsRegular() {
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
