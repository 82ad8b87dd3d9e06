package torch

// Hostile inputs: each test builds a file an attacker could hand to Open or
// Scan and checks that it is refused, or decoded exactly as torch.load (the
// CPython C unpickler plus torch's miniz-based zip reader) would decode it.

import (
	"bytes"
	"compress/flate"
	"encoding/binary"
	"errors"
	"github.com/gosafetensors/safetensors/torch/pickle"
	"hash/crc32"
	"io"
	"math"
	"math/big"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
)

// ---- pickle builders ----

func hStr(s string) []byte { return cat("X", le32(uint32(len(s))), s) }

func hInt(n int64) []byte {
	if n >= math.MinInt32 && n <= math.MaxInt32 {
		return cat("J", le32(uint32(int32(n))))
	}
	return cat(0x8a, 8, binary.LittleEndian.AppendUint64(nil, uint64(n)))
}

func hInts(v ...int64) []byte {
	b := []byte("(")
	for _, x := range v {
		b = append(b, hInt(x)...)
	}
	return append(b, 't')
}

// hPid is a zip persistent id ('storage', torch.<typ>, key, 'cpu', numel).
func hPid(typ, key string, numel int64) []byte {
	return cat("(", hStr("storage"), "ctorch\n"+typ+"\n", hStr(key), hStr("cpu"), hInt(numel), "tQ")
}

// hTensor is _rebuild_tensor_v2(pid, offset, size, stride, False, OrderedDict()).
func hTensor(pid []byte, off int64, size, stride []int64) []byte {
	return cat("ctorch._utils\n_rebuild_tensor_v2\n(", pid, hInt(off), hInts(size...), hInts(stride...),
		0x89, "ccollections\nOrderedDict\n)R", "tR")
}

// hDict is {k0: v0, k1: v1, ...} with already-encoded keys and values.
func hDict(kv ...any) []byte { return cat("}(", cat(kv...), "u") }

func hPickle(body ...any) []byte { return append(cat(0x80, 2), append(cat(body...), '.')...) }

// ---- zip builder ----

type hEntry struct {
	name      string
	localName string // "" = name
	data      []byte
	flags     uint16
	deflate   bool // store data DEFLATE-compressed (method 8)
}

// hZip writes a plain STORED zip (no data descriptors, no ZIP64) with the
// given end-record comment.
func hZip(entries []hEntry, comment []byte) []byte {
	var out, cd []byte
	for _, e := range entries {
		ln := e.localName
		if ln == "" {
			ln = e.name
		}
		crc := crc32.ChecksumIEEE(e.data)
		body, method := e.data, uint16(0)
		if e.deflate {
			var buf bytes.Buffer
			fw, _ := flate.NewWriter(&buf, flate.BestCompression)
			fw.Write(e.data)
			fw.Close()
			body, method = buf.Bytes(), 8
		}
		lho := len(out)
		h := binary.LittleEndian.AppendUint32(nil, sigLocal)
		h = binary.LittleEndian.AppendUint16(h, 20)
		h = binary.LittleEndian.AppendUint16(h, e.flags)
		h = binary.LittleEndian.AppendUint16(h, method)
		h = binary.LittleEndian.AppendUint32(h, 0) // time, date
		h = binary.LittleEndian.AppendUint32(h, crc)
		h = binary.LittleEndian.AppendUint32(h, uint32(len(body)))
		h = binary.LittleEndian.AppendUint32(h, uint32(len(e.data)))
		h = binary.LittleEndian.AppendUint16(h, uint16(len(ln)))
		h = binary.LittleEndian.AppendUint16(h, 0)
		out = append(append(append(out, h...), ln...), body...)
		c := binary.LittleEndian.AppendUint32(nil, sigCentral)
		c = binary.LittleEndian.AppendUint16(c, 20)
		c = binary.LittleEndian.AppendUint16(c, 20)
		c = binary.LittleEndian.AppendUint16(c, e.flags)
		c = binary.LittleEndian.AppendUint16(c, method)
		c = binary.LittleEndian.AppendUint32(c, 0)
		c = binary.LittleEndian.AppendUint32(c, crc)
		c = binary.LittleEndian.AppendUint32(c, uint32(len(body)))
		c = binary.LittleEndian.AppendUint32(c, uint32(len(e.data)))
		c = binary.LittleEndian.AppendUint16(c, uint16(len(e.name)))
		c = append(c, make([]byte, 2+2+2+2+4)...) // extra, comment, disk, attrs
		c = binary.LittleEndian.AppendUint32(c, uint32(lho))
		cd = append(append(cd, c...), e.name...)
	}
	cdOff := len(out)
	out = append(out, cd...)
	end := binary.LittleEndian.AppendUint32(nil, sigEnd)
	end = append(end, 0, 0, 0, 0)
	end = binary.LittleEndian.AppendUint16(end, uint16(len(entries)))
	end = binary.LittleEndian.AppendUint16(end, uint16(len(entries)))
	end = binary.LittleEndian.AppendUint32(end, uint32(len(cd)))
	end = binary.LittleEndian.AppendUint32(end, uint32(cdOff))
	end = binary.LittleEndian.AppendUint16(end, uint16(len(comment)))
	return append(append(out, end...), comment...)
}

// hCheckpoint is a torch-like zip: archive/data.pkl, archive/data/<key>..., archive/version.
func hCheckpoint(pkl []byte, storages ...any) []byte {
	es := []hEntry{{name: "archive/data.pkl", data: pkl}}
	for i := 0; i+1 < len(storages); i += 2 {
		es = append(es, hEntry{name: "archive/data/" + storages[i].(string), data: storages[i+1].([]byte)})
	}
	es = append(es, hEntry{name: "archive/version", data: []byte("3\n")})
	return hZip(es, nil)
}

func wantErr(t *testing.T, what string, err error, kind error, msg string) {
	t.Helper()
	if err == nil {
		t.Fatalf("%s: accepted, want %v %q", what, kind, msg)
	}
	if !errors.Is(err, kind) || !strings.Contains(err.Error(), msg) {
		t.Fatalf("%s: got %v, want %v containing %q", what, err, kind, msg)
	}
}

