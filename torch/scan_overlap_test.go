package torch

import (
	"encoding/binary"
	"hash/crc32"
	"strings"
	"testing"
)

// zipLocal is a local file header for data stored with method (0 STORED,
// 8 DEFLATE) that inflates to usize bytes with the given CRC.
func zipLocal(name string, method uint16, data []byte, usize, crc uint32) []byte {
	h := binary.LittleEndian.AppendUint32(nil, sigLocal)
	h = binary.LittleEndian.AppendUint16(h, 20)
	h = binary.LittleEndian.AppendUint16(h, 0)
	h = binary.LittleEndian.AppendUint16(h, method)
	h = binary.LittleEndian.AppendUint32(h, 0) // time, date
	h = zipSizes(h, name, data, usize, crc)
	h = append(h, 0, 0) // no extra field
	return append(h, name...)
}

// zipCentral is the central directory entry for it, at offset off.
func zipCentral(name string, method uint16, data []byte, usize, crc uint32, off int) []byte {
	c := binary.LittleEndian.AppendUint32(nil, sigCentral)
	c = binary.LittleEndian.AppendUint16(c, 20)
	c = binary.LittleEndian.AppendUint16(c, 20)
	c = binary.LittleEndian.AppendUint16(c, 0)
	c = binary.LittleEndian.AppendUint16(c, method)
	c = binary.LittleEndian.AppendUint32(c, 0)
	c = zipSizes(c, name, data, usize, crc)
	c = append(c, make([]byte, 12)...) // extra and comment lengths, disk, attributes
	c = binary.LittleEndian.AppendUint32(c, uint32(off))
	return append(c, name...)
}

// zipSizes appends the CRC, sizes and name length both headers share.
func zipSizes(h []byte, name string, data []byte, usize, crc uint32) []byte {
	h = binary.LittleEndian.AppendUint32(h, crc)
	h = binary.LittleEndian.AppendUint32(h, uint32(len(data)))
	h = binary.LittleEndian.AppendUint32(h, usize)
	return binary.LittleEndian.AppendUint16(h, uint16(len(name)))
}

func storedLocal(name string, data []byte) []byte {
	return zipLocal(name, 0, data, uint32(len(data)), crc32.ChecksumIEEE(data))
}

func storedCentral(name string, data []byte, off int) []byte {
	return zipCentral(name, 0, data, uint32(len(data)), crc32.ChecksumIEEE(data), off)
}

// Red-team round 4 (B2): STORED members nested in each other (a.pkl's
// data is one BINBYTES holding c.pkl, whose data holds data.pkl, the
// payload). Decoding a.pkl and c.pkl costs more than the file holds, so the
// scan walked the whole file once instead, and a.pkl's BINBYTES hid
// data.pkl from that walk: scan said invalid while Open refused
// posix.system. data.pkl is now always decoded, and a refusal by the
// strict decoder is always in the report.
func TestScanNestedStoredMembers(t *testing.T) {
	binbytes := func(inner []byte) []byte {
		b := binary.LittleEndian.AppendUint32([]byte("\x80\x02B"), uint32(len(inner)))
		return append(append(b, inner...), "0}."...)
	}
	payload := []byte("\x80\x02cposix\nsystem\nX\x02\x00\x00\x00id\x85R0}.")
	const a, c, d = "archive/a.pkl", "archive/c.pkl", "archive/data.pkl"
	inner := append(append(storedLocal(d, payload), payload...), make([]byte, 4096)...)
	cData := binbytes(inner)
	mid := append(storedLocal(c, cData), cData...)
	aData := binbytes(mid)
	f := append(storedLocal(a, aData), aData...)
	offC := len(storedLocal(a, aData)) + 7
	offD := offC + len(storedLocal(c, cData)) + 7
	type ent struct {
		name string
		data []byte
		off  int
	}
	ents := []ent{{a, aData, 0}, {c, cData, offC}, {d, payload, offD}}
	for _, m := range []struct{ name, data string }{{"archive/version", "3\n"}, {"archive/byteorder", "little"}} {
		ents = append(ents, ent{m.name, []byte(m.data), len(f)})
		f = append(append(f, storedLocal(m.name, []byte(m.data))...), m.data...)
	}
	var cd []byte
	for _, e := range ents {
		cd = append(cd, storedCentral(e.name, e.data, e.off)...)
	}
	end := binary.LittleEndian.AppendUint32(nil, sigEnd)
	end = append(end, 0, 0, 0, 0, byte(len(ents)), 0, byte(len(ents)), 0)
	end = binary.LittleEndian.AppendUint32(end, uint32(len(cd)))
	end = binary.LittleEndian.AppendUint32(end, uint32(len(f)))
	f = append(append(append(f, cd...), end...), 0, 0)

	rep := scanBytes(t, f)
	if v := rep.Verdict(); v != VerdictDangerous {
		t.Fatalf("verdict %s, want dangerous: %q", v, rep.Problems)
	}
	named := false
	for _, g := range rep.Globals {
		// found by the scan itself, not only added from Open's refusal
		named = named || (g.String() == "posix.system" && !g.Allowed && !strings.HasPrefix(g.Reason, "refused by the strict decoder"))
	}
	if !named {
		t.Errorf("posix.system not found by the scan: %+v", rep.Globals)
	}
	if _, err := openBytes(t, f); !isGlobalRefusal(err) {
		t.Errorf("Open: %v, want a refusal", err)
	}
}

