package torch

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// The --allow fixtures of testdata/allow are generated here (go test
// ./torch -run TestAllowFixtures -update rewrites them and INDEX.json;
// go generate runs it). Without -update the test regenerates each file and
// requires it to equal the committed one, then checks every INDEX.json
// entry against Scan and Open with its Allow list. TestAllowOracle
// (oracle_test.go) holds the same files, and the gadgets of AllowGadget,
// against real torch.

const allowDir = testdata + "/allow"

// allowFixture is one line of testdata/allow/INDEX.json.
type allowFixture struct {
	Name        string   `json:"name"`
	Attack      string   `json:"attack"`
	Allow       []string `json:"allow"`
	ScanVerdict string   `json:"scan_verdict"` // with Allow
	Names       string   `json:"names"`        // what the dangerous finding must mention ("" for clean)
	Torch       string   `json:"torch"`        // what torch.load does with Allow allowed: "loads", "calls", "fails"
	Note        string   `json:"note,omitempty"`

	data []byte
}

// Pickle pieces (protocol 2) for objects of allowed classes.
const (
	opNamespace   = "cargparse\nNamespace\n)R"
	opSimpleNS    = "ctypes\nSimpleNamespace\n)R"
	opByteArray   = "c__builtin__\nbytearray\n"
	opOrderedDict = "ccollections\nOrderedDict\n"
)

// allowCkpt is the zip checkpoint {"w": F32[4], "x": <obj>}.
func allowCkpt(obj ...any) []byte {
	pkl := hPickle(hDict(hStr("w"), hTensor(hPid("FloatStorage", "0", 4), 0, []int64{4}, []int64{1}), hStr("x"), cat(obj...)))
	return hCheckpoint(pkl, "0", f32s(4))
}

// stateDict is the pickle of {k: v} (v already encoded).
func stateDict(k string, v any) []byte { return cat("}", hStr(k), v, "s") }

func allowFixtures() []allowFixture {
	ns := []string{"argparse.Namespace"}
	dangerous := func(name, names, torch, attack string, obj ...any) allowFixture {
		return allowFixture{Name: name, Attack: attack, Allow: ns, ScanVerdict: "dangerous", Names: names, Torch: torch, data: allowCkpt(obj...)}
	}
	return []allowFixture{
		dangerous("ns_setstate_dict.pt", "__setstate__", "calls",
			"F4: BUILD {'__setstate__': bytearray} on an allowed argparse.Namespace, then BUILD 7: CPython's load_build finds __setstate__ on the instance and calls bytearray(7) (the red team's 10**12 runs out of memory)",
			opNamespace, stateDict("__setstate__", opByteArray), "bK\x07b"),
		dangerous("ns_setstate_slots.pt", "__setstate__", "calls",
			"F4: the same through the (None, slotstate) form: load_build setattrs __setstate__ on the instance",
			opNamespace, "N", stateDict("__setstate__", opByteArray), "\x86bK\x07b"),
		dangerous("ns_setstate_both.pt", "__setstate__", "calls",
			"F4: the (dict, slotstate) form with __setstate__ in the dict half",
			opNamespace, stateDict("__setstate__", opByteArray), "}\x86bK\x07b"),
		dangerous("ns_reduce_ex.pt", "__reduce_ex__", "loads",
			"BUILD {'__reduce_ex__': bytearray}: torch.load returns, and whoever pickles or copies the object (torch.save of the checkpoint) calls bytearray",
			opNamespace, stateDict("__reduce_ex__", opByteArray), "b"),
		dangerous("ns_class_slots.pt", "__class__", "fails",
			"the slot state sets __class__ (setattr swaps the object's type; torch 1.13 refuses this one pair with a TypeError)",
			opNamespace, "N", stateDict("__class__", opOrderedDict), "\x86b"),
		{Name: "simplens_setstate.pt", Allow: []string{"types.SimpleNamespace"}, ScanVerdict: "dangerous", Names: "__setstate__", Torch: "calls",
			Attack: "F4 on types.SimpleNamespace (vetted for --allow): BUILD {'__setstate__': bytearray} then BUILD 7",
			data:   allowCkpt(opSimpleNS, stateDict("__setstate__", opByteArray), "bK\x07b")},
		{Name: "ns_two_builds.pt", Allow: ns, ScanVerdict: "clean", Torch: "loads", data: allowCkpt(opNamespace, stateDict("lr", hInt(1)), "b", stateDict("lr", hInt(2)), "b"),
			Attack: "control: two BUILDs of plain attributes on an allowed Namespace (the class's own update, no call from data)"},
		{Name: "defaultdict_factory.pt", Allow: []string{"collections.defaultdict"}, ScanVerdict: "clean", Torch: "loads",
			data:   allowCkpt("ccollections\ndefaultdict\n(", opByteArray, "tR"),
			Attack: "control: collections.defaultdict(bytearray): the factory is an allowlisted class, called later with no arguments (an empty bytearray)"},
		{Name: "bytes_call.pt", Allow: []string{"builtins.bytes"}, ScanVerdict: "dangerous", Names: "builtins.bytes called", Torch: "loads",
			data:   allowCkpt("cbuiltins\nbytes\n(K\x07tR"),
			Attack: "builtins.bytes allowed (as a value) and called: bytes(7) here, bytes(10**12) allocates a terabyte",
			Note:   "torch calls bytes(7); scan refuses any call of a value-only name"},
		{Name: "defaultdict_args_dunder.pt", Allow: []string{"collections.defaultdict"}, ScanVerdict: "dangerous", Names: "__setstate__", Torch: "loads",
			data:   allowCkpt("ccollections\ndefaultdict\n(N", stateDict("__setstate__", opByteArray), "tR"),
			Attack: "an allowed class called with a dict whose key is __setstate__: a constructor that sets items as attributes (EasyDict, AttrDict) arms the next BUILD",
			Note:   "conservative: defaultdict keeps it as an item, so torch loads it without a call; scan cannot know what a constructor does with a dict"},
	}
}