func scanBytes(t *testing.T, b []byte) *ScanReport {
	t.Helper()
	rep, err := Scan(bytes.NewReader(b), int64(len(b)), "mem.pt")
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// The builders themselves produce a checkpoint that opens.
func TestHostileBuildersBaseline(t *testing.T) {
	pkl := hPickle(hDict(hStr("w"), hTensor(hPid("FloatStorage", "0", 4), 0, []int64{2, 2}, []int64{2, 1})))
	c, err := openBytes(t, hCheckpoint(pkl, "0", f32s(4)))
	if err != nil {
		t.Fatal(err)
	}
	if w := c.Lookup("w"); w == nil || w.NBytes() != 16 {
		t.Fatalf("%+v", c.Entries)
	}
	if rep := scanBytes(t, hCheckpoint(pkl, "0", f32s(4))); !rep.Safe() || rep.Tensors != 1 {
		t.Fatalf("%+v", rep)
	}
}

// (l) Protocol-0 INT goes through strtol(s, 0) in CPython's C unpickler:
// "I010\n" is 8 there, and was read as 10 here. Non-canonical spellings are
// now refused; canonical ones decode as CPython decodes them.
func TestHostileTextIntegers(t *testing.T) {
	ok := []struct {
		in   string
		want any
	}{
		{"I10\n.", int64(10)},
		{"I-7\n.", int64(-7)},
		{"I0\n.", int64(0)},
		{"I00\n.", false},
		{"I01\n.", true},
		{"I+1\n.", true},  // CPython: strtol gives 1 and the line is 3 bytes -> True
		{"I-0\n.", false}, // likewise
		{"I-1\n.", int64(-1)},
		{"L123L\n.", int64(123)},
		{"L123\n.", int64(123)},
		{"L-5L\n.", int64(-5)},
		{"I99999999999999999999\n.", "99999999999999999999"},
		{"K\x09p7\n0g007\n.", int64(9)}, // PUT/GET indices are base 10: leading zeros are fine
	}
	for _, c := range ok {
		v, err := decode(t, []byte(c.in), nil)
		if err != nil {
			t.Fatalf("%q: %v", c.in, err)
		}
		if s, isStr := c.want.(string); isStr {
			if b, isBig := v.(*big.Int); !isBig || b.String() != s {
				t.Fatalf("%q: got %v", c.in, v)
			}
		} else if v != c.want {
			t.Fatalf("%q: got %#v, want %#v", c.in, v, c.want)
		}
	}
	// what CPython's C unpickler makes of the dialects (checked against
	// python3 in TestTextOpcodesMatchCPython)
	cpython := map[string]any{
		"I010\n.":    int64(8),  // strtol: octal
		"I0x10\n.":   int64(16), // strtol: hex
		"I 1\n.":     true,      // strtol skips the blank; two characters worth 1
		"I1 \n.":     int64(1),  // PyLong_FromString fallback allows trailing blanks
		"I1_000\n.":  int64(1000),
		"I0o17\n.":   int64(15),
		"I0b1\n.":    int64(1),
		"L0x10L\n.":  int64(16),
		"L1_0\n.":    int64(10),
		"I5\x00x\n.": int64(5), // C strings end at the NUL
	}
	for in, want := range cpython {
		if v, err := decode(t, []byte(in), nil); err != nil || v != want {
			t.Errorf("%q: got %#v %v, want %#v", in, v, err, want)
		}
	}
	// memo indices are PyLong_FromString(s, 10): underscores, blanks
	for _, in := range []string{"I7\np1_0\n0g10\n.", "I7\np 1\n0g1 \n.", "I7\np01\n0g1\n."} {
		if v, err := decode(t, []byte(in), nil); err != nil || v != int64(7) {
			t.Errorf("%q: got %#v %v, want 7", in, v, err)
		}
	}
	bad := []string{
		"I\n.",         // empty
		"I+\n.",        // sign only
		"I٣\n.",        // non-ASCII digit
		"L010L\n.",     // error in CPython
		"L123L \n.",    // error in CPython (the L is not last)
		"LL\n.",        // empty
		"(Np-1\n.",     // negative PUT
		"(Np0x1\n.",    // error in CPython
		"(Np1\n0g1L\n", // error in CPython
	}
	for _, in := range bad {
		if _, err := decode(t, []byte(in), nil); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%q: got %v, want ErrCorrupt", in, err)
		}
	}
	// a very long digit string is refused by length, fast
	long := "I" + strings.Repeat("7", 1<<20) + "\n."
	costs(t, "1 MiB INT", []byte(long), 2<<20, 32<<20, func(r io.ReaderAt, size int64) {
		_, err := newVM(pickle.NewStream(r, 0, size), func() *Limits { l := DefaultLimits(); return &l }(), "long.pkl", pidNone, nil, nil).run()
		wantErr(t, "1 MiB INT", err, ErrCorrupt, "over 3072 digits")
	})

	// End to end: a protocol-0 size of "010" is 8 elements in torch, and
	// so here.
	pkl := cat("(", hStr("w"), "ctorch._utils\n_rebuild_tensor_v2\n(", hPid("FloatStorage", "0", 10),
		"I0\n(I010\nt(I1\ntI00\nccollections\nOrderedDict\n)RtRd.")
	if c, err := openBytes(t, hCheckpoint(pkl, "0", f32s(10))); err != nil || c.Lookup("w").Numel() != 8 {
		t.Fatalf("octal protocol-0 size: %v", err)
	}
	pkl = bytes.Replace(pkl, []byte("I010\n"), []byte("I10\n"), 1)
	if c, err := openBytes(t, hCheckpoint(pkl, "0", f32s(10))); err != nil || c.Lookup("w").Numel() != 10 {
		t.Fatalf("canonical protocol-0 tensor: %v", err)
	}
}

// (l) FLOAT is PyOS_string_to_double over the whole line: no hex, no
// underscores, no surrounding blanks, overflow is an error.
func TestHostileTextFloats(t *testing.T) {
	for in, want := range map[string]float64{"F1.5\n.": 1.5, "F-2e3\n.": -2000, "Finf\n.": math.Inf(1), "F1e-400\n.": 0} {
		if v, err := decode(t, []byte(in), nil); err != nil || v != want {
			t.Errorf("%q: %v %v", in, v, err)
		}
	}
	for _, in := range []string{"F0x1p-2\n.", "F1_0.5\n.", "F 1.5\n.", "F1.5 \n.", "F1e999\n.", "F\n."} {
		if _, err := decode(t, []byte(in), nil); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%q: got %v", in, err)
		}
	}
}

// (a)/(i) The two keys \\u0041 and \A stay two (see the pickle package's
// TestUnicodeEscapes): decoding `\\u0041` as `\A` merged it with the key
// `\A`, silently dropping one of two tensors torch.load returns.
func TestHostileUnicodeEscapeKeys(t *testing.T) {
	// {V'\\u0041': 1, V'\A': 2} has two keys in Python
	v, err := decode(t, []byte("(V\\\\u0041\nI1\nV\\A\nI2\nd."), nil)
	if err != nil {
		t.Fatal(err)
	}
	if d := v.(*pickle.Dict); len(d.Keys) != 2 || d.Keys[0] != `\\u0041` || d.Keys[1] != `\A` {
		t.Fatalf("keys %q", d.Keys)
	}
	// lone surrogates are distinct Python keys, and distinct here
	v, err = decode(t, []byte("(V\\ud800\nI1\nV\\ud801\nI2\nd."), nil)
	if err != nil || len(v.(*pickle.Dict).Keys) != 2 {
		t.Fatalf("surrogate keys: %v", err)
	}
}

// (i) Python: 2**70 == 2.0**70, so {2**70: 1, 2.0**70: 2} has one key.
func TestHostileFloatKeyEqualsBigInt(t *testing.T) {
	f := binary.BigEndian.AppendUint64(nil, math.Float64bits(math.Ldexp(1, 70)))
	in := cat("}(", 0x8a, 9, 0, 0, 0, 0, 0, 0, 0, 0, 0x40, "K\x01", "G", f, "K\x02u.")
	v, err := decode(t, in, nil)
	if err != nil {
		t.Fatal(err)
	}
	d := v.(*pickle.Dict)
	if len(d.Keys) != 1 || d.Values[0] != int64(2) {
		t.Fatalf("keys %v vals %v", d.Keys, d.Values)
	}
	if b, ok := d.Keys[0].(*big.Int); !ok || b.Cmp(new(big.Int).Lsh(big.NewInt(1), 70)) != 0 {
		t.Fatalf("key %v", d.Keys[0])
	}
	// 2**63 as a float equals the big int 2**63
	f = binary.BigEndian.AppendUint64(nil, math.Float64bits(math.Ldexp(1, 63)))
	in = cat("}(", 0x8a, 9, 0, 0, 0, 0, 0, 0, 0, 0x80, 0, "K\x01", "G", f, "K\x02u.")
	if v, err = decode(t, in, nil); err != nil || len(v.(*pickle.Dict).Keys) != 1 {
		t.Fatalf("2**63: %v %v", v, err)
	}
}

