package torch

import (
	"bytes"
	"encoding/binary"
	"errors"
	"github.com/gosafetensors/safetensors/torch/pickle"
	"math/big"
	"runtime"
	"strings"
	"testing"
)

// decode runs the strict machine over one pickle.
func decode(t testing.TB, b []byte, lim *Limits) (any, error) {
	t.Helper()
	if lim == nil {
		l := DefaultLimits()
		lim = &l
	}
	src := pickle.NewStream(bytes.NewReader(b), 0, int64(len(b)))
	return newVM(src, lim, "test.pkl", pidZip, nil, nil).run()
}

func le32(n uint32) []byte { return binary.LittleEndian.AppendUint32(nil, n) }

func TestPrimitiveOpcodes(t *testing.T) {
	cases := []struct {
		name string
		in   []byte
		want any
	}{
		{"none", cat(0x80, 2, "N."), nil},
		{"true", cat(0x80, 2, 0x88, "."), true},
		{"INT 01", []byte("I01\n."), true},
		{"INT 00", []byte("I00\n."), false},
		{"INT", []byte("I-42\n."), int64(-42)},
		{"INT big", []byte("I123456789012345678901234567890\n."), "123456789012345678901234567890"},
		{"LONG", []byte("L12L\n."), int64(12)},
		{"BININT neg", cat("J", le32(0xfffffffe), "."), int64(-2)},
		{"BININT1", cat("K", 200, "."), int64(200)},
		{"BININT2", cat("M", 0x34, 0x12, "."), int64(0x1234)},
		{"LONG1 neg", cat(0x8a, 1, 0xff, "."), int64(-1)},
		{"LONG1 2^70", cat(0x8a, 9, 0, 0, 0, 0, 0, 0, 0, 0, 0x40, "."), "1180591620717411303424"},
		{"LONG1 magic", cat(0x8a, 10, 0x6c, 0xfc, 0x9c, 0x46, 0xf9, 0x20, 0x6a, 0xa8, 0x50, 0x19, "."), "119547037146038801333356"},
		{"LONG4", cat(0x8b, le32(2), 0x00, 0x01, "."), int64(256)},
		{"BINFLOAT", cat("G", 0x40, 0x0a, 0, 0, 0, 0, 0, 0, "."), 3.25},
		{"FLOAT", []byte("F-1.5\n."), -1.5},
		{"SHORT_BINUNICODE", cat(0x8c, 2, "hé"[:2], "."), nil},
		{"BINUNICODE", cat("X", le32(3), "abc."), "abc"},
		{"BINUNICODE8", cat(0x8d, le32(1), le32(0), "z."), "z"},
		{"SHORT_BINSTRING", cat("U", 2, "ab."), "ab"},
		{"BINSTRING", cat("T", le32(2), "ab."), "ab"},
		{"STRING", []byte("S'a\\'b\\x41'\n."), "a'bA"},
		{"UNICODE", []byte("Vx\\u00e9\n."), "xé"},
		{"SHORT_BINBYTES", cat("C", 2, "ab."), []byte("ab")},
		{"BINBYTES", cat("B", le32(1), "q."), []byte("q")},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			v, err := decode(t, c.in, nil)
			if c.name == "SHORT_BINUNICODE" {
				if err == nil {
					t.Fatal("want error for invalid UTF-8")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			switch w := c.want.(type) {
			case []byte:
				if !bytes.Equal(v.([]byte), w) {
					t.Fatalf("got %v", v)
				}
			case string:
				if b, ok := v.(*big.Int); ok {
					if b.String() != w {
						t.Fatalf("got %v", b)
					}
				} else if v != w {
					t.Fatalf("got %#v, want %#v", v, w)
				}
			default:
				if v != c.want {
					t.Fatalf("got %#v, want %#v", v, c.want)
				}
			}
		})
	}
}