func TestAllowFixtures(t *testing.T) {
	fx := allowFixtures()
	if *updateCrafted {
		if err := os.MkdirAll(allowDir, 0o755); err != nil {
			t.Fatal(err)
		}
		for _, f := range fx {
			if err := os.WriteFile(filepath.Join(allowDir, f.Name), f.data, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		b, _ := json.MarshalIndent(fx, "", "  ")
		if err := os.WriteFile(filepath.Join(allowDir, "INDEX.json"), append(b, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range fx {
		b, err := os.ReadFile(filepath.Join(allowDir, f.Name))
		if err != nil || !bytes.Equal(b, f.data) {
			t.Errorf("%s: committed file differs from the generator (run go test ./torch -run TestAllowFixtures -update): %v", f.Name, err)
		}
	}
	var idx []allowFixture
	b, err := os.ReadFile(filepath.Join(allowDir, "INDEX.json"))
	if err == nil {
		err = json.Unmarshal(b, &idx)
	}
	if err != nil || len(idx) != len(fx) {
		t.Fatalf("INDEX.json: %v (%d entries, the generator %d)", err, len(idx), len(fx))
	}
	for _, f := range idx {
		t.Run(f.Name, func(t *testing.T) {
			path := filepath.Join(allowDir, f.Name)
			rep, err := ScanFile(path, WithAllow(f.Allow...))
			if err != nil {
				t.Fatal(err)
			}
			if rep.Verdict() != f.ScanVerdict {
				t.Fatalf("scan --allow %v: %s, want %s; opcodes %+v problems %q", f.Allow, rep.Verdict(), f.ScanVerdict, rep.DangerousOpcodes, rep.Problems)
			}
			c, err := Open(path, WithAllow(f.Allow...))
			if f.ScanVerdict == VerdictClean {
				if err != nil {
					t.Fatalf("Open refused a clean file: %v", err)
				}
				c.Close()
				return
			}
			if !errors.Is(err, ErrNotAllowed) || !strings.Contains(err.Error(), f.Names) {
				t.Errorf("Open: %v, want ErrNotAllowed naming %s", err, f.Names)
			}
			found := false
			for _, o := range rep.DangerousOpcodes {
				found = found || strings.Contains(o.Target, f.Names)
			}
			if !found {
				t.Errorf("no dangerous opcode names %s: %+v", f.Names, rep.DangerousOpcodes)
			}
		})
	}
}

// AllowGadget returns the i-th pseudo-random checkpoint of the gadget
// family of seed: an object of an allowed class given BUILD states of each
// form (dict, (None, slots), (dict, slots)) that set dunder and plain names
// to allowed callables or data, then more BUILDs, or constructor arguments
// that hold such dicts; and the globals to allow. TestAllowOracle judges
// each with real torch.
func AllowGadget(seed uint64, i int) (data []byte, allow []string, desc string) {
	rng := rand.New(rand.NewPCG(seed, uint64(i)))
	pick := func(s ...string) string { return s[rng.IntN(len(s))] }
	cls := pick("argparse.Namespace", "types.SimpleNamespace")
	ctor := map[string]string{"argparse.Namespace": opNamespace, "types.SimpleNamespace": opSimpleNS}[cls]
	allow = []string{cls}
	var ops []any
	var parts []string
	state := func() {
		k := pick("__setstate__", "__setstate__", "__reduce_ex__", "__class__", "__dict__", "lr", "_x", "extend")
		v, vd := []byte(opByteArray), "bytearray"
		switch rng.IntN(4) {
		case 0:
			v, vd = hInt(7), "7"
		case 1:
			v, vd = []byte(opOrderedDict), "OrderedDict"
		}
		d := stateDict(k, v)
		switch rng.IntN(3) {
		case 0:
			ops = append(ops, d, "b")
			parts = append(parts, fmt.Sprintf("BUILD {%s: %s}", k, vd))
		case 1:
			ops = append(ops, "N", d, "\x86b")
			parts = append(parts, fmt.Sprintf("BUILD (None, {%s: %s})", k, vd))
		default:
			ops = append(ops, d, "}\x86b")
			parts = append(parts, fmt.Sprintf("BUILD ({%s: %s}, {})", k, vd))
		}
	}
	if rng.IntN(4) == 0 {
		// a defaultdict made from a dict: the constructor keeps it as items
		allow = []string{"collections.defaultdict"}
		k := pick("__setstate__", "lr")
		ops = append(ops, "ccollections\ndefaultdict\n(N", stateDict(k, opByteArray), "tR")
		parts = append(parts, fmt.Sprintf("defaultdict(None, {%s: bytearray})", k))
	} else {
		ops = append(ops, ctor)
		parts = append(parts, cls+"()")
		for n := 1 + rng.IntN(2); n > 0; n-- {
			state()
		}
		switch rng.IntN(3) {
		case 0:
			ops = append(ops, "K\x07b")
			parts = append(parts, "BUILD 7")
		case 1:
			ops = append(ops, "}b")
			parts = append(parts, "BUILD {}")
		}
	}
	return allowCkpt(ops...), allow, strings.Join(parts, ", ")
}

// TestWithAllowRefusesCode (F3 of the red-team round judged by torch):
// WithAllow exists for inert data classes; a name that imports, loads,
// compiles, evaluates or runs code, a module, an attribute chain, or any
// function off the vetted list is an ErrOption naming the name and why.
func TestWithAllowRefusesCode(t *testing.T) {
	for name, why := range map[string]string{
		"torch.storage._load_from_bytes":                "nested pickle",
		"torch.load":                                    "full unpickler",
		"numpy.load":                                    "unpickles",
		"pydoc.locate":                                  "module pydoc",
		"dill.loads":                                    "module dill",
		"yaml.load":                                     "module yaml",
		"copyreg._reconstructor":                        "module copyreg",
		"copy_reg._reconstructor":                       "module copy_reg",
		"dbhash.Foo":                                    "Python 3 import dbm.bsd.Foo, and module dbm (of dbm.bsd)",
		"_winreg.HKEYType":                              "winreg.HKEYType, and module winreg",
		"torch.utils.cpp_extension.load_inline":         "module torch.utils.cpp_extension",
		"torch.fx.graph_module._forward_from_src":       "module torch.fx (of torch.fx.graph_module)",
		"torch.fx.GraphModule":                          "module torch.fx",
		"numpy.testing._private.utils.runstring":        "module numpy.testing",
		"logging.config.listen":                         "module logging",
		"posixpath.os":                                  "os is a module",
		"torch.serialization":                           "serialization is not a class name",
		"torch.nn":                                      "nn is not a class name",
		"commands.Popen":                                "module commands",
		"__builtin__.reduce":                            "builtins.reduce is not one of the inert builtin types",
		"__builtin__.getattr":                           "builtins.getattr is not one of the inert builtin types",
		"builtins.map":                                  "calls the function",
		"numpy.DataSource":                              "opens files",
		"zipfile.ZipFile":                               "module zipfile",
		"io.FileIO":                                     "module io",
		"ctypes.CDLL":                                   "module ctypes",
		"types.FunctionType":                            "module types",
		"typing.ForwardRef":                             "module typing",
		"functools.partial":                             "module functools",
		"weakref.finalize":                              "module weakref",
		"mylib.helpers.build_model":                     "build_model is not a class name",
		"torch.utils.benchmark.Timer":                   "module torch.utils.benchmark",
		"torch._utils._rebuild_qtensor":                 "quantized",
		"numpy.core.multiarray._frombuffer_and_reshape": "not a class name",
	} {
		_, err := Scan(bytes.NewReader(nil), 0, "", WithAllow(name))
		if !errors.Is(err, ErrOption) || !strings.Contains(err.Error(), name) || !strings.Contains(err.Error(), why) {
			t.Errorf("WithAllow(%q): %v, want ErrOption naming it and saying %q", name, err, why)
		}
	}
	for _, name := range []string{"argparse.Namespace", "numpy.core.multiarray.scalar", "numpy.dtype", "numpy.ndarray",
		"numpy._core.multiarray._reconstruct", "collections.defaultdict", "builtins.int", "types.SimpleNamespace",
		"omegaconf.dictconfig.DictConfig", "__main__.Config", "pathlib.PosixPath", "builtins.set", "collections.OrderedDict",
		"UserDict.UserDict", "transformers.training_args.TrainingArguments", "torch.nn.modules.linear._Private"} {
		if _, err := Scan(bytes.NewReader(nil), 0, "", WithAllow(name)); err != nil && errors.Is(err, ErrOption) {
			t.Errorf("WithAllow(%q): %v, want accepted", name, err)
		}
	}
}

// TestAllowNoAttributeChain: an allowed module.name matches a global only
// as written; protocol 4's dotted names (STACK_GLOBAL "mymod", "sub.Config",
// an attribute chain from mymod) are a different global, never the class
// that was allowed.
func TestAllowNoAttributeChain(t *testing.T) {
	chain := hPickle(hStr("mymod"), hStr("sub.Config"), 0x93, ")R")
	rep, err := Scan(bytes.NewReader(chain), int64(len(chain)), "chain.pkl", WithAllow("mymod.sub.Config"))
	if err != nil {
		t.Fatal(err)
	}
	if rep.Verdict() != VerdictDangerous || !slices.Contains(rep.NotAllowed(), "mymod.sub.Config") || len(rep.UserAllowed) != 0 {
		t.Errorf("STACK_GLOBAL mymod sub.Config with WithAllow(mymod.sub.Config): %s, not allowed %v, user-allowed %v", rep.Verdict(), rep.NotAllowed(), rep.UserAllowed)
	}
	plain := hPickle("cmymod.sub\nConfig\n)R")
	rep, _ = Scan(bytes.NewReader(plain), int64(len(plain)), "plain.pkl", WithAllow("mymod.sub.Config"))
	if len(rep.UserAllowed) != 1 || len(rep.NotAllowed()) != 0 {
		t.Errorf("GLOBAL mymod.sub Config: user-allowed %v, not allowed %v", rep.UserAllowed, rep.NotAllowed())
	}
}

// TestAllowArgsChangedBeforeBuild: the arguments an allowed object was made
// from are checked again at its BUILD, since a constructor may have kept
// them and the memo lets the pickle change them in between.
func TestAllowArgsChangedBeforeBuild(t *testing.T) {
	// d = {} (memo 1); x = defaultdict(None, d); d['__setstate__'] = bytearray; BUILD x {}
	obj := cat("ccollections\ndefaultdict\n(N}q\x01tR", "h\x01", hStr("__setstate__"), opByteArray, "s0", "}b")
	b := allowCkpt(obj)
	rep, err := Scan(bytes.NewReader(b), int64(len(b)), "m.pt", WithAllow("collections.defaultdict"))
	if err != nil {
		t.Fatal(err)
	}
	if rep.Verdict() != VerdictDangerous || len(rep.DangerousOpcodes) != 1 || rep.DangerousOpcodes[0].Opcode != "BUILD" ||
		!strings.Contains(rep.DangerousOpcodes[0].Target, "__setstate__") {
		t.Errorf("%s %+v %q", rep.Verdict(), rep.DangerousOpcodes, rep.Problems)
	}
}

// TestAllowWalkedNotChecked: where only the opcode walker reads (bytes
// CPython reads from a FRAME's end, which full decoding never reached), a
// global the caller allowed is not allowed: the walker tracks no values,
// so what is BUILT into the object there goes unchecked.
func TestAllowWalkedNotChecked(t *testing.T) {
	const n, r = 64, 6
	gadget := cat(opNamespace, stateDict("__setstate__", opByteArray), "bK\x07b0")
	p := cat(0x80, 4, frame(cat("X", le32(n), repeat("J", r))),
		repeat("A", n-r), "0B", le32(uint32(len(gadget))), gadget, "0", benignZipPickle()[2:])
	b := hCheckpoint(p, "0", f32s(4))
	rep, err := Scan(bytes.NewReader(b), int64(len(b)), "walked.pt", WithAllow("argparse.Namespace"))
	if err != nil {
		t.Fatal(err)
	}
	if rep.Verdict() == VerdictClean || !slices.Contains(rep.NotAllowed(), "argparse.Namespace") || len(rep.UserAllowed) != 0 {
		t.Errorf("%s: not allowed %v, user-allowed %v, problems %q", rep.Verdict(), rep.NotAllowed(), rep.UserAllowed, rep.Problems)
	}
}
