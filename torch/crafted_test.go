package torch

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"hash/crc32"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// The crafted attack files of testdata/crafted are generated here (go test
// ./torch -run TestCrafted -update rewrites them and INDEX.json; the
// py_* files come from testdata/crafted/make_python.py, run by -update
// when python3 is installed). Without -update the test regenerates every
// Go-made file and requires it to equal the committed one, then checks
// every INDEX.json entry against Scan and NewReader.

var updateCrafted = flag.Bool("update", false, "rewrite testdata/crafted")

const craftedDir = testdata + "/crafted"

// craftedEntry is one line of testdata/crafted/INDEX.json.
type craftedEntry struct {
	Name        string   `json:"name"`
	Class       string   `json:"class"`  // the issue-6 class it attacks
	Attack      string   `json:"attack"` // what it does
	MadeBy      string   `json:"made_by"`
	ScanVerdict string   `json:"scan_verdict"`
	Globals     []string `json:"globals,omitempty"` // not-allowlisted globals scan must name
	Entry       string   `json:"entry,omitempty"`   // where the first of them is
	Offset      *int64   `json:"offset,omitempty"`  // its byte offset inside Entry
	Convert     string   `json:"convert"`           // "convert" or "refuse"
	ConvertErr  string   `json:"convert_error,omitempty"`

	data []byte
}

func off(n int) *int64 { v := int64(n); return &v }

// frame returns a protocol-4 FRAME opcode holding b.
func frame(b []byte) []byte {
	return cat(0x95, binary.LittleEndian.AppendUint64(nil, uint64(len(b))), b)
}

// crossBinary returns a pickle whose first FRAME ends inside a BINUNICODE
// payload, then clean (a protocol-2 body such as a state dict); and the
// offset of posix.system CPython reads from the frame end.
func crossBinary(clean []byte) ([]byte, int) {
	const n, r = 64, 6 // payload length, payload bytes inside the frame
	evil := systemCall
	p := cat(0x80, 4, frame(cat("X", le32(n), repeat("J", r))),
		repeat("A", n-r), "0B", le32(uint32(len(evil))), evil, "0", clean, ".")
	return p, bytes.Index(p, []byte("cposix"))
}

// crossText returns a pickle whose GET lines cross three FRAME ends: read
// straight on it is OrderedDict({"w": tensor}); CPython reads posix.system
// and ("true",). It also returns the offset of the STACK_GLOBAL.
func crossText(tensor []byte) ([]byte, int) {
	memo := cat("Vposix\np0\n0", "Vsystem\np1\n0", "(Vtrue\ntp2\n0",
		"Vcollections\np10\n0", "VOrderedDict\np11\n0", ")p12\n0")
	p := cat(0x80, 4, frame(cat(memo, "g1")), "0\n", frame([]byte("g1")), "1\n", 0x93,
		frame([]byte("g1")), "2\n", "R(", hStr("w"), tensor, "u.")
	return p, bytes.Index(p, []byte("1\n\x93")) + 2
}

// ---- building blocks ----

var legacyMagicPkl = cat(0x80, 2, 0x8a, 10, 0x6c, 0xfc, 0x9c, 0x46, 0xf9, 0x20, 0x6a, 0xa8, 0x50, 0x19, ".")
var legacyProtoPkl = cat(0x80, 2, "M\xe9\x03.")

// system is a protocol-2 body calling posix.system('true').
const systemCall = "cposix\nsystem\n(X\x04\x00\x00\x00truetR"

func systemPickle() []byte { return hPickle(systemCall) }

// benignObj is the state dict {"w": F32[4]} of a legacy checkpoint.
func benignLegacy() []byte {
	obj := hPickle(hDict(hStr("w"), hTensor(hLegacyPid("FloatStorage", "0", 4), 0, []int64{4}, []int64{1})))
	return hLegacy(obj, []string{"0"}, hLegacyStorage(4, f32s(4)))
}

func benignZipPickle(prefix ...any) []byte {
	return hPickle(cat(prefix...), hDict(hStr("w"), hTensor(hPid("FloatStorage", "0", 4), 0, []int64{4}, []int64{1})))
}

// tarM is one member of a crafted tar image.
type tarM struct {
	name      string
	data      []byte
	sizeField string // the size field as written; "" = %011o
	pax       bool   // named through a pax "path" record (the header says "not-<name>")
}