func TestContainersAndMemo(t *testing.T) {
	// {'a': [1, 2], 'b': (1, 2, 3, 4), 'c': <memo of the list>}
	in := cat(0x80, 2, "}q\x00(", "X", le32(1), "a", "](K\x01K\x02eq\x01",
		"X", le32(1), "b", "(K\x01K\x02K\x03K\x04t",
		"X", le32(1), "c", "h\x01", "u.")
	v, err := decode(t, in, nil)
	if err != nil {
		t.Fatal(err)
	}
	d := v.(*pickle.Dict)
	if len(d.Keys) != 3 || d.Values[0] != d.Values[2] || len(d.Values[1].(pickle.Tuple)) != 4 {
		t.Fatalf("got %#v", d)
	}
	// MEMOIZE + STACK_GLOBAL from memo (allowed name)
	in = cat(0x80, 4, 0x8c, 11, "collections", 0x94, 0x8c, 11, "OrderedDict", 0x94, "h\x00h\x01", 0x93, ")R.")
	v, err = decode(t, in, nil)
	if err != nil {
		t.Fatal(err)
	}
	if d, ok := v.(*pickle.Dict); !ok || d.Type != "OrderedDict" {
		t.Fatalf("got %#v", v)
	}
	// the mark hides the stack below it, like CPython's metastack
	if _, err := decode(t, cat("N(R."), nil); err == nil {
		t.Fatal("REDUCE reached below a MARK")
	}
	// POP with an empty frame pops the mark (CPython semantics)
	if v, err := decode(t, cat("K\x07(0."), nil); err != nil || v != int64(7) {
		t.Fatalf("got %v %v", v, err)
	}
	// undefined memo
	if _, err := decode(t, cat("h\x05."), nil); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("got %v", err)
	}
}

// TestInertValues (14.13): sets, frozensets, bytearrays and tuple keys,
// which torch.save writes for such values, decode as inert values.
func TestInertValues(t *testing.T) {
	v, err := decode(t, cat(0x80, 4, 0x8f, "(K\x01K\x02", 0x90, "."), nil)
	if s, ok := v.(*pickle.Set); err != nil || !ok || s.Frozen || len(s.Items) != 2 {
		t.Errorf("set: %#v %v", v, err)
	}
	v, err = decode(t, cat(0x80, 4, "(K\x01", 0x91, "."), nil)
	if s, ok := v.(*pickle.Set); err != nil || !ok || !s.Frozen || len(s.Items) != 1 {
		t.Errorf("frozenset: %#v %v", v, err)
	}
	v, err = decode(t, cat(0x80, 5, 0x96, le32(2), le32(0), "ab."), nil)
	if b, ok := v.(pickle.ByteArray); err != nil || !ok || string(b) != "ab" {
		t.Errorf("bytearray: %#v %v", v, err)
	}
	v, err = decode(t, cat("}(X", le32(1), "aK\x01tK\x03s."), nil)
	if d, ok := v.(*pickle.Dict); err != nil || !ok || len(d.Keys) != 1 {
		t.Errorf("tuple key: %#v %v", v, err)
	}
}

