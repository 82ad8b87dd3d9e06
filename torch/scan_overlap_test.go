package torch

import (
	"encoding/binary"
	"hash/crc32"
	"strings"
	"testing"
)

// storedLocal is a STORED local file header for name and data.
func storedLocal(name string, data []byte) []byte {
	h := binary.LittleEndian.AppendUint32(nil, sigLocal)
	h = binary.LittleEndian.AppendUint16(h, 20)
	h = append(h, 0, 0, 0, 0, 0, 0, 0, 0) // flags, method, time, date
	h = binary.LittleEndian.AppendUint32(h, crc32.ChecksumIEEE(data))
	h = binary.LittleEndian.AppendUint32(h, uint32(len(data)))
	h = binary.LittleEndian.AppendUint32(h, uint32(len(data)))
	h = binary.LittleEndian.AppendUint16(h, uint16(len(name)))
	h = binary.LittleEndian.AppendUint16(h, 0)
	return append(h, name...)
}

// storedCentral is the central directory entry for it, at offset off.
func storedCentral(name string, data []byte, off int) []byte {
	c := binary.LittleEndian.AppendUint32(nil, sigCentral)
	c = binary.LittleEndian.AppendUint16(c, 20)
	c = binary.LittleEndian.AppendUint16(c, 20)
	c = append(c, 0, 0, 0, 0, 0, 0, 0, 0)
	c = binary.LittleEndian.AppendUint32(c, crc32.ChecksumIEEE(data))
	c = binary.LittleEndian.AppendUint32(c, uint32(len(data)))
	c = binary.LittleEndian.AppendUint32(c, uint32(len(data)))
	c = binary.LittleEndian.AppendUint16(c, uint16(len(name)))
	c = append(c, make([]byte, 12)...)
	c = binary.LittleEndian.AppendUint32(c, uint32(off))
	return append(c, name...)
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