// reportRefusal adds what Open refused when the scan did not find it.
func TestReportRefusal(t *testing.T) {
	rep := &ScanReport{}
	reportRefusal(rep, &Error{Kind: ErrNotAllowed, Entry: "archive/data.pkl", Offset: 7, Global: "os.path.join", Msg: "not in the allowlist"})
	if len(rep.Globals) != 1 || rep.Globals[0].Module != "os.path" || rep.Globals[0].Name != "join" || rep.Verdict() != VerdictDangerous {
		t.Fatalf("%+v, verdict %s", rep.Globals, rep.Verdict())
	}
	reportRefusal(rep, &Error{Kind: ErrNotAllowed, Global: "os.path.join"})
	if len(rep.Globals) != 1 {
		t.Fatalf("added twice: %+v", rep.Globals)
	}
}

// Red-team round 9: torch finds "archive/BYTEORDER" as the byteorder
// record (miniz compares names without case), so a big-endian checkpoint
// must not be read as little-endian because the name's case differs.
func TestByteorderFoundWithoutCase(t *testing.T) {
	benign := hPickle(hDict(hStr("w"), hTensor(hPid("FloatStorage", "0", 2), 0, []int64{2}, []int64{1})))
	b := hZip([]hEntry{{name: "archive/data.pkl", data: benign}, {name: "archive/data/0", data: f32s(2)},
		{name: "archive/version", data: []byte("3\n")}, {name: "archive/BYTEORDER", data: []byte("big")}}, nil)
	_, err := openBytes(t, b)
	wantErr(t, "BYTEORDER big", err, ErrUnsupported, "big-endian")
}

// Red-team round 11: a BUILD state that puts __setstate__ (or a method
// name) into an OrderedDict's __dict__ makes CPython call it later; such
// states, and a second BUILD, are refused by Open and dangerous to Scan.
func TestOrderedDictBuildShadowing(t *testing.T) {
	od := "ccollections\nOrderedDict\n)R"
	for name, body := range map[string][]any{
		"__setstate__": {od, "}", hStr("__setstate__"), "ccollections\nOrderedDict\n", "s", "b"},
		"keys":         {od, "}", hStr("keys"), hInt(1), "s", "b"},
		"second BUILD": {od, "}", hStr("_metadata"), "}", "s", "b", "}", hStr("_metadata"), "}", "s", "b"},
	} {
		b := hZip([]hEntry{{name: "archive/data.pkl", data: hPickle(body...)}, {name: "archive/version", data: []byte("3\n")}}, nil)
		_, err := openBytes(t, b)
		wantErr(t, name, err, ErrNotAllowed, "BUILD")
		if v := scanBytes(t, b).Verdict(); v == VerdictClean {
			t.Errorf("%s: scan says clean", name)
		}
	}
	// torch's own _metadata state is fine
	ok := hZip([]hEntry{{name: "archive/data.pkl", data: hPickle(od, "}", hStr("_metadata"), "}", "s", "b")}, {name: "archive/version", data: []byte("3\n")}}, nil)
	if _, err := openBytes(t, ok); err != nil {
		t.Errorf("a _metadata state: %v", err)
	}
}