func TestRefusals(t *testing.T) {
	cases := []struct {
		name string
		in   []byte
		kind error
		msg  string
	}{
		{"GLOBAL", []byte("cposix\nsystem\n."), ErrNotAllowed, "refusing global posix.system"},
		{"STACK_GLOBAL", cat(0x80, 4, 0x8c, 2, "os", 0x8c, 6, "system", 0x93, "."), ErrNotAllowed, "os.system"},
		{"STACK_GLOBAL non-str", cat(0x80, 4, "K\x01K\x02", 0x93, "."), ErrCorrupt, "not strings"},
		{"INST", []byte("(S'x'\nios\nsystem\n."), ErrNotAllowed, "INST os.system"},
		{"OBJ", cat("(ccollections\nOrderedDict\no."), ErrNotAllowed, "OBJ collections.OrderedDict"},
		{"NEWOBJ", cat(0x80, 2, "ccollections\nOrderedDict\n)", 0x81, "."), ErrNotAllowed, "NEWOBJ"},
		{"NEWOBJ_EX", cat(0x80, 4, "ccollections\nOrderedDict\n)}", 0x92, "."), ErrNotAllowed, "NEWOBJ_EX"},
		{"EXT1", cat(0x80, 2, 0x82, 42, "."), ErrNotAllowed, "<copyreg-extension>.42"},
		{"EXT2", cat(0x80, 2, 0x83, 1, 1, "."), ErrNotAllowed, "<copyreg-extension>.257"},
		{"EXT4", cat(0x80, 2, 0x84, le32(70000), "."), ErrNotAllowed, "<copyreg-extension>.70000"},
		{"PERSID", []byte("P1\n."), ErrUnsupported, "PERSID"},
		{"huge BYTEARRAY8", cat(0x80, 5, 0x96, le32(0xfffffff0), le32(0), "abc."), ErrCorrupt, "exceeds"},
		{"NEXT_BUFFER", cat(0x80, 5, 0x97, "."), ErrUnsupported, "NEXT_BUFFER"},
		{"READONLY_BUFFER", cat(0x80, 5, "N", 0x98, "."), ErrUnsupported, "READONLY_BUFFER"},
		{"ADDITEMS onto a list", cat(0x80, 4, "](N", 0x90, "."), ErrNotAllowed, "ADDITEMS onto a list"},
		{"ADDITEMS onto a frozenset", cat(0x80, 4, "(", 0x91, "(N", 0x90, "."), ErrNotAllowed, "ADDITEMS onto a frozenset"},
		{"undefined", cat(0x80, 2, 0xff), ErrCorrupt, "unknown opcode 0xff"},
		{"protocol 6", cat(0x80, 6, "N."), ErrUnsupported, "protocol 6"},
		{"call storage class", cat("ctorch\nFloatStorage\n)R."), ErrNotAllowed, "torch.FloatStorage"},
		{"REDUCE on result", cat("ccollections\nOrderedDict\n)R)R."), ErrNotAllowed, "REDUCE on a OrderedDict"},
		{"BUILD on dict", cat("}}b."), ErrNotAllowed, "BUILD on a dict"},
		{"BUILD tuple state", cat("ccollections\nOrderedDict\n)R)b."), ErrNotAllowed, "BUILD with a tuple"},
		{"APPEND on dict", cat("}Na."), ErrNotAllowed, "APPEND onto a dict"},
		{"SETITEM on list", cat("]NNs."), ErrNotAllowed, "SETITEM onto a list"},
		{"codecs other encoding", cat("c_codecs\nencode\nX", le32(1), "aX", le32(5), "rot13\x86R."), ErrNotAllowed, "latin1"},
		{"unsupported global", cat("ctorch._utils\n_rebuild_qtensor\n."), ErrUnsupported, "torch._utils._rebuild_qtensor"},
		{"numpy", cat("cnumpy\nndarray\n."), ErrNotAllowed, "numpy.ndarray"},
		{"persid module", cat("(X", le32(6), "moduleK\x01tQ."), ErrCorrupt, "'storage'"},
		{"huge string", cat("X", le32(0xfffffff0), "abc"), ErrCorrupt, "exceeds"},
		{"huge BINBYTES8", cat(0x8e, le32(0), le32(1), "abc"), ErrCorrupt, "exceeds"},
		{"huge LONG4", cat(0x8b, le32(1<<30), "abc"), ErrLimit, "integer"},
		{"negative BINSTRING", cat("T", le32(0xffffffff), "abc"), ErrCorrupt, "negative"},
		{"huge FRAME", cat(0x80, 4, 0x95, le32(100), le32(0), "N."), ErrCorrupt, "FRAME"},
		{"truncated", cat(0x80, 2, "X", le32(2), "a"), ErrCorrupt, "exceeds"},
		{"no STOP", cat(0x80, 2, "N"), ErrCorrupt, "unexpected end"},
		{"stack underflow", cat(0x80, 2, "R"), ErrCorrupt, "underflow"},
		{"odd dict", cat("(Nd."), ErrCorrupt, "odd"},
		{"unhashable tuple key", cat("}(]tNs."), ErrUnsupported, "key of type tuple"},
		{"deep tuple key", cat("}N\x85\x85\x85\x85\x85Ns."), ErrUnsupported, "key of type tuple"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := decode(t, c.in, nil)
			if err == nil {
				t.Fatal("decoded without error")
			}
			if !errors.Is(err, c.kind) || !strings.Contains(err.Error(), c.msg) {
				t.Fatalf("got %v (want %v containing %q)", err, c.kind, c.msg)
			}
			var e *Error
			if !errors.As(err, &e) || e.Offset < 0 {
				t.Fatalf("no offset in %v", err)
			}
		})
	}
}