// tarImage writes the members torch's tar loader reads: by default a
// harmless "storages" (no storages, no views) and "tensors" (none), with
// override replacing the member of the same name (or appended). The first
// header is a GNU long-name header, so the first block's name field is
// free for the legacy stream's bytes; then V7 headers (no ustar magic).
func tarImage(override tarM) []byte {
	ms := []tarM{{name: "storages", data: cat(hPickle("K\x00"), hPickle("]"))}, {name: "tensors", data: hPickle("K\x00")}}
	replaced := false
	for i := range ms {
		if ms[i].name == override.name {
			ms[i], replaced = override, true
		}
	}
	if !replaced {
		ms = append(ms, override)
	}
	var t []byte
	for i, m := range ms {
		size := m.sizeField
		if size == "" {
			size = fmt.Sprintf("%011o", len(m.data))
		}
		name := m.name
		switch {
		case i == 0:
			t = append(t, tarHdr(false, 0, "././@LongLink", 100, "0000644", 124, fmt.Sprintf("%011o", len(m.name)+1), 156, "L")...)
			t = append(t, pad512([]byte(m.name+"\x00"))...)
		case m.pax:
			pax := "path=" + m.name + "\n"
			rec := fmt.Sprintf("%d %s", len(pax)+3, pax)
			t = append(t, tarHdr(false, 0, "pax", 100, "0000644", 124, fmt.Sprintf("%011o", len(rec)), 156, "x")...)
			t = append(t, pad512([]byte(rec))...)
			name = "not-" + m.name
		}
		t = append(t, tarHdr(false, 0, name, 100, "0000644", 124, size, 156, "0")...)
		t = append(t, pad512(append([]byte(nil), m.data...))...)
	}
	return append(t, make([]byte, 2*tarBlock)...)
}

// legacyTarPolyglot is a legacy checkpoint whose sys_info pickle (which
// torch ignores) is a bytes value holding the tar image, placed so that
// the file's first 512 bytes are the image's first header: Python's
// tarfile accepts the file, and torch reads it as a tar checkpoint.
func legacyTarPolyglot(img []byte, signed bool) []byte {
	prefix := cat(legacyMagicPkl, legacyProtoPkl, 0x80, 2, "B")
	head := len(prefix) + 4
	payload := img[head:]
	f := cat(prefix, le32(uint32(len(payload))), payload, ".")
	setTarChecksum(f[:tarBlock], signed)
	obj := hPickle(hDict(hStr("w"), hTensor(hLegacyPid("FloatStorage", "0", 4), 0, []int64{4}, []int64{1})))
	kl := hPickle("](", hStr("0"), "e")
	return cat(f, obj, kl, hLegacyStorage(4, f32s(4)))
}

// repeat returns n copies of s.
func repeat(s string, n int) string { return strings.Repeat(s, n) }