// (a) _rebuild_parameter_with_state setattr()s its state on the parameter:
// {'data': t2} makes torch return t2's contents, {'real': 0.0} zeroes it.
func TestHostileParameterState(t *testing.T) {
	t1 := hTensor(hPid("FloatStorage", "0", 4), 0, []int64{4}, []int64{1})
	t2 := hTensor(hPid("FloatStorage", "1", 2), 0, []int64{2}, []int64{1})
	param := func(state []byte) []byte {
		return hPickle(hDict(hStr("p"), cat("ctorch._utils\n_rebuild_parameter_with_state\n(", t1, 0x89,
			"ccollections\nOrderedDict\n)R", state, "tR")))
	}
	for name, state := range map[string][]byte{
		"data":      hDict(hStr("data"), t2),
		"real":      hDict(hStr("real"), cat("G", binary.BigEndian.AppendUint64(nil, 0))),
		"slots":     cat("}", hDict(hStr("data"), t2), 0x86),
		"plain":     hDict(hStr("_is_hf_initialized"), []byte{0x88}),
		"bad tuple": cat("}", 0x85),
	} {
		_, err := openBytes(t, hCheckpoint(param(state), "0", f32s(4), "1", f32s(2)))
		wantErr(t, name, err, ErrUnsupported, "parameter state")
	}
	for name, state := range map[string][]byte{"none": []byte("N"), "empty": []byte("}"), "empty pair": cat("}N", 0x86)} {
		c, err := openBytes(t, hCheckpoint(param(state), "0", f32s(4)))
		if err != nil || !c.Lookup("p").IsParameter || c.Lookup("p").Numel() != 4 {
			t.Fatalf("%s: %v", name, err)
		}
	}
}

// (c) Work a REDUCE does on a memo-shared argument is charged: a list of
// 200k pairs passed to OrderedDict 1000 times was 2e8 insertions for a
// 1.6 MB pickle; a 1M-item size tuple was converted per call; _codecs.encode
// copied a shared string per call without bound.
func TestHostileQuadraticReduce(t *testing.T) {
	const n = 200000
	b := cat(0x80, 2, "K\x01K\x02\x86q\x00](") // pair (1, 2), then a list of n references to it
	for i := 0; i < n; i++ {
		b = append(b, "h\x00"...)
	}
	b = append(b, "eq\x01ccollections\nOrderedDict\nq\x02]("...)
	for i := 0; i < 1000; i++ {
		b = append(b, "h\x02h\x01\x85R"...)
	}
	b = append(b, "e."...)
	lim := DefaultLimits()
	lim.MaxObjects = 1 << 22 // 2e8 insertions were done before the fix whatever the cap
	costs(t, "OrderedDict of a shared list", b, 1<<20, 128<<20, func(r io.ReaderAt, size int64) {
		_, err := newVM(pickle.NewStream(r, 0, size), &lim, "od.pkl", pidZip, nil, nil).run()
		wantErr(t, "OrderedDict of a shared list", err, ErrLimit, "objects")
	})

	// size/stride and torch.Size arguments longer than MaxDims are refused
	// before any conversion
	big := cat(0x80, 2, "](")
	for i := 0; i < 1000; i++ {
		big = append(big, "K\x01"...)
	}
	big = append(big, "eq\x00"...)
	_, err := decode(t, cat(big, "ctorch\nSize\nh\x00\x85R."), nil)
	wantErr(t, "torch.Size of 1000 ints", err, ErrCorrupt, "at most 64 ints")
	_, err = decode(t, cat(big, "ctorch._utils\n_rebuild_tensor_v2\n(", hPid("FloatStorage", "0", 1), "K\x00h\x00h\x00", 0x89, "NtR."), nil)
	wantErr(t, "size of 1000 ints", err, ErrCorrupt, "at most 64 ints")

	// one 64 KiB string, encoded 100 times (6.4 MB of output from a 66 KB pickle)
	enc := cat(0x80, 2, "X", le32(64<<10), strings.Repeat("a", 64<<10), "q\x00c_codecs\nencode\nq\x01", hStr("latin1"), "q\x02](")
	for i := 0; i < 100; i++ {
		enc = append(enc, "h\x01h\x00h\x02\x86R"...)
	}
	enc = append(enc, "e."...)
	_, err = decode(t, enc, nil)
	wantErr(t, "repeated _codecs.encode", err, ErrLimit, "_codecs.encode")
	// encoding each string once is fine
	once := cat(0x80, 2, "c_codecs\nencode\n", hStr(strings.Repeat("b", 1000)), hStr("latin1"), 0x86, "R.")
	if v, err := decode(t, once, nil); err != nil || len(v.([]byte)) != 1000 {
		t.Fatalf("single encode: %v", err)
	}
}

// (e) torch's zip reader (miniz) looks names up case-insensitively, so
// archive/DATA.pkl next to archive/data.pkl may be the pickle torch loads.
func TestHostileZipCaseDuplicates(t *testing.T) {
	benign := hPickle(hDict(hStr("w"), hTensor(hPid("FloatStorage", "0", 4), 0, []int64{4}, []int64{1})))
	evil := []byte("cposix\nsystem\n(S'id'\ntR.") // protocol 0: no PROTO byte to sniff
	ver := hEntry{name: "archive/version", data: []byte("3\n")}
	st := hEntry{name: "archive/data/0", data: f32s(4)}

	b := hZip([]hEntry{{name: "archive/data.pkl", data: benign}, {name: "archive/DATA.PKL", data: evil}, st, ver}, nil)
	_, err := openBytes(t, b)
	wantErr(t, "evil DATA.PKL beside data.pkl", err, ErrNotAllowed, "posix.system")
	if rep := scanBytes(t, b); rep.Safe() || strings.Join(rep.NotAllowed(), ",") != "posix.system" {
		t.Fatalf("scan: %+v", rep)
	}

	b = hZip([]hEntry{{name: "archive/DATA.PKL", data: evil}, st, ver}, nil)
	_, err = openBytes(t, b)
	wantErr(t, "lone evil DATA.PKL", err, ErrNotAllowed, "posix.system")
	if rep := scanBytes(t, b); rep.Safe() || strings.Join(rep.NotAllowed(), ",") != "posix.system" {
		t.Fatalf("scan: %+v", rep)
	}

	other := hPickle(hDict(hStr("w"), hTensor(hPid("FloatStorage", "0", 2), 0, []int64{2}, []int64{1})))
	b = hZip([]hEntry{{name: "archive/data.pkl", data: benign}, {name: "archive/Data.pkl", data: other}, st, ver}, nil)
	_, err = openBytes(t, b)
	wantErr(t, "two data.pkl differing in case", err, ErrCorrupt, "differ only in letter case")
	if scanBytes(t, b).Safe() {
		t.Fatal("scan says safe")
	}

	b = hZip([]hEntry{{name: "archive/Data.pkl", data: benign}, st, ver}, nil)
	_, err = openBytes(t, b)
	wantErr(t, "lone Data.pkl", err, ErrCorrupt, "not spelled")

	// storage records: torch may read data/A for key "a"
	pkl := hPickle(hDict(hStr("w"), hTensor(hPid("FloatStorage", "a", 4), 0, []int64{4}, []int64{1})))
	b = hZip([]hEntry{{name: "archive/data.pkl", data: pkl}, {name: "archive/data/A", data: f32s(4)}, {name: "archive/data/a", data: f32s(4)}, ver}, nil)
	_, err = openBytes(t, b)
	wantErr(t, "storage records differing in case", err, ErrCorrupt, "differ only in letter case")
	b = hZip([]hEntry{{name: "archive/data.pkl", data: pkl}, {name: "archive/data/a", data: f32s(4)}, ver, {name: "archive/VERSION", data: []byte("9\n")}}, nil)
	_, err = openBytes(t, b)
	wantErr(t, "version records differing in case", err, ErrCorrupt, "differ only in letter case")
}