func TestLimits(t *testing.T) {
	lim := DefaultLimits()
	lim.MaxMemo = 10
	var b []byte
	b = append(b, 0x80, 4)
	for i := 0; i < 20; i++ {
		b = append(b, 'N', 0x94)
	}
	b = append(b, '.')
	if _, err := decode(t, b, &lim); !errors.Is(err, ErrLimit) {
		t.Fatalf("memo: %v", err)
	}
	lim = DefaultLimits()
	lim.MaxStack = 100
	if _, err := decode(t, append(bytes.Repeat([]byte("N"), 200), '.'), &lim); !errors.Is(err, ErrLimit) {
		t.Fatalf("stack: %v", err)
	}
	lim = DefaultLimits()
	lim.MaxMarks = 100
	if _, err := decode(t, append(bytes.Repeat([]byte("("), 200), '.'), &lim); !errors.Is(err, ErrLimit) {
		t.Fatalf("marks: %v", err)
	}
	lim = DefaultLimits()
	lim.MaxObjects = 100
	if _, err := decode(t, append(bytes.Repeat([]byte("N0"), 200), 'N', '.'), &lim); !errors.Is(err, ErrLimit) {
		t.Fatalf("objects: %v", err)
	}
	lim = DefaultLimits()
	lim.MaxStringBytes = 10
	if _, err := decode(t, cat("X", le32(20), strings.Repeat("a", 20), "."), &lim); !errors.Is(err, ErrLimit) {
		t.Fatalf("string: %v", err)
	}
}

// TestHugeLengthDoesNotAllocate checks that a 4 GiB claimed length fails
// before anything of that size is allocated.
func TestHugeLengthDoesNotAllocate(t *testing.T) {
	for _, in := range [][]byte{
		cat("X", le32(0xfffffff0), "abc"),
		cat(0x8d, le32(0), le32(1), "abc"),
		cat(0x8e, le32(0xffffffff), le32(0x7fffffff), "abc"),
		cat("B", le32(0xffffffff), "abc"),
	} {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		for i := 0; i < 10; i++ {
			if _, err := decode(t, in, nil); err == nil {
				t.Fatal("no error")
			}
		}
		runtime.ReadMemStats(&after)
		if d := after.TotalAlloc - before.TotalAlloc; d > 4<<20 {
			t.Fatalf("allocated %d bytes for a claimed huge string", d)
		}
	}
	in := cat("X", le32(0xfffffff0), "abc")
	allocs := testing.AllocsPerRun(20, func() { decode(t, in, nil) })
	if allocs > 40 {
		t.Fatalf("%v allocations", allocs)
	}
}

// TestDeepNesting: 50,000 nested lists decode (iteratively) and flattening
// stops at MaxDepth without recursion.
func TestDeepNesting(t *testing.T) {
	const depth = 50000
	var b []byte
	b = append(b, 0x80, 2)
	for i := 0; i < depth; i++ {
		b = append(b, ']')
	}
	for i := 0; i < depth-1; i++ {
		b = append(b, 'a')
	}
	b = append(b, '.')
	v, err := decode(t, b, nil)
	if err != nil {
		t.Fatal(err)
	}
	lim := DefaultLimits()
	c := &Checkpoint{}
	if err := c.build(v, nil, "test.pkl", &lim); !errors.Is(err, ErrLimit) {
		t.Fatalf("build: %v", err)
	}
	lim.MaxDepth = depth + 10
	c = &Checkpoint{}
	if err := c.build(v, nil, "test.pkl", &lim); !errors.Is(err, ErrLimit) {
		t.Fatalf("build with a high depth limit: %v", err)
	}
	// 5,000 levels fit in the name caps and are walked without recursion
	const d2 = 5000
	b = append(b[:0], 0x80, 2)
	for i := 0; i < d2; i++ {
		b = append(b, ']')
	}
	b = append(b, 'N')
	for i := 0; i < d2; i++ {
		b = append(b, 'a')
	}
	b = append(b, '.')
	if v, err = decode(t, b, nil); err != nil {
		t.Fatal(err)
	}
	c = &Checkpoint{}
	if err := c.build(v, nil, "test.pkl", &lim); err != nil {
		t.Fatal(err)
	}
	if len(c.Entries) != 1 || c.Entries[0].Kind != "none" || len(c.Entries[0].Name) != 2*d2-1 {
		t.Fatalf("entries %d", len(c.Entries))
	}
}