// craftedFiles lists every Go-made crafted file with what it must do.
func craftedFiles() []craftedEntry {
	var out []craftedEntry
	add := func(e craftedEntry) { e.MadeBy = "go: torch/crafted_test.go"; out = append(out, e) }
	sys := []string{"posix.system"}

	// ---- 1. container polyglots ----
	evil := systemPickle()
	img := tarImage(tarM{name: "pickle", data: evil})
	add(craftedEntry{Name: "tar_v7_longname_pickle_polyglot.pt", Class: "container-polyglot",
		Attack:      "a valid legacy checkpoint whose first 512 bytes are also a tar header (GNU long-name header, then V7 headers without ustar magic, valid checksums) of members storages, tensors, pickle: torch.load reads the tar and unpickles member 'pickle' = posix.system",
		ScanVerdict: "dangerous", Globals: sys, Entry: "tar member pickle", Offset: off(2), Convert: "refuse", ConvertErr: "not allowed",
		data: legacyTarPolyglot(img, false)})
	add(craftedEntry{Name: "tar_v7_polyglot_benign_member.pt", Class: "container-polyglot",
		Attack:      "the same polyglot with a harmless member: nothing dangerous, but torch and convert would read different files",
		ScanVerdict: "invalid", Convert: "refuse", ConvertErr: "corrupt", data: legacyTarPolyglot(tarImage(tarM{name: "pickle", data: hPickle("N")}), false)})
	add(craftedEntry{Name: "tar_signed_checksum_polyglot.pt", Class: "container-polyglot",
		Attack:      "the tar header checksum is the signed-char sum (tarfile accepts either; the header holds bytes >= 0x80)",
		ScanVerdict: "dangerous", Globals: sys, Entry: "tar member pickle", Offset: off(2), Convert: "refuse", ConvertErr: "not allowed",
		data: legacyTarPolyglot(img, true)})
	add(craftedEntry{Name: "tar_size_field_dialect.pt", Class: "container-polyglot",
		Attack:      "the member size is written ' 0o4_3 ' (int(s, 8) accepts blanks, the 0o prefix and underscores): a reader with strict octal misses the member",
		ScanVerdict: "dangerous", Globals: sys, Entry: "tar member pickle", Offset: off(2), Convert: "refuse", ConvertErr: "not allowed",
		data: legacyTarPolyglot(tarImage(tarM{name: "pickle", data: evil, sizeField: fmt.Sprintf(" 0o%s_%s ", fmt.Sprintf("%o", len(evil))[:1], fmt.Sprintf("%o", len(evil))[1:])}), false)})
	add(craftedEntry{Name: "tar_pax_path_polyglot.pt", Class: "container-polyglot",
		Attack:      "a pax extended header renames member 'not-pickle' to 'pickle'",
		ScanVerdict: "dangerous", Globals: sys, Entry: "tar member pickle", Offset: off(2), Convert: "refuse", ConvertErr: "not allowed",
		data: legacyTarPolyglot(tarImage(tarM{name: "pickle", data: evil, pax: true}), false)})
	{
		// storages member: count 1, then args (key, location, <evil storage type>)
		st := cat(hPickle("K\x01"), hPickle("(", hStr("0"), hStr("cpu"), "cos\nsystem\ntR"))
		add(craftedEntry{Name: "tar_storages_member_global.pt", Class: "container-polyglot",
			Attack:      "tar polyglot whose 'storages' member carries os.system in the storage-argument pickle",
			ScanVerdict: "dangerous", Globals: []string{"os.system"}, Entry: "tar member storages", Convert: "refuse", ConvertErr: "not allowed",
			data: legacyTarPolyglot(tarImage(tarM{name: "storages", data: st}), false)})
		tn := cat(hPickle("K\x01"), hPickle(hStr("k")), hPickle(systemCall))
		add(craftedEntry{Name: "tar_tensors_member_global.pt", Class: "container-polyglot",
			Attack:      "tar polyglot whose 'tensors' member carries posix.system in a tensor record's pickle (torch runs it before unpacking fails; the rest of the member is walked)",
			ScanVerdict: "dangerous", Globals: sys, Entry: "tar member tensors", Convert: "refuse", ConvertErr: "not allowed",
			data: legacyTarPolyglot(tarImage(tarM{name: "tensors", data: tn}), false)})
	}
	base := benignLegacy()
	add(craftedEntry{Name: "legacy_trailing_pickle.pt", Class: "container-polyglot",
		Attack:      "a valid legacy checkpoint followed by a pickle calling posix.system after the last storage",
		ScanVerdict: "dangerous", Globals: sys, Entry: "trailing bytes", Offset: off(len(base) + 2), Convert: "refuse", ConvertErr: "not allowed",
		data: cat(base, evil)})
	add(craftedEntry{Name: "legacy_trailing_junk.pt", Class: "container-polyglot",
		Attack:      "a valid legacy checkpoint followed by bytes nothing explains",
		ScanVerdict: "invalid", Convert: "refuse", ConvertErr: "corrupt", data: cat(base, "\x00\x01\x02junk that is not a pickle\xff")})
	{
		z := hCheckpoint(cat(0x80, 2, systemCall, "."), "0", f32s(4))
		add(craftedEntry{Name: "legacy_then_zip_polyglot.pt", Class: "container-polyglot",
			Attack:      "a valid legacy checkpoint with a torch zip appended: torch takes the legacy path, zip readers (and scanners) the zip, whose data.pkl calls posix.system",
			ScanVerdict: "dangerous", Globals: sys, Convert: "refuse", ConvertErr: "not allowed", data: cat(base, z)})
	}
	{
		good := benignZipPickle()
		z := hZip([]hEntry{{name: "archive/data.pkl", data: good}, {name: "archive/data/0", data: f32s(4)}, {name: "archive/version", data: []byte("3\n")}}, nil)
		// move the central directory back by inserting a pickle between the last member and it
		cdOff := int(binary.LittleEndian.Uint32(z[len(z)-6:]))
		gap := cat(0x80, 2, systemCall, ".")
		nz := cat(z[:cdOff], gap, z[cdOff:])
		fixCD(nz, cdOff+len(gap))
		add(craftedEntry{Name: "zip_gap_pickle.pt", Class: "container-polyglot",
			Attack:      "a pickle hidden between the last zip member and the central directory (no record covers it)",
			ScanVerdict: "dangerous", Globals: sys, Entry: fmt.Sprintf("zip gap at offset %d", cdOff), Offset: off(2), Convert: "refuse", ConvertErr: "not allowed", data: nz})
	}
	add(craftedEntry{Name: "bare_pickle_then_garbage.bin", Class: "container-polyglot",
		Attack:      "a harmless bare pickle, then junk, then a payload pickle after a PROTO",
		ScanVerdict: "dangerous", Globals: sys, Convert: "refuse", ConvertErr: "not allowed",
		data: cat(hPickle("N"), "\xfe\xfd junk", evil)})

	// ---- 2. caps that hide findings ----
	allowed10k := repeat("ccollections\nOrderedDict\n0", 10001)
	{
		p := benignZipPickle(allowed10k, systemCall, "0")
		add(craftedEntry{Name: "cap_10001_allowed_then_system.pt", Class: "caps",
			Attack:      "10,001 allowlisted GLOBALs fill the findings list, then posix.system",
			ScanVerdict: "dangerous", Globals: sys, Entry: "archive/data.pkl", Offset: off(bytes.Index(p, []byte("cposix"))), Convert: "refuse", ConvertErr: "not allowed",
			data: hCheckpoint(p, "0", f32s(4))})
		p = benignZipPickle(allowed10k, "ctorch._tensor\n_rebuild_from_type_v2\n(cposix\nsystem\nctorch\nTensor\n(X\x04\x00\x00\x00truet}tR0")
		add(craftedEntry{Name: "cap_rebuild_from_type_v2_calls_system.pt", Class: "caps",
			Attack:      "after 10,001 allowed globals, torch._tensor._rebuild_from_type_v2(posix.system, Tensor, ('true',), {}) calls its first argument",
			ScanVerdict: "dangerous", Globals: sys, Entry: "archive/data.pkl", Convert: "refuse", ConvertErr: "not allowed",
			data: hCheckpoint(p, "0", f32s(4))})
		p = benignZipPickle(repeat("cos\ngetcwd\n0", 10001), systemCall, "0")
		add(craftedEntry{Name: "cap_10001_notallowed_then_other.pt", Class: "caps",
			Attack:      "10,001 uses of os.getcwd fill the list, then a different global, posix.system: both must be named",
			ScanVerdict: "dangerous", Globals: []string{"os.getcwd", "posix.system"}, Entry: "archive/data.pkl", Convert: "refuse", ConvertErr: "not allowed",
			data: hCheckpoint(p, "0", f32s(4))})
	}
	{
		p := cat(0x80, 2, repeat("(", 70000), systemCall, ".")
		add(craftedEntry{Name: "cap_marks_then_system.pkl", Class: "caps",
			Attack:      "70,000 nested MARKs exceed the decoder's mark cap; posix.system follows",
			ScanVerdict: "dangerous", Globals: sys, Entry: "pickle 1", Offset: off(70002), Convert: "refuse", ConvertErr: "not allowed", data: p})
	}
	{
		padN := 8 << 20
		body := cat(0x80, 4, 0x8e, binary.LittleEndian.AppendUint64(nil, uint64(padN)), make([]byte, padN), "0", systemCall, ".")
		z := hZip([]hEntry{{name: "archive/data.pkl", data: body, deflate: true}, {name: "archive/version", data: []byte("3\n")}}, nil)
		add(craftedEntry{Name: "cap_deflated_padding_then_system.pt", Class: "caps",
			Attack:      "data.pkl stored DEFLATE: 8 MiB of padding (far past the in-memory inflation cap), then posix.system",
			ScanVerdict: "dangerous", Globals: sys, Entry: "archive/data.pkl", Offset: off(11 + padN + 1), Convert: "refuse", ConvertErr: "not allowed", data: z})
	}

	// ---- 3. parser strictness ----
	dialects := []struct{ name, op string }{
		{"p0_int_hex", "I0x10\n0"}, {"p0_int_octal", "I010\n0"}, {"p0_int_space", "I 5\n0"},
		{"p0_long_underscore", "L1_000L\n0"}, {"p0_put_underscore", "Np1_0\n0"}, {"p0_int_nul", "I5\x00junk\n0"},
		{"p0_float_nan_sign", "F-nan\n0"}, {"binunicode_surrogate", "X\x03\x00\x00\x00\xed\xa0\x800"},
		{"p0_unicode_surrogate", "V\\ud800\n0"}, {"p0_long_line", "V" + repeat("a", 100<<10) + "\n0"},
	}
	for _, d := range dialects {
		p := cat(d.op, systemCall, ".")
		add(craftedEntry{Name: "parser_" + d.name + "_then_system.pkl", Class: "parser",
			Attack:      fmt.Sprintf("CPython accepts %q; a stricter decoder stops before posix.system", truncate([]byte(d.op))),
			ScanVerdict: "dangerous", Globals: sys, Entry: "pickle 1", Offset: off(bytes.Index(p, []byte("cposix"))), Convert: "refuse", ConvertErr: "not allowed", data: p})
	}
	{
		p := cat("L0x", repeat("f", 10000), "L\n0", systemCall, ".")
		add(craftedEntry{Name: "parser_huge_hex_long_then_system.pkl", Class: "parser",
			Attack:      "a 10,000-digit hex LONG (CPython has no digit limit for power-of-two bases; ours refuses it) then posix.system: the walker must go on",
			ScanVerdict: "dangerous", Globals: sys, Entry: "pickle 1", Offset: off(bytes.Index(p, []byte("cposix"))), Convert: "refuse", ConvertErr: "not allowed", data: p})
		p = cat(0x80, 4, 0x8c, 5, "posix", 0x94, 0x8c, 6, "system", 0x94, "I0x1g\n", 0x68, 0, 0x68, 1, 0x93, "0.")
		add(craftedEntry{Name: "parser_refused_then_memo_stack_global.pkl", Class: "parser",
			Attack:      "names stored in the memo, an INT CPython also refuses, then STACK_GLOBAL from memo GETs: the walker tracks strings through the memo",
			ScanVerdict: "dangerous", Globals: sys, Entry: "pickle 1", Convert: "refuse", ConvertErr: "not allowed", data: p})
	}
	{
		// a protocol-0 size in octal: torch reads 8 elements, and so must we
		pkl := cat("(", hStr("w"), "ctorch._utils\n_rebuild_tensor_v2\n(", hPid("FloatStorage", "0", 10),
			"I0\n(I010\nt(I1\ntI00\nccollections\nOrderedDict\n)RtRd.")
		add(craftedEntry{Name: "parser_octal_size_converts.pt", Class: "parser",
			Attack:      "a tensor whose size is the protocol-0 literal I010 (octal 8 for CPython): converted with 8 elements, scanned clean",
			ScanVerdict: "clean", Convert: "convert", data: hCheckpoint(pkl, "0", f32s(10))})
	}

	// ---- 4. names that lie ----
	add(craftedEntry{Name: "zip_named_model.safetensors", Class: "names",
		Attack:      "a torch zip whose data.pkl calls posix.system, named like a safetensors file",
		ScanVerdict: "dangerous", Globals: sys, Entry: "archive/data.pkl", Offset: off(2), Convert: "refuse", ConvertErr: "not allowed",
		data: hCheckpoint(cat(0x80, 2, systemCall, "."), "0", f32s(4))})
	add(craftedEntry{Name: "legacy_named_config.json", Class: "names",
		Attack:      "a harmless legacy checkpoint named .json: decided by content, it converts",
		ScanVerdict: "clean", Convert: "convert", data: base})

	// ---- 5. scan and convert agree ----
	add(craftedEntry{Name: "agree_10001_allowed_globals.pt", Class: "agreement",
		Attack:      "a valid checkpoint with 10,001 allowlisted GLOBAL opcodes: converts, so scan must say clean",
		ScanVerdict: "clean", Convert: "convert", data: hCheckpoint(benignZipPickle(allowed10k), "0", f32s(4))})

	// ---- frames that run past their STOP ----
	{
		// f6: after the STOP a clean legacy stream whose ByteStorage runs to
		// EOF; at the frame end (where CPython may leave the file) the payload
		const k, r = 64, 16
		evil := systemPickle()
		n := int64(k + len(evil) + r)
		obj := hPickle(hDict(hStr("w"), hTensor(hLegacyPid("ByteStorage", "0", n), 0, []int64{n}, []int64{1})))
		body := hLegacy(obj, []string{"0"}, hLegacyStorage(n, make([]byte, k)))[2:] // magic pickle without its PROTO
		p := cat(0x80, 4, 0x95, binary.LittleEndian.AppendUint64(nil, uint64(len(body))), body, evil, make([]byte, r))
		add(craftedEntry{Name: "frame_legacy_past_stop_clean_tail.pt", Class: "parser",
			Attack:      "the legacy magic pickle's FRAME runs past its STOP: read from the STOP it is a clean checkpoint whose storage swallows the rest; CPython may leave the file at the frame end, where posix.system sits",
			ScanVerdict: "dangerous", Globals: sys, Entry: "pickle 1 (from a frame end)", Offset: off(bytes.Index(p, []byte("cposix"))), Convert: "refuse", ConvertErr: "not allowed", data: p})
		// f7: the same in the tar member torch reads pickle by pickle
		evilB := cat("B", le32(uint32(len(evil))))
		fb := cat("K\x00.", 0x80, 2, "].", repeat("N0", 10), evilB)
		st := cat(0x80, 4, 0x95, binary.LittleEndian.AppendUint64(nil, uint64(len(fb))), fb, evil)
		add(craftedEntry{Name: "frame_tar_storages_past_stop.pt", Class: "parser",
			Attack:      "tar member storages: a FRAME runs past the first pickle's STOP; from the STOP a BINBYTES swallows the payload, from the frame end (CPython with an unbuffered file) it is posix.system",
			ScanVerdict: "dangerous", Globals: sys, Entry: "tar member storages (from a frame end)", Convert: "refuse", ConvertErr: "not allowed",
			data: legacyTarPolyglot(tarImage(tarM{name: "storages", data: st}), false)})
		// f5: the walker (decoding failed before) sees a FRAME run past a STOP
		fw := cat("N.", evilB)
		p = cat(0xff, 0x80, 4, 0x95, binary.LittleEndian.AppendUint64(nil, uint64(len(fw))), fw, evil)
		add(craftedEntry{Name: "frame_walker_past_stop.pkl", Class: "parser",
			Attack:      "decoding stops at once; the walker then meets a FRAME that runs past its STOP, after which a BINBYTES swallows posix.system: it must also walk from the frame end",
			ScanVerdict: "dangerous", Globals: sys, Entry: "pickle 1 (from a frame end)", Offset: off(bytes.Index(p, []byte("cposix"))), Convert: "refuse", ConvertErr: "not allowed", data: p})
	}

	// ---- arguments that cross a frame end ----
	{
		// CPython's C unpickler, reading a FRAME with read(n) (io.BytesIO for
		// torch's zip data.pkl, unbuffered or large frames), serves an
		// argument or text line that needs more than the frame holds from
		// the frame end, skipping the rest of the frame
		zipTensor := hTensor(hPid("FloatStorage", "0", 4), 0, []int64{4}, []int64{1})
		legacyTensor := hTensor(hLegacyPid("FloatStorage", "0", 4), 0, []int64{4}, []int64{1})
		legacy := func(obj []byte) []byte { return hLegacy(obj, []string{"0"}, hLegacyStorage(4, f32s(4))) }
		for _, c := range []struct {
			kind, ext string
			tensor    []byte
			wrap      func([]byte) []byte
			entry     string
		}{
			{"zip", "pt", zipTensor, func(p []byte) []byte { return hCheckpoint(p, "0", f32s(4)) }, "archive/data.pkl (from a frame end)"},
			{"legacy", "pt", legacyTensor, legacy, "pickle 4 (from a frame end)"},
		} {
			// binary: BINUNICODE's length lies in the frame, its payload
			// crosses the end; read from there, the payload ends before a
			// BINBYTES length, so CPython runs what we see as bytes
			p, at := crossBinary(hDict(hStr("w"), c.tensor))
			whole := c.wrap(p)
			if c.kind == "legacy" {
				at = bytes.Index(whole, p) + at
			}
			add(craftedEntry{Name: "frame_cross_binary_" + c.kind + "." + c.ext, Class: "parser",
				Attack:      "a BINUNICODE payload crosses its FRAME's end: read straight on, a BINBYTES swallows posix.system; CPython (frame read with read()) reads the payload from the frame end and runs it",
				ScanVerdict: "dangerous", Globals: sys, Entry: c.entry, Offset: off(at), Convert: "refuse", ConvertErr: "not allowed", data: whole})
			// text: GET lines cross three frame ends: read straight on they
			// fetch collections.OrderedDict and (); CPython fetches
			// posix.system and ('true',)
			p, at = crossText(c.tensor)
			whole = c.wrap(p)
			if c.kind == "legacy" {
				at = bytes.Index(whole, p) + at
			}
			add(craftedEntry{Name: "frame_cross_text_" + c.kind + "." + c.ext, Class: "parser",
				Attack: "GET lines cross FRAME ends: read straight on they fetch collections.OrderedDict and (), CPython (frames read with read()) reads them from the frame ends and fetches posix.system and ('true',)",
				// the walk from the first frame end, read straight on, also meets posix.OrderedDict
				ScanVerdict: "dangerous", Globals: []string{"posix.system", "posix.OrderedDict"}, Entry: c.entry, Offset: off(at),
				Convert: "refuse", ConvertErr: "not allowed", data: whole})
		}
	}

	{
		// f9: STACK_GLOBAL operands computed by an allowlisted callable
		enc := func(s string) []byte {
			r := []rune(s)
			for i, c := range r {
				if c >= 'a' && c <= 'z' {
					r[i] = 'a' + (c-'a'+13)%26
				}
			}
			return cat("c_codecs\nencode\n", hStr(string(r)), hStr("rot13"), 0x86, "R")
		}
		pkl := cat(0x80, 4, enc("posix"), enc("system"), 0x93, hStr("true"), 0x85, "R.")
		add(craftedEntry{Name: "stack_global_computed_operands.pt", Class: "parser",
			Attack:      "STACK_GLOBAL whose operands are _codecs.encode('cbfvk', 'rot13') = 'posix' and the like, computed at load time: the scan must name a not-allowed global",
			ScanVerdict: "dangerous", Globals: []string{"?.?"}, Entry: "archive/data.pkl", Offset: off(bytes.IndexByte(pkl, 0x93)), Convert: "refuse", ConvertErr: "not allowed",
			data: hCheckpoint(pkl, "0", f32s(4))})
	}

	{
		// f1 and the comment variant: the pickle named by another central
		// directory lives in a local header nested in a member's data
		type ent struct {
			name string
			data []byte
			off  int
		}
		build := func(variant string) []byte {
			var buf []byte
			var ents []ent
			addE := func(name string, d []byte) {
				ents = append(ents, ent{name, d, len(buf)})
				buf = append(buf, rawLocal(name, d)...)
				buf = append(buf, d...)
			}
			evil := systemPickle()
			addE("archive/data.pkl", benignZipPickle())
			addE("archive/data/0", f32s(4))
			addE("archive/version", []byte("3\n"))
			addE("archive/data/1", cat(rawLocal("archive/data.pkl", evil), evil))
			innerOff := ents[3].off + lenLocal + len(ents[3].name)
			var clean, bad []byte
			for _, e := range ents {
				clean = append(clean, rawCentral(e.name, e.data, e.off)...)
			}
			bad = cat(rawCentral("archive/data.pkl", evil, innerOff), rawCentral(ents[1].name, ents[1].data, ents[1].off), rawCentral(ents[2].name, ents[2].data, ents[2].off))
			cleanOff := len(buf)
			buf = append(buf, clean...)
			switch variant {
			case "zip64":
				badOff := len(buf)
				buf = append(buf, bad...)
				z64 := len(buf)
				buf = binary.LittleEndian.AppendUint32(buf, sigEnd64)
				buf = binary.LittleEndian.AppendUint64(buf, 44)
				buf = append(buf, 45, 0, 45, 0, 0, 0, 0, 0, 0, 0, 0, 0)
				for _, v := range []uint64{3, 3, uint64(len(bad)), uint64(badOff)} {
					buf = binary.LittleEndian.AppendUint64(buf, v)
				}
				buf = binary.LittleEndian.AppendUint32(buf, sigLocator)
				buf = binary.LittleEndian.AppendUint32(buf, 0)
				buf = binary.LittleEndian.AppendUint64(buf, uint64(z64))
				buf = binary.LittleEndian.AppendUint32(buf, 1)
				buf = append(buf, rawEnd(4, len(clean), cleanOff, 0)...)
			case "comment":
				badOff := len(buf) + lenEnd
				inner := cat(bad, rawEnd(3, len(bad), badOff, 5)) // its comment length overruns the file
				buf = append(buf, rawEnd(4, len(clean), cleanOff, len(inner))...)
				buf = append(buf, inner...)
			}
			return buf
		}
		add(craftedEntry{Name: "zip64_locator_other_directory_nested.pt", Class: "container-polyglot",
			Attack:      "the classic end record names a clean directory, the zip64 locator (which miniz and zipfile follow) another whose data.pkl is a local header nested in member archive/data/1: posix.system",
			ScanVerdict: "dangerous", Globals: sys, Entry: "archive/data.pkl", Offset: off(2), Convert: "refuse", ConvertErr: "not allowed", data: build("zip64")})
		add(craftedEntry{Name: "zip_comment_end_record_nested.pt", Class: "container-polyglot",
			Attack:      "the end record's comment holds another directory and end record (whose own comment length overruns the file) naming a data.pkl nested in member archive/data/1: posix.system",
			ScanVerdict: "dangerous", Globals: sys, Entry: "archive/data.pkl", Offset: off(2), Convert: "refuse", ConvertErr: "not allowed", data: build("comment")})
	}

	// ---- defects ----
	add(craftedEntry{Name: "legacy_sys_info_little_endian_1.pt", Class: "defect",
		Attack:      "legacy sys_info with little_endian=1 (an int): torch ignores sys_info",
		ScanVerdict: "clean", Convert: "convert",
		data: bytes.Replace(base, []byte("little_endian\x00\x00\x00\x88"), []byte("little_endian\x00\x00\x00K\x01"), 1)})
	for _, e := range zipCraftedFiles() {
		add(e)
	}
	for _, e := range tarCraftedFiles() {
		add(e)
	}
	for _, e := range budgetCraftedFiles() {
		add(e)
	}
	add(craftedEntry{Name: "tar_gnu_sparse_ext_pickle.tar", Class: "container-polyglot",
		Attack:      "a GNU sparse member with an extension block shifts every later header by 512 bytes in Python's tarfile; a decoy header hides the pickle member torch unpickles: posix.system",
		ScanVerdict: "dangerous", Globals: []string{"posix.system"}, Entry: "tar member pickle", Convert: "refuse", ConvertErr: "not allowed",
		data: tarSparseExtPickle()})
	return out
}