// (e) Other name tricks, prefix confusion and layout tricks.
func TestHostileZipNames(t *testing.T) {
	benign := hPickle(hDict(hStr("w"), hTensor(hPid("FloatStorage", "0", 4), 0, []int64{4}, []int64{1})))
	evil := hPickle("cposix\nsystem\n", hStr("id"), 0x85, "R")
	st := hEntry{name: "archive/data/0", data: f32s(4)}
	ver := hEntry{name: "archive/version", data: []byte("3\n")}
	cases := []struct {
		name    string
		entries []hEntry
		kind    error
		msg     string
	}{
		{"NUL suffix", []hEntry{{name: "archive/data.pkl\x00", data: benign}, st, ver}, ErrCorrupt, "NUL byte"},
		{"directory entry", []hEntry{{name: "archive/data.pkl", data: benign}, st, ver, {name: "archive/extra/", data: []byte("x")}}, ErrCorrupt, "marked as a directory"},
		{"double slash", []hEntry{{name: "archive//data.pkl", data: benign}, st, ver}, ErrCorrupt, "no <prefix>/data.pkl"},
		{"backslash", []hEntry{{name: "archive\\data.pkl", data: benign}, st, ver}, ErrCorrupt, "top-level folder"},
		{"absolute", []hEntry{{name: "/archive/data.pkl", data: benign}, st, ver}, ErrCorrupt, "top-level folder"},
		{"second prefix, evil", []hEntry{{name: "archive/data.pkl", data: benign}, st, ver, {name: "archive2/data.pkl", data: evil}}, ErrNotAllowed, "posix.system"},
		{"second prefix first", []hEntry{{name: "archive2/data.pkl", data: benign}, {name: "archive/data.pkl", data: benign}, st, ver}, ErrCorrupt, "more than one top-level folder"},
		{"prefix case", []hEntry{{name: "archive/data.pkl", data: benign}, st, {name: "ARCHIVE/version", data: []byte("3\n")}}, ErrCorrupt, "more than one top-level folder"},
		{"local name differs", []hEntry{{name: "archive/data.pkl", localName: "archive/x.pkl/", data: benign}, st, ver}, ErrCorrupt, "local header names"},
		{"encrypted member", []hEntry{{name: "archive/extra", data: []byte("x"), flags: 1}, {name: "archive/data.pkl", data: benign}, st, ver}, ErrUnsupported, "encrypted"},
		{"storage key path", []hEntry{{name: "archive/data.pkl", data: hPickle(hDict(hStr("w"), hTensor(hPid("FloatStorage", "../version", 0), 0, []int64{0}, []int64{1})))}, st, ver}, ErrCorrupt, "plain record name"},
		{"storage key NUL", []hEntry{{name: "archive/data.pkl", data: hPickle(hDict(hStr("w"), hTensor(hPid("FloatStorage", "0\x00x", 4), 0, []int64{4}, []int64{1})))}, st, ver}, ErrCorrupt, "plain record name"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := hZip(c.entries, nil)
			_, err := openBytes(t, b)
			wantErr(t, c.name, err, c.kind, c.msg)
			if scanBytes(t, b).Safe() {
				t.Fatal("scan says safe")
			}
		})
	}
}

// (e) Layout tricks: a fake end record in the comment, overlaps, offsets
// past the directory, ZIP64 sizes.
func TestHostileZipLayout(t *testing.T) {
	pkl := hPickle(hDict(hStr("w"), hTensor(hPid("FloatStorage", "0", 4), 0, []int64{4}, []int64{1})))
	es := []hEntry{{name: "archive/data.pkl", data: pkl}, {name: "archive/data/0", data: f32s(4)}, {name: "archive/version", data: []byte("3\n")}}
	good := hZip(es, nil)
	if _, err := openBytes(t, good); err != nil {
		t.Fatal(err)
	}
	if _, err := openBytes(t, hZip(es, []byte("a harmless comment"))); err != nil {
		t.Fatalf("comment: %v", err)
	}
	// miniz takes the LAST end signature with 22 bytes after it; a fake one
	// inside the comment whose own comment length does not fit was skipped
	// here, so the two readers saw different central directories.
	fake := make([]byte, 22)
	binary.LittleEndian.PutUint32(fake, sigEnd)
	binary.LittleEndian.PutUint16(fake[20:], 7) // does not reach the end
	_, err := openBytes(t, hZip(es, append(fake, "xx"...)))
	wantErr(t, "fake end record in comment", err, ErrCorrupt, "does not end the file")
	// trailing bytes after the end record (an append) are refused too
	_, err = openBytes(t, append(append([]byte(nil), good...), "junk"...))
	wantErr(t, "trailing junk", err, ErrCorrupt, "end of central directory")

	cdOff := int(binary.LittleEndian.Uint32(good[len(good)-6:]))
	central := func(i int) int { // offset of the i-th central header
		p := cdOff
		for ; i > 0; i-- {
			p += lenCentral + int(binary.LittleEndian.Uint16(good[p+28:]))
		}
		return p
	}
	mut := func(f func(b []byte)) []byte { b := append([]byte(nil), good...); f(b); return b }

	// two central entries pointing at one local header
	b := mut(func(b []byte) {
		copy(b[central(1)+42:], b[central(0)+42:central(0)+46])
	})
	_, err = openBytes(t, b)
	wantErr(t, "shared local header", err, ErrCorrupt, "")
	// a size that runs into the central directory
	b = mut(func(b []byte) {
		binary.LittleEndian.PutUint32(b[central(1)+20:], 1000)
		binary.LittleEndian.PutUint32(b[central(1)+24:], 1000)
	})
	_, err = openBytes(t, b)
	wantErr(t, "data into the directory", err, ErrCorrupt, "runs into the central directory")
	// a local header offset past the directory
	b = mut(func(b []byte) { binary.LittleEndian.PutUint32(b[central(2)+42:], uint32(len(good))) })
	_, err = openBytes(t, b)
	wantErr(t, "offset past directory", err, ErrCorrupt, "outside the archive data")
	// data of one entry overlapping the next entry's header
	b = mut(func(b []byte) {
		binary.LittleEndian.PutUint32(b[central(0)+20:], uint32(len(pkl)+10))
		binary.LittleEndian.PutUint32(b[central(0)+24:], uint32(len(pkl)+10))
	})
	_, err = openBytes(t, b)
	wantErr(t, "overlap", err, ErrCorrupt, "")

}