func TestCycleAndDAG(t *testing.T) {
	// l = []; l.append(l)
	v, err := decode(t, cat(0x80, 2, "]q\x00h\x00a."), nil)
	if err != nil {
		t.Fatal(err)
	}
	lim := DefaultLimits()
	if err := (&Checkpoint{}).build(v, nil, "x", &lim); !errors.Is(err, ErrUnsupported) {
		t.Fatalf("cycle: %v", err)
	}
	// l0=[1]; l1=[l0,l0]; ... 40 levels: 2^40 leaves must hit MaxEntries, not run forever
	b := cat(0x80, 2, "](K\x01eq\x00")
	for i := 0; i < 40; i++ {
		b = append(b, cat("](h\x00h\x00eq\x00")...)
	}
	b = append(b, '.')
	v, err = decode(t, b, nil)
	if err != nil {
		t.Fatal(err)
	}
	lim.MaxEntries = 1 << 16
	if err := (&Checkpoint{}).build(v, nil, "x", &lim); !errors.Is(err, ErrLimit) {
		t.Fatalf("dag: %v", err)
	}
}

func TestDictKeysPythonEquality(t *testing.T) {
	// {1: 'a', True: 'b', 1.0: 'c'} is one key in Python
	v, err := decode(t, cat("}(K\x01X", le32(1), "a", 0x88, "X", le32(1), "b", "G", 0x3f, 0xf0, 0, 0, 0, 0, 0, 0, "X", le32(1), "cu."), nil)
	if err != nil {
		t.Fatal(err)
	}
	d := v.(*pickle.Dict)
	if len(d.Keys) != 1 || d.Keys[0] != int64(1) || d.Values[0] != "c" {
		t.Fatalf("got %v %v", d.Keys, d.Values)
	}
}

func TestSecondPickleAfterStopIsChecked(t *testing.T) {
	in := cat(0x80, 2, "K\x01.", 0x80, 2, "cposix\nsystem\n)R.")
	_, err := NewReader(bytes.NewReader(in), int64(len(in)), "two.pkl")
	if !errors.Is(err, ErrNotAllowed) || !strings.Contains(err.Error(), "posix.system") {
		t.Fatalf("got %v", err)
	}
	rep, err := Scan(bytes.NewReader(in), int64(len(in)), "two.pkl")
	if err != nil || rep.Safe() || rep.Pickles != 2 {
		t.Fatalf("scan %+v %v", rep, err)
	}
}

func TestScanRecordsEverything(t *testing.T) {
	// two dangerous globals, a REDUCE on each, an INST and an EXT1 in one pickle
	in := cat(0x80, 2, "(cposix\nsystem\nX", le32(1), "a\x85R",
		"cbuiltins\nexec\nX", le32(1), "b\x85R",
		"(ios\nsystem\n", 0x82, 7, "l.")
	rep, err := Scan(bytes.NewReader(in), int64(len(in)), "x.pkl")
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(rep.NotAllowed(), ",")
	if got != "posix.system,builtins.exec,os.system,<copyreg-extension>.7" {
		t.Fatalf("globals %s", got)
	}
	var ops []string
	for _, o := range rep.DangerousOpcodes {
		ops = append(ops, o.Opcode+":"+o.Target)
	}
	if strings.Join(ops, ",") != "REDUCE:posix.system,REDUCE:builtins.exec,INST:os.system,EXT1:<copyreg-extension>.7" {
		t.Fatalf("opcodes %v", ops)
	}
	if rep.Safe() {
		t.Fatal("safe")
	}
}