// rawLocal is a STORED local header for d (no extra field).
func rawLocal(name string, d []byte) []byte {
	b := binary.LittleEndian.AppendUint32(nil, sigLocal)
	b = append(b, 20, 0, 0, 0, 0, 0, 0, 0, 0x21, 0)
	b = binary.LittleEndian.AppendUint32(b, crc32.ChecksumIEEE(d))
	b = binary.LittleEndian.AppendUint32(b, uint32(len(d)))
	b = binary.LittleEndian.AppendUint32(b, uint32(len(d)))
	b = binary.LittleEndian.AppendUint16(b, uint16(len(name)))
	return append(append(b, 0, 0), name...)
}

// rawCentral is the central directory record of a rawLocal member at off.
func rawCentral(name string, d []byte, off int) []byte {
	b := binary.LittleEndian.AppendUint32(nil, sigCentral)
	b = append(b, 20, 0, 20, 0, 0, 0, 0, 0, 0, 0, 0x21, 0)
	b = binary.LittleEndian.AppendUint32(b, crc32.ChecksumIEEE(d))
	b = binary.LittleEndian.AppendUint32(b, uint32(len(d)))
	b = binary.LittleEndian.AppendUint32(b, uint32(len(d)))
	b = binary.LittleEndian.AppendUint16(b, uint16(len(name)))
	b = append(b, make([]byte, 12)...)
	b = binary.LittleEndian.AppendUint32(b, uint32(off))
	return append(b, name...)
}