// (j)/(f) Record size must equal numel*itemsize exactly (torch writes it
// so, and legacy torch.load refuses any difference).
func TestHostileStorageSizes(t *testing.T) {
	pkl := hPickle(hDict(hStr("w"), hTensor(hPid("FloatStorage", "0", 4), 0, []int64{4}, []int64{1})))
	_, err := openBytes(t, hCheckpoint(pkl, "0", f32s(5)))
	wantErr(t, "longer record", err, ErrCorrupt, "persistent id says")
	_, err = openBytes(t, hCheckpoint(pkl, "0", f32s(3)))
	wantErr(t, "shorter record", err, ErrCorrupt, "persistent id says")
	// a view that would need more than the record
	pkl = hPickle(hDict(hStr("w"), hTensor(hPid("FloatStorage", "0", 4), 1, []int64{4}, []int64{1})))
	_, err = openBytes(t, hCheckpoint(pkl, "0", f32s(4)))
	wantErr(t, "view past the storage", err, ErrCorrupt, "does not fit")
}

// hLegacy writes a legacy checkpoint: magic, 1001, sys_info, obj, keys, storages.
func hLegacy(obj []byte, keys []string, storages ...[]byte) []byte {
	magic := cat(0x80, 2, 0x8a, 10, 0x6c, 0xfc, 0x9c, 0x46, 0xf9, 0x20, 0x6a, 0xa8, 0x50, 0x19, ".")
	proto := cat(0x80, 2, "M\xe9\x03.")
	info := hPickle(hDict(hStr("protocol_version"), "M\xe9\x03", hStr("little_endian"), 0x88,
		hStr("type_sizes"), hDict(hStr("short"), "K\x02", hStr("int"), "K\x04", hStr("long"), "K\x04")))
	kl := []byte("](")
	for _, k := range keys {
		kl = append(kl, hStr(k)...)
	}
	kl = append(kl, 'e')
	b := cat(magic, proto, info, obj, hPickle(kl))
	for _, s := range storages {
		b = append(b, s...)
	}
	return b
}

func hLegacyPid(typ, key string, numel int64) []byte {
	return cat("(", hStr("storage"), "ctorch\n"+typ+"\n", hStr(key), hStr("cpu"), hInt(numel), "NtQ")
}

func hLegacyStorage(numel int64, data []byte) []byte {
	return append(binary.LittleEndian.AppendUint64(nil, uint64(numel)), data...)
}

// (j) Legacy storages: header numel must equal the pid's numel; negative or
// huge counts, duplicates and overlap cannot happen silently.
func TestHostileLegacy(t *testing.T) {
	obj := func(numel int64) []byte {
		return hPickle(hDict(hStr("w"), hTensor(hLegacyPid("FloatStorage", "k", numel), 0, []int64{2}, []int64{1})))
	}
	ok := hLegacy(obj(2), []string{"k"}, hLegacyStorage(2, f32s(2)))
	c, err := openBytes(t, ok)
	if err != nil || c.Format != FormatLegacy || c.Lookup("w").Numel() != 2 {
		t.Fatalf("baseline: %v", err)
	}
	// the header says 3 elements, the pid 2: torch refuses ("wrong byte size");
	// the count is checked on the storage's first read
	_, err = openChecked(t, hLegacy(obj(2), []string{"k"}, hLegacyStorage(3, f32s(3))))
	wantErr(t, "header numel > pid numel", err, ErrCorrupt, "persistent id says")
	_, err = openChecked(t, hLegacy(obj(2), []string{"k"}, hLegacyStorage(1, f32s(1))))
	wantErr(t, "header numel < pid numel", err, ErrCorrupt, "")
	_, err = openChecked(t, hLegacy(obj(2), []string{"k"}, hLegacyStorage(-1, f32s(2))))
	wantErr(t, "negative numel", err, ErrCorrupt, "invalid element count")
	_, err = openChecked(t, hLegacy(obj(2), []string{"k"}, hLegacyStorage(1<<62, f32s(2))))
	wantErr(t, "huge numel", err, ErrCorrupt, "")
	_, err = openBytes(t, hLegacy(obj(-2), []string{"k"}, hLegacyStorage(2, f32s(2))))
	wantErr(t, "negative pid numel", err, ErrCorrupt, "numel")
	_, err = openBytes(t, hLegacy(obj(2), []string{"k", "k"}, hLegacyStorage(2, f32s(2)), hLegacyStorage(2, f32s(2))))
	wantErr(t, "key listed twice", err, ErrCorrupt, "listed twice")
	// a payload in the key-list pickle is refused even though it is read last
	bad := bytes.Replace(ok, []byte("](X\x01\x00\x00\x00ke."), []byte("cposix\nsystem\n)R."), 1)
	_, err = openBytes(t, bad)
	wantErr(t, "payload in key list", err, ErrNotAllowed, "posix.system")
}

// (k) One dtype (and one numel) per storage key, in zip and legacy files.
func TestHostileStorageKeyReuse(t *testing.T) {
	pkl := hPickle(hDict(
		hStr("a"), hTensor(hPid("FloatStorage", "0", 4), 0, []int64{4}, []int64{1}),
		hStr("b"), hTensor(hPid("IntStorage", "0", 4), 0, []int64{4}, []int64{1})))
	_, err := openBytes(t, hCheckpoint(pkl, "0", f32s(4)))
	wantErr(t, "two storage types", err, ErrCorrupt, "used as both")
	pkl = hPickle(hDict(
		hStr("a"), hTensor(hPid("FloatStorage", "0", 4), 0, []int64{4}, []int64{1}),
		hStr("b"), hTensor(hPid("FloatStorage", "0", 8), 0, []int64{8}, []int64{1})))
	_, err = openBytes(t, hCheckpoint(pkl, "0", f32s(8)))
	wantErr(t, "two numels", err, ErrCorrupt, "declared with numel")
	obj := hPickle(hDict(
		hStr("a"), hTensor(hLegacyPid("FloatStorage", "k", 2), 0, []int64{2}, []int64{1}),
		hStr("b"), hTensor(hLegacyPid("LongStorage", "k", 2), 0, []int64{2}, []int64{1})))
	_, err = openBytes(t, hLegacy(obj, []string{"k"}, hLegacyStorage(2, f32s(2))))
	wantErr(t, "legacy two storage types", err, ErrCorrupt, "used as both")
	// a dangerous global in the storage-type slot is named
	_, err = openBytes(t, hCheckpoint(hPickle(hDict(hStr("a"), hTensor(hPid("FloatStorage", "0", 4), 0, []int64{4}, []int64{1}))), "0", f32s(4)))
	if err != nil {
		t.Fatal(err)
	}
	evilPid := cat("(", hStr("storage"), "cos\nsystem\n", hStr("0"), hStr("cpu"), hInt(4), "tQ")
	_, err = openBytes(t, hCheckpoint(hPickle(hDict(hStr("a"), hTensor(evilPid, 0, []int64{4}, []int64{1}))), "0", f32s(4)))
	wantErr(t, "global in the storage slot", err, ErrNotAllowed, "os.system")
}

// (g) Memo tricks.
func TestHostileMemo(t *testing.T) {
	pid := hPid("FloatStorage", "0", 4)
	rebuild := "ctorch._utils\n_rebuild_tensor_v2\n("
	hooks := cat(0x89, "ccollections\nOrderedDict\n)R")
	// a list that contains itself, used as the size
	pkl := hPickle(hDict(hStr("w"), cat(rebuild, pid, "K\x00", "]q\x07h\x07a", "(K\x01t", hooks, "tR")))
	_, err := openBytes(t, hCheckpoint(pkl, "0", f32s(4)))
	wantErr(t, "self-containing size", err, ErrCorrupt, "size is not")
	// a list that contains itself, as a value: a cycle, never a hang
	pkl = hPickle(hDict(hStr("w"), "]q\x07h\x07a"))
	_, err = openBytes(t, hCheckpoint(pkl))
	wantErr(t, "self-containing value", err, ErrUnsupported, "contains itself")
	// a size list mutated after the REDUCE: torch, like this reader, uses the
	// size as it was when the tensor was rebuilt
	pkl = hPickle("}q\x01(", hStr("w"), rebuild, pid, "K\x00", "](K\x02eq\x02", "(K\x01t", hooks, "tR",
		hStr("x"), "h\x02u", "h\x02K\x02a0")
	c, err := openBytes(t, hCheckpoint(pkl, "0", f32s(4)))
	if err != nil {
		t.Fatal(err)
	}
	if w := c.Lookup("w"); len(w.Shape) != 1 || w.Shape[0] != 2 {
		t.Fatalf("shape %v", w.Shape)
	}
	// PUT overwrites an index; GET returns the latest value (as in CPython)
	v, err := decode(t, cat(0x80, 2, "K\x01q\x00K\x02q\x00h\x00\x86."), nil)
	if err != nil || v.(pickle.Tuple)[1] != int64(2) {
		t.Fatalf("PUT overwrite: %v %v", v, err)
	}
	// MEMOIZE after sparse PUTs uses len(memo), as CPython does
	v, err = decode(t, cat(0x80, 4, "K\x01r", le32(5), "K\x02", 0x94, "h\x01."), nil)
	if err != nil || v != int64(2) {
		t.Fatalf("MEMOIZE index: %v %v", v, err)
	}
	// GET of an index PUT to by a different, refused construct is not reachable
	if _, err := decode(t, cat(0x80, 2, "h\x00."), nil); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("undefined GET: %v", err)
	}
}

// (h) Huge numbers.
func TestHostileNumbers(t *testing.T) {
	// LONG4 of 1e6 bytes: refused by length before any allocation
	b := cat(0x80, 2, 0x8b, le32(1000000), make([]byte, 1000000), ".")
	_, err := decode(t, b, nil)
	wantErr(t, "LONG4 1e6", err, ErrLimit, "integer of")
	view := func(off int64, offBytes []byte, size, stride []byte) error {
		pid := hPid("FloatStorage", "0", 4)
		o := hInt(off)
		if offBytes != nil {
			o = offBytes
		}
		pkl := hPickle(hDict(hStr("w"), cat("ctorch._utils\n_rebuild_tensor_v2\n(", pid, o, size, stride,
			0x89, "ccollections\nOrderedDict\n)RtR")))
		_, err := openBytes(t, hCheckpoint(pkl, "0", f32s(4)))
		return err
	}
	long2p63 := cat(0x8a, 9, 0, 0, 0, 0, 0, 0, 0, 0x80, 0) // 2**63 (a big int)
	cases := []struct {
		name               string
		off                int64
		offB, size, stride []byte
		kind               error
		msg                string
	}{
		{"size 2^63", 0, nil, cat("(", long2p63, "t"), hInts(1), ErrCorrupt, "size is not"},
		{"size near 2^63", 0, nil, hInts(math.MaxInt64, 2), hInts(0, 0), ErrCorrupt, "overflows"},
		{"offset 2^63", 0, long2p63, hInts(1), hInts(1), ErrCorrupt, "storage offset"},
		{"huge offset", math.MaxInt64, nil, hInts(1), hInts(1), ErrCorrupt, ""},
		{"huge offset empty", math.MaxInt64 / 2, nil, hInts(0), hInts(1), ErrCorrupt, "past the end"},
		{"negative offset", -1, nil, hInts(1), hInts(1), ErrCorrupt, "negative storage offset"},
		{"negative size", 0, nil, hInts(-1), hInts(1), ErrCorrupt, "negative size"},
		{"negative stride", 3, nil, hInts(4), hInts(-1), ErrCorrupt, "negative stride"},
		{"stride overflow", 0, nil, hInts(3), hInts(math.MaxInt64), ErrCorrupt, "overflows"},
		{"zero stride, 2^40 elements", 0, nil, hInts(1 << 40), hInts(0), ErrLimit, "exceeds"},
		{"dims mismatch", 0, nil, hInts(2, 2), hInts(1), ErrCorrupt, "dims"},
		{"65 dims", 0, nil, hInts(make([]int64, 65)...), hInts(make([]int64, 65)...), ErrCorrupt, "at most 64"},
	}
	for _, c := range cases {
		wantErr(t, c.name, view(c.off, c.offB, c.size, c.stride), c.kind, c.msg)
	}
	// zero stride within the cap is a legal expand
	if err := view(0, nil, hInts(1000), hInts(0)); err != nil {
		t.Fatalf("expand: %v", err)
	}
}

// (i) Names that collide after flattening are refused, never merged.
func TestHostileFlattenCollisions(t *testing.T) {
	t1 := hTensor(hPid("FloatStorage", "0", 4), 0, []int64{4}, []int64{1})
	t2 := hTensor(hPid("FloatStorage", "1", 4), 0, []int64{4}, []int64{1})
	for name, pkl := range map[string][]byte{
		"dotted key vs nesting": hPickle(hDict(hStr("a.b"), t1, hStr("a"), hDict(hStr("b"), t2))),
		"True vs 'True'":        hPickle(hDict(hStr("True"), t1, 0x88, t2)),
		"None vs 'None'":        hPickle(hDict("N", t1, hStr("None"), t2)),
		"1 vs '1'":              hPickle(hDict("K\x01", t1, hStr("1"), t2)),
		"1.5 vs 1 . 5":          hPickle(hDict("G", binary.BigEndian.AppendUint64(nil, math.Float64bits(1.5)), t1, "K\x01", hDict("K\x05", t2))),
		"list index vs key":     hPickle(hDict(hStr("l.0"), t1, hStr("l"), "](", t2, "e")),
		"empty key":             hPickle(hDict(hStr(""), hDict(hStr("x"), t1), hStr("x"), t2)),
	} {
		_, err := openBytes(t, hCheckpoint(pkl, "0", f32s(4), "1", f32s(4)))
		wantErr(t, name, err, ErrUnsupported, "same name")
	}
	// unhashable tuple, NaN and bytes keys are refused
	for name, key := range map[string][]byte{
		"tuple": []byte("(]t"),
		"nan":   cat("G", binary.BigEndian.AppendUint64(nil, math.Float64bits(math.NaN()))),
		"bytes": cat("C", 1, "a"),
	} {
		_, err := openBytes(t, hCheckpoint(hPickle(hDict(key, t1)), "0", f32s(4)))
		wantErr(t, name+" key", err, ErrUnsupported, "dict key")
	}
}