// rawEnd is an end of central directory record.
func rawEnd(n, cdSize, cdOff, commentLen int) []byte {
	b := binary.LittleEndian.AppendUint32(nil, sigEnd)
	b = append(b, 0, 0, 0, 0)
	b = binary.LittleEndian.AppendUint16(b, uint16(n))
	b = binary.LittleEndian.AppendUint16(b, uint16(n))
	b = binary.LittleEndian.AppendUint32(b, uint32(cdSize))
	b = binary.LittleEndian.AppendUint32(b, uint32(cdOff))
	return binary.LittleEndian.AppendUint16(b, uint16(commentLen))
}

// fixCD moves the central directory offset of a plain zip to cdOff.
func fixCD(z []byte, cdOff int) {
	binary.LittleEndian.PutUint32(z[len(z)-6:], uint32(cdOff))
}

// pythonCrafted lists the files make_python.py writes.
func pythonCrafted() []craftedEntry {
	sys := []string{"posix.system"}
	by := "python3 testdata/crafted/make_python.py (pickle, tarfile, zipfile)"
	return []craftedEntry{
		{Name: "py_tar_pickle_member.pt", Class: "container-polyglot", MadeBy: by,
			Attack:      "a ustar tar written by tarfile with members storages/tensors/pickle; 'pickle' is pickle.dumps of posix.system('true')",
			ScanVerdict: "dangerous", Globals: sys, Entry: "tar member pickle", Convert: "refuse", ConvertErr: "not allowed"},
		{Name: "py_gnutar_storages_member.pt", Class: "container-polyglot", MadeBy: by,
			Attack:      "a GNU tar whose 'storages' member (the first pickle torch reads) is the payload",
			ScanVerdict: "dangerous", Globals: sys, Entry: "tar member storages", Convert: "refuse", ConvertErr: "not allowed"},
		{Name: "py_pickle_p0_system.bin", Class: "names", MadeBy: by,
			Attack:      "pickle.dumps(protocol=0) of posix.system('true'): no PROTO byte, named .bin",
			ScanVerdict: "dangerous", Globals: sys, Entry: "pickle 1", Offset: off(0), Convert: "refuse", ConvertErr: "not allowed"},
		{Name: "py_zip_deflated_padding.pt", Class: "caps", MadeBy: by,
			Attack:      "zipfile ZIP_DEFLATED data.pkl: a 64 MiB bytes value, then posix.system",
			ScanVerdict: "dangerous", Globals: sys, Entry: "archive/data.pkl", Convert: "refuse", ConvertErr: "not allowed"},
	}
}