// (m) FRAME: CPython's C unpickler only checks that the frame's bytes exist
// (opcodes may cross a frame boundary); a length past the end is refused.
func TestHostileFrames(t *testing.T) {
	frame := func(n uint64) []byte { return cat(0x95, binary.LittleEndian.AppendUint64(nil, n)) }
	if v, err := decode(t, cat(0x80, 4, frame(1), "K\x05."), nil); err != nil || v != int64(5) {
		t.Fatalf("short frame: %v %v", v, err)
	}
	_, err := decode(t, cat(0x80, 4, frame(1<<63), "K\x05."), nil)
	wantErr(t, "frame 2^63", err, ErrCorrupt, "FRAME")
	_, err = decode(t, cat(0x80, 4, frame(4), "K\x05."), nil)
	wantErr(t, "frame past the end", err, ErrCorrupt, "FRAME")
}

// (b) STACK_GLOBAL operands fetched from the memo, and globals in every
// position, are checked by both Open and Scan.
func TestHostileGlobalsEverywhere(t *testing.T) {
	cases := map[string][]byte{
		"memo STACK_GLOBAL":  cat(0x80, 4, 0x8c, 5, "posix", 0x94, "0", 0x8c, 6, "system", 0x94, "0h\x00h\x01", 0x93, "."),
		"global as dict key": hPickle(hDict("cos\nsystem\n", "N")),
		"global as value":    hPickle(hDict(hStr("a"), "cos\nsystem\n")),
		"global in hooks":    hPickle(hDict(hStr("w"), cat("ctorch._utils\n_rebuild_tensor_v2\n(", hPid("FloatStorage", "0", 4), "K\x00", hInts(4), hInts(1), 0x89, "}(", hStr("h"), "cos\nsystem\nu", "tR"))),
		"dotted name split":  hPickle("ctorch\n_utils.os.system\n"),
		"codecs nested":      hPickle("c_codecs\nencode\n(cos\nsystem\n", hStr("latin1"), "tR"),
	}
	for name, pkl := range cases {
		b := hCheckpoint(pkl, "0", f32s(4))
		_, err := openBytes(t, b)
		if !errors.Is(err, ErrNotAllowed) {
			t.Errorf("%s: Open: %v", name, err)
		}
		if rep := scanBytes(t, b); rep.Safe() || len(rep.NotAllowed()) == 0 {
			t.Errorf("%s: Scan: %+v", name, rep)
		}
	}
}

// countingReader counts the bytes read through it.
type countingReader struct {
	r io.ReaderAt
	n atomic.Int64
}

func (c *countingReader) ReadAt(p []byte, off int64) (int, error) {
	n, err := c.r.ReadAt(p, off)
	c.n.Add(int64(n))
	return n, err
}

// costs runs f on a reader of b and fails the test if it read more than
// maxRead bytes or allocated more than maxAlloc: what a call costs,
// counted (not timed), so that a regression to quadratic work fails
// whatever the machine's speed or load.
func costs(t *testing.T, what string, b []byte, maxRead, maxAlloc int64, f func(r io.ReaderAt, size int64)) {
	t.Helper()
	c := &countingReader{r: bytes.NewReader(b)}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f(c, int64(len(b)))
	runtime.ReadMemStats(&after)
	read, alloc := c.n.Load(), int64(after.TotalAlloc-before.TotalAlloc)
	t.Logf("%s: %d bytes read, %d allocated for a %d-byte file", what, read, alloc, len(b))
	if read > maxRead {
		t.Errorf("%s read %d bytes of a %d-byte file (at most %d)", what, read, len(b), maxRead)
	}
	if alloc > maxAlloc {
		t.Errorf("%s allocated %d bytes for a %d-byte file (at most %d)", what, alloc, len(b), maxAlloc)
	}
}

func openR(t *testing.T, r io.ReaderAt, size int64) (*Checkpoint, error) {
	t.Helper()
	return NewReader(r, size, "mem.pt")
}

func scanR(t *testing.T, r io.ReaderAt, size int64) *ScanReport {
	t.Helper()
	rep, err := Scan(r, size, "mem.pt")
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// (c) A bare pickle file of 200k two-byte pickles: each one used to get a
// fresh source that re-read a 64 KiB window (4.5 s here for 400 KB; minutes
// for a few MB), in Open and in Scan.
func TestHostileManyTinyPickles(t *testing.T) {
	b := bytes.Repeat([]byte("N."), 200000)
	b = append(b, "cposix\nsystem\n."...)
	n := int64(len(b))
	costs(t, "Open", b, 8*n, 128<<20, func(r io.ReaderAt, size int64) {
		_, err := openR(t, r, size)
		wantErr(t, "many pickles", err, ErrNotAllowed, "posix.system")
	})
	costs(t, "Scan", b, 8*n, 128<<20, func(r io.ReaderAt, size int64) {
		rep := scanR(t, r, size)
		if rep.Pickles != 200001 || strings.Join(rep.NotAllowed(), ",") != "posix.system" {
			t.Fatalf("%d pickles, %v", rep.Pickles, rep.NotAllowed())
		}
	})
}

// (c)/(e) Many central-directory entries pointing at one large pickle:
// every data.pkl candidate is decoded (to name a dangerous global first),
// which cost (entries x pickle size).
func TestHostileOverlappingPickleRecords(t *testing.T) {
	big := cat(0x80, 2, "]q\x00(", bytes.Repeat([]byte("N"), 500000), "e.")
	one := hZip([]hEntry{{name: "archive/data.pkl", data: big}}, nil)
	cdOff := int(binary.LittleEndian.Uint32(one[len(one)-6:]))
	rec := one[cdOff : len(one)-22]
	const k = 3000
	b := append([]byte(nil), one[:cdOff]...)
	for i := 0; i < k; i++ {
		b = append(b, rec...)
	}
	end := append([]byte(nil), one[len(one)-22:]...)
	binary.LittleEndian.PutUint16(end[8:], k)
	binary.LittleEndian.PutUint16(end[10:], k)
	binary.LittleEndian.PutUint32(end[12:], uint32(k*len(rec)))
	b = append(b, end...)
	n := int64(len(b))
	costs(t, "Open", b, 8*n, 512<<20, func(r io.ReaderAt, size int64) {
		_, err := openR(t, r, size)
		wantErr(t, "3000 aliases of one pickle", err, ErrCorrupt, "overlap")
	})
	costs(t, "Scan", b, 8*n, 512<<20, func(r io.ReaderAt, size int64) {
		if rep := scanR(t, r, size); rep.Safe() || rep.Pickles > 2 {
			t.Fatalf("pickles %d", rep.Pickles)
		}
	})
}

// (c) A DEFLATE data.pkl (refused, but inflated to look for a dangerous
// global) inflated up to MaxPickleBytes: 64 MiB of memory from a 64 KB file.
func TestHostileDeflateBomb(t *testing.T) {
	data := make([]byte, 64<<20)
	copy(data, "\x80\x02")
	b := hZip([]hEntry{{name: "archive/data.pkl", data: data, deflate: true}, {name: "archive/version", data: []byte("3\n")}}, nil)
	if len(b) > 1<<20 {
		t.Fatalf("bomb is %d bytes", len(b))
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := openBytes(t, b)
	runtime.ReadMemStats(&after)
	wantErr(t, "deflate bomb", err, ErrUnsupported, "compressed")
	if got := after.TotalAlloc - before.TotalAlloc; got > 32<<20 {
		t.Fatalf("Open of a %d-byte file allocated %d bytes", len(b), got)
	}
	runtime.ReadMemStats(&before)
	if scanBytes(t, b).Safe() {
		t.Fatal("scan says safe")
	}
	runtime.ReadMemStats(&after)
	if got := after.TotalAlloc - before.TotalAlloc; got > 64<<20 {
		t.Fatalf("Scan of a %d-byte file allocated %d bytes", len(b), got)
	}
	// a small compressed pickle is still inflated and its global named
	evil := hZip([]hEntry{{name: "archive/data.pkl", data: []byte("\x80\x02cposix\nsystem\n."), deflate: true}}, nil)
	_, err = openBytes(t, evil)
	wantErr(t, "compressed evil pickle", err, ErrNotAllowed, "posix.system")
}

// (c) Scan of a zip without a central directory walks local headers. Each
// .pkl member was decoded to the end of the file, so k headers glued into
// one never-ending pickle cost k x file size.
func TestHostileLocalHeaderWalk(t *testing.T) {
	var b []byte
	for i := 0; i < 20000; i++ {
		h := binary.LittleEndian.AppendUint32(nil, sigLocal)
		h = append(h, make([]byte, 22)...)               // version .. sizes: all zero (csize 0)
		h = binary.LittleEndian.AppendUint16(h, 5)       // name length
		h = binary.LittleEndian.AppendUint16(h, 1)       // extra length
		h = append(h, "a.pkl\n"...)                      // the extra is the newline ending PERSID's line
		h = append(h, bytes.Repeat([]byte("N0"), 10)...) // data: harmless opcodes
		b = append(b, h...)
	}
	costs(t, "Scan", b, 16*int64(len(b)), 128<<20, func(r io.ReaderAt, size int64) {
		if rep := scanR(t, r, size); rep.Safe() {
			t.Fatal("safe")
		}
	})
}

// (c) Memo references let a 12 KB pickle describe 8.1 million leaves (a list
// of 2700 references to a list of 3000 references to one tensor): Open used
// 3.3 GB and 16 s. Entries and name bytes are now also capped in proportion
// to the pickle's size.
func TestHostileLeafAmplification(t *testing.T) {
	pkl := cat(0x80, 2, hTensor(hPid("FloatStorage", "0", 4), 0, []int64{4}, []int64{1}), "q\x00](")
	for i := 0; i < 3000; i++ {
		pkl = append(pkl, "h\x00"...)
	}
	pkl = append(pkl, "eq\x01}(X\x01\x00\x00\x00x]("...)
	for i := 0; i < 2700; i++ {
		pkl = append(pkl, "h\x01"...)
	}
	pkl = append(pkl, "eu."...)
	costs(t, "DAG of 8.1M leaves", hCheckpoint(pkl, "0", f32s(4)), 1<<20, 256<<20, func(r io.ReaderAt, size int64) {
		_, err := openR(t, r, size)
		wantErr(t, "DAG of 8.1M leaves", err, ErrLimit, "entries")
	})

	// one 64 KiB key under 4096 references: 256 MiB of names from 70 KB
	key := strings.Repeat("k", 60<<10)
	pkl = cat(0x80, 2, "}(", hStr(key), "K\x01uq\x00](")
	for i := 0; i < 4096; i++ {
		pkl = append(pkl, "h\x00"...)
	}
	pkl = append(pkl, "e."...)
	costs(t, "long shared names", hCheckpoint(pkl), 1<<20, 64<<20, func(r io.ReaderAt, size int64) {
		_, err := openR(t, r, size)
		wantErr(t, "long shared names", err, ErrLimit, "names total")
	})

	// the same shapes at a legitimate scale still open
	pkl = cat(0x80, 2, hTensor(hPid("FloatStorage", "0", 4), 0, []int64{4}, []int64{1}), "q\x00](")
	for i := 0; i < 100; i++ {
		pkl = append(pkl, "h\x00"...)
	}
	pkl = append(pkl, "eq\x01}(X\x01\x00\x00\x00x]("...)
	for i := 0; i < 100; i++ {
		pkl = append(pkl, "h\x01"...)
	}
	pkl = append(pkl, "eu."...)
	if c, err := openBytes(t, hCheckpoint(pkl, "0", f32s(4))); err != nil || len(c.Tensors()) != 10000 {
		t.Fatalf("10k tied tensors: %v", err)
	}
}

// (c) A memo-shared 16 MiB string used as the module of 2000 STACK_GLOBALs
// (and the callee of as many REDUCEs): Scan concatenated module.name for
// every lookup, message and report entry (~100 GB of copying).
func TestHostileHugeGlobalNames(t *testing.T) {
	pkl := cat(0x80, 4, 0x8d, binary.LittleEndian.AppendUint64(nil, 16<<20), make([]byte, 16<<20), 0x94, "0")
	pkl = append(pkl, "]("...)
	for i := 0; i < 2000; i++ {
		pkl = append(pkl, "h\x00h\x00"...)
		pkl = append(pkl, 0x93)
		pkl = append(pkl, ")R"...)
	}
	pkl = append(pkl, "e."...)
	costs(t, "Scan", pkl, 4*int64(len(pkl)), 512<<20, func(r io.ReaderAt, size int64) {
		rep := scanR(t, r, size)
		if rep.Safe() || len(rep.Globals) != 2000 || len(rep.DangerousOpcodes) != 2000 {
			t.Fatalf("%d globals, %d opcodes", len(rep.Globals), len(rep.DangerousOpcodes))
		}
		if g := rep.Globals[0]; len(g.Module) > 1100 || !strings.HasSuffix(g.Module, "...") {
			t.Fatalf("module of %d bytes in the report", len(g.Module))
		}
	})
	costs(t, "Open", pkl, 6*int64(len(pkl)), 512<<20, func(r io.ReaderAt, size int64) {
		_, err := openR(t, r, size)
		wantErr(t, "huge global", err, ErrNotAllowed, "refusing global")
		var e *Error
		if errors.As(err, &e); len(e.Global) > 2100 {
			t.Fatalf("Error.Global of %d bytes", len(e.Global))
		}
	})
}

// torch compares the byteorder record with b'little' / b'big' exactly.
func TestHostileByteOrderRecord(t *testing.T) {
	pkl := hPickle(hDict(hStr("w"), hTensor(hPid("FloatStorage", "0", 4), 0, []int64{4}, []int64{1})))
	for rec, kind := range map[string]error{"little": nil, "big": ErrUnsupported, "little\n": ErrCorrupt, " big": ErrCorrupt, "LITTLE": ErrCorrupt} {
		b := hZip([]hEntry{{name: "archive/data.pkl", data: pkl}, {name: "archive/byteorder", data: []byte(rec)},
			{name: "archive/data/0", data: f32s(4)}, {name: "archive/version", data: []byte("3\n")}}, nil)
		_, err := openBytes(t, b)
		if (kind == nil) != (err == nil) || (kind != nil && !errors.Is(err, kind)) {
			t.Errorf("byteorder %q: got %v, want %v", rec, err, kind)
		}
	}
}