func TestCrafted(t *testing.T) {
	entries := craftedFiles()
	if *updateCrafted {
		if py, err := exec.LookPath("python3"); err == nil {
			if out, err := exec.Command(py, filepath.Join(craftedDir, "make_python.py"), craftedDir).CombinedOutput(); err != nil {
				t.Fatalf("make_python.py: %v\n%s", err, out)
			}
			if out, err := exec.Command(py, filepath.Join(testdata, "..", "docs", "security", "redteam", "make_fixtures.py"), craftedDir).CombinedOutput(); err != nil {
				t.Fatalf("make_fixtures.py: %v\n%s", err, out)
			}
		} else {
			t.Log("python3 not installed: the py_* and redteam_* fixtures are not rebuilt")
		}
		for _, e := range entries {
			if err := os.WriteFile(filepath.Join(craftedDir, e.Name), e.data, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		all := slices.Concat(entries, pythonCrafted(), redteamCrafted())
		slices.SortFunc(all, func(a, b craftedEntry) int { return strings.Compare(a.Name, b.Name) })
		b, _ := json.MarshalIndent(all, "", "  ")
		if err := os.WriteFile(filepath.Join(craftedDir, "INDEX.json"), append(b, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(craftedDir, e.Name))
		if err != nil || !bytes.Equal(b, e.data) {
			t.Errorf("%s: committed file differs from the generator (run go test ./torch -run TestCrafted -update): %v", e.Name, err)
		}
	}
	idx := readCraftedIndex(t)
	if n := len(entries) + len(pythonCrafted()) + len(redteamCrafted()); len(idx) != n {
		t.Fatalf("INDEX.json has %d entries, the generators %d", len(idx), n)
	}
	for _, e := range idx {
		t.Run(e.Name, func(t *testing.T) { checkCrafted(t, e) })
	}
}

func readCraftedIndex(t testing.TB) []craftedEntry {
	b, err := os.ReadFile(filepath.Join(craftedDir, "INDEX.json"))
	if err != nil {
		t.Fatal(err)
	}
	var idx []craftedEntry
	if err := json.Unmarshal(b, &idx); err != nil {
		t.Fatal(err)
	}
	return idx
}

func checkCrafted(t *testing.T, e craftedEntry) {
	path := filepath.Join(craftedDir, e.Name)
	rep, err := ScanFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if v := rep.Verdict(); v != e.ScanVerdict {
		t.Errorf("scan verdict %s, want %s; globals %v problems %q", v, e.ScanVerdict, rep.NotAllowed(), rep.Problems)
	}
	for _, g := range e.Globals {
		if !slices.Contains(rep.NotAllowed(), g) {
			t.Errorf("scan does not name %s (names %v)", g, rep.NotAllowed())
		}
	}
	if e.Entry != "" && len(e.Globals) > 0 {
		found := false
		for _, g := range rep.Globals {
			if g.String() == e.Globals[0] && g.Entry == e.Entry && (e.Offset == nil || g.Offset == *e.Offset) {
				found = true
			}
		}
		if !found {
			t.Errorf("no %s at %s offset %v in %+v", e.Globals[0], e.Entry, e.Offset, rep.Globals[:min(len(rep.Globals), 8)])
		}
	}
	c, err := Open(path)
	switch e.Convert {
	case "convert":
		if err != nil {
			t.Fatalf("Open refused: %v", err)
		}
		c.Close()
	case "refuse":
		if err == nil {
			c.Close()
			t.Fatal("Open accepted it")
		}
		kind := map[string]error{"not allowed": ErrNotAllowed, "unsupported": ErrUnsupported, "corrupt": ErrCorrupt}[e.ConvertErr]
		if !errors.Is(err, kind) {
			t.Errorf("Open: %v, want %s", err, e.ConvertErr)
		}
		if len(e.Globals) > 0 && !strings.Contains(err.Error(), e.Globals[len(e.Globals)-1]) && !strings.Contains(err.Error(), e.Globals[0]) {
			t.Errorf("Open error does not name %v: %v", e.Globals, err)
		}
	}
	// one verdict
	if (rep.Verdict() == VerdictClean) != (err == nil) {
		t.Errorf("scan says %s but Open returned %v", rep.Verdict(), err)
	}
}
