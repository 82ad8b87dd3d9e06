package torch_test

// Verdicts that must match what real torch does (issue 14), on files made
// with torch (testdata/oracle, make_checkpoints.py) or with torchtest.

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/gosafetensors/safetensors/torch"
	"github.com/gosafetensors/safetensors/torch/torchtest"
)

func oracleFile(name string) string { return filepath.Join("..", "testdata", "oracle", name) }

// TestRequiresGradAsTorch (14.14): torch refuses requires_grad given as
// an int, and requires_grad True on a tensor that is neither floating point
// nor complex; so do Open and Scan.
func TestRequiresGradAsTorch(t *testing.T) {
	for _, name := range []string{"requires_grad_int1_float.pt", "requires_grad_true_int_tensor.pt", "parameter_requires_grad_int_tensor.pt"} {
		c, err := torch.Open(oracleFile(name))
		if err == nil {
			c.Close()
			t.Errorf("%s: opened, torch refuses it", name)
		} else if !errors.Is(err, torch.ErrCorrupt) {
			t.Errorf("%s: %v, want ErrCorrupt", name, err)
		}
		rep, err := torch.ScanFile(oracleFile(name))
		if err != nil {
			t.Fatal(err)
		}
		if rep.Verdict() != torch.VerdictInvalid {
			t.Errorf("%s: scan %s %q, want invalid", name, rep.Verdict(), rep.Problems)
		}
	}
	// booleans as protocol 1 writes them (I01) and a float tensor that
	// requires grad still open
	for _, p := range []string{"../testdata/torch/protocol1.pt", "../testdata/torch/parameters.pt"} {
		c, err := torch.Open(p)
		if err != nil {
			t.Errorf("%s: %v", p, err)
			continue
		}
		c.Close()
	}
	// a 7-argument _rebuild_tensor_v2 (metadata None) is torch 2.x's form
	c, err := torch.Open(oracleFile("rebuild_v2_seven_args.pt"))
	if err != nil {
		t.Fatalf("7-argument _rebuild_tensor_v2: %v", err)
	}
	c.Close()
}

// TestBoolValuesAsTorch (14.14): a BOOL storage byte other than 0 or 1 is
// True to torch; every read of the tensor yields torch's 0 or 1.
func TestBoolValuesAsTorch(t *testing.T) {
	c, err := torch.Open(oracleFile("bool_bytes_not_01.pt"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	checkBool(t, "torch.save file", c.Lookup("flags"), []byte{0, 1, 1, 1})

	// a strided view (every other element) and a contiguous one, through
	// WriteTo and View
	var buf bytes.Buffer
	err = torchtest.WriteZip(&buf, []torchtest.Tensor{
		{Name: "all", DType: "BOOL", Shape: []int64{6}, Data: []byte{0, 2, 0xff, 0, 1, 0x80}, Storage: "s"},
		{Name: "odd", DType: "BOOL", Shape: []int64{3}, Stride: []int64{2}, Offset: 1, Storage: "s"},
	}, torchtest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	c2, err := torch.NewReader(bytes.NewReader(buf.Bytes()), int64(buf.Len()), "bools.pt")
	if err != nil {
		t.Fatal(err)
	}
	checkBool(t, "contiguous", c2.Lookup("all"), []byte{0, 1, 1, 0, 1, 1})
	checkBool(t, "strided", c2.Lookup("odd"), []byte{1, 0, 1})
}

func checkBool(t *testing.T, what string, tn *torch.Tensor, want []byte) {
	t.Helper()
	if tn == nil {
		t.Fatalf("%s: no tensor", what)
	}
	var w bytes.Buffer
	if _, err := tn.WriteTo(&w); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(w.Bytes(), want) {
		t.Errorf("%s: WriteTo gives %v, torch yields %v", what, w.Bytes(), want)
	}
	got := make([]byte, len(want))
	if _, err := tn.View().ReadAt(got, 0); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s: View gives %v, torch yields %v", what, got, want)
	}
	for off := range want { // reads that start inside
		one := make([]byte, 1)
		if _, err := tn.View().ReadAt(one, int64(off)); err != nil || one[0] != want[off] {
			t.Errorf("%s: View at %d gives %v (%v), want %d", what, off, one, err, want[off])
		}
	}
}

// TestUnreferencedFoldsCase (14.14): torch's zip reader looks records up
// without case, so archive/DATA/0 is the storage of key 0, not a stray
// record.
func TestUnreferencedFoldsCase(t *testing.T) {
	c, err := torch.Open(oracleFile("record_name_case.pt"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if len(c.Unreferenced) != 0 {
		t.Errorf("unreferenced %v, want none", c.Unreferenced)
	}
}

// TestGlobalNamesAsTorch (14.11): scan names the global torch's unpickler
// asks for: after the zip loader's module mapping (torch.tensor is
// imported as torch._tensor), and where STACK_GLOBAL's operands are what
// persistent_load returned from the id itself (the legacy loader returns
// data[0] of a ('module', ...) id, the tar pickle member saved_id[0] of any
// tuple). The files are mutants of real checkpoints, judged by real torch
// (testdata/oracle/INDEX.json).
func TestGlobalNamesAsTorch(t *testing.T) {
	for _, c := range []struct{ file, global, not string }{
		{"mutant_torch_tensor_mapping.pt", "torch._tensor.Tensor", "torch.tensor.Tensor"},
		{"mutant_legacy_persid_module.pt", "functools.partial", "?.?"},
		{"mutant_tar_persid_pickle.pt", "builtins.getattr", "?.?"},
	} {
		rep, err := torch.ScanFile(oracleFile(c.file))
		if err != nil {
			t.Fatal(err)
		}
		na := rep.NotAllowed()
		if rep.Verdict() != torch.VerdictDangerous || !slices.Contains(na, c.global) || slices.Contains(na, c.not) {
			t.Errorf("%s: %s %v, want dangerous naming %s (not %s)", c.file, rep.Verdict(), na, c.global, c.not)
		}
	}
}

// entryOf returns the entry named name, or fails.
func entryOf(t *testing.T, c *torch.Checkpoint, file, name string) torch.Entry {
	t.Helper()
	for _, e := range c.Entries {
		if e.Name == name {
			return e
		}
	}
	t.Fatalf("%s: no entry %q", file, name)
	return torch.Entry{}
}

// TestTorchSaveValuesClean (14.13 and 16.3): values torch.save writes beside
// the weights that torch loads with inert globals only — sets and
// frozensets (EMPTY_SET/ADDITEMS/FROZENSET at protocol 4, REDUCE of
// __builtin__.set at 2), bytearrays (BYTEARRAY8 at 5, REDUCE at 2),
// dtypes, devices, complex numbers, Counters, tensor classes as values,
// tuples as dict keys — are clean, open, and are skipped by conversion.
func TestTorchSaveValuesClean(t *testing.T) {
	for _, c := range []struct {
		file, entry, kind string
		value             any
	}{
		{"set_frozenset_p4.pt", "tags", "set", nil},
		{"set_frozenset_p4.pt", "frozen", "frozenset", nil},
		{"bytearray_p5.pt", "blob", "bytearray", []byte{0, 1, 2}},
		{"dtype_value.pt", "dtype", "dtype", "torch.float16"},
		{"tuple_key.pt", "meta.(a, 1)", "int", int64(3)},
		{"set_p2.pt", "tags", "set", nil},
		{"device_value.pt", "device", "device", "cpu"},
		{"bytearray_p2.pt", "blob", "bytearray", []byte{0, 0xff}},
		{"complex_value.pt", "z", "complex", complex(1.5, -2)},
		{"counter_value.pt", "counts.a", "int", int64(2)},
		{"tensor_class_value.pt", "kind", "global", "torch.FloatTensor"},
		{"tensor_under_tuple_key.pt", "(enc, 1)", "tensor", nil},
	} {
		rep, err := torch.ScanFile(oracleFile(c.file))
		if err != nil {
			t.Fatal(err)
		}
		if rep.Verdict() != torch.VerdictClean || len(rep.UserAllowed) != 0 {
			t.Errorf("%s: scan %s %v %q, want clean", c.file, rep.Verdict(), rep.NotAllowed(), rep.Problems)
			continue
		}
		ck, err := torch.Open(oracleFile(c.file))
		if err != nil {
			t.Errorf("%s: %v", c.file, err)
			continue
		}
		e := entryOf(t, ck, c.file, c.entry)
		ck.Close()
		if e.Kind != c.kind || c.kind != "tensor" && !reflect.DeepEqual(e.Value, c.value) {
			t.Errorf("%s: entry %q is %s %#v, want %s %#v", c.file, c.entry, e.Kind, e.Value, c.kind, c.value)
		}
	}
}

// TestWithAllow (16.3): globals torch does not allow by default are
// allowed only when the caller names them; the report says which were
// used; what they build is an inert value, never a tensor, and a tensor
// inside one is unsupported (it would be lost).
func TestWithAllow(t *testing.T) {
	for _, c := range []struct {
		file  string
		allow []string
		entry string
	}{
		{"argparse_namespace.pt", []string{"argparse.Namespace"}, "hparams"},
		{"numpy_scalar.pt", []string{"numpy.core.multiarray.scalar", "numpy.dtype"}, "best"},
		{"numpy_array.pt", []string{"numpy.core.multiarray._reconstruct", "numpy.ndarray", "numpy.dtype"}, "arr"},
	} {
		rep, err := torch.ScanFile(oracleFile(c.file))
		if err != nil {
			t.Fatal(err)
		}
		if rep.Verdict() != torch.VerdictDangerous {
			t.Errorf("%s without WithAllow: %s, want dangerous", c.file, rep.Verdict())
		}
		// allowing one of several is not enough
		if len(c.allow) > 1 {
			rep, _ = torch.ScanFile(oracleFile(c.file), torch.WithAllow(c.allow[0]))
			if rep.Verdict() != torch.VerdictDangerous {
				t.Errorf("%s allowing only %s: %s, want dangerous", c.file, c.allow[0], rep.Verdict())
			}
		}
		rep, err = torch.ScanFile(oracleFile(c.file), torch.WithAllow(c.allow...))
		if err != nil {
			t.Fatal(err)
		}
		got := slices.Clone(rep.UserAllowed)
		slices.Sort(got)
		want := slices.Clone(c.allow)
		slices.Sort(want)
		if rep.Verdict() != torch.VerdictClean || !slices.Equal(got, want) || len(rep.NotAllowed()) != 0 {
			t.Errorf("%s with WithAllow(%v): %s, user-allowed %v, not allowed %v, problems %q", c.file, c.allow, rep.Verdict(), rep.UserAllowed, rep.NotAllowed(), rep.Problems)
			continue
		}
		ck, err := torch.Open(oracleFile(c.file), torch.WithAllow(c.allow...))
		if err != nil {
			t.Errorf("%s: open with WithAllow: %v", c.file, err)
			continue
		}
		e := entryOf(t, ck, c.file, c.entry)
		n := len(ck.Tensors())
		ck.Close()
		if e.Kind != "object" || e.Tensor != nil || n == 0 {
			t.Errorf("%s: entry %q is %s (tensors %d), want an object beside the tensors", c.file, c.entry, e.Kind, n)
		}
		if _, err := torch.Open(oracleFile(c.file)); !errors.Is(err, torch.ErrNotAllowed) {
			t.Errorf("%s: open without WithAllow: %v, want ErrNotAllowed", c.file, err)
		}
	}
	// a tensor inside an allowed object would be lost: unsupported
	rep, _ := torch.ScanFile(oracleFile("argparse_namespace_tensor.pt"), torch.WithAllow("argparse.Namespace"))
	if rep.Verdict() == torch.VerdictClean {
		t.Errorf("a Namespace holding a tensor: clean with WithAllow, want not clean")
	}
	if _, err := torch.Open(oracleFile("argparse_namespace_tensor.pt"), torch.WithAllow("argparse.Namespace")); !errors.Is(err, torch.ErrUnsupported) {
		t.Errorf("a Namespace holding a tensor: %v, want ErrUnsupported", err)
	}
	for _, bad := range []string{"posix.system", "os.path.join", "builtins.eval", "__builtin__.getattr", "subprocess.Popen",
		"torch._utils._rebuild_qtensor", "nodot", "a..b", ".x", "x.", "1a.b", "a.b c"} {
		if _, err := torch.ScanFile(oracleFile("argparse_namespace.pt"), torch.WithAllow(bad)); !errors.Is(err, torch.ErrOption) {
			t.Errorf("WithAllow(%q): %v, want ErrOption", bad, err)
		}
	}
}

// TestTorchScript (14.6): a TorchScript archive (a constants.pkl record, as
// torch.load tests it) is unsupported, not dangerous: torch.load hands it to
// torch.jit.load, which resolves its __torch__ classes itself. A global
// outside jit's own inside one is still dangerous, and an archive whose
// record is CONSTANTS.PKL is not one to torch.load (its exact test fails, it
// unpickles data.pkl with Python's pickle).
func TestTorchScript(t *testing.T) {
	rep, err := torch.ScanFile(oracleFile("torchscript_linear.pt"))
	if err != nil {
		t.Fatal(err)
	}
	dangerous := slices.ContainsFunc(rep.Globals, func(g torch.GlobalUse) bool { return g.Verdict == "not allowed" })
	if rep.Verdict() != torch.VerdictUnsupported || dangerous ||
		!slices.ContainsFunc(rep.Problems, func(p string) bool { return strings.Contains(p, "TorchScript archive") }) {
		t.Errorf("torchscript_linear.pt: %s, not allowed %v, problems %q; want unsupported, saying TorchScript", rep.Verdict(), rep.NotAllowed(), rep.Problems)
	}
	if _, err := torch.Open(oracleFile("torchscript_linear.pt")); !errors.Is(err, torch.ErrUnsupported) || !strings.Contains(err.Error(), "TorchScript") {
		t.Errorf("open: %v, want ErrUnsupported naming TorchScript", err)
	}
	for _, c := range []struct{ file, global string }{
		{"torchscript_data_pkl_payload.pt", "posix.system"},
		{"torchscript_constants_case.pt", "__torch__.torch.nn.modules.linear.Linear"},
	} {
		rep, err := torch.ScanFile(oracleFile(c.file))
		if err != nil {
			t.Fatal(err)
		}
		if rep.Verdict() != torch.VerdictDangerous || !slices.Contains(rep.NotAllowed(), c.global) {
			t.Errorf("%s: %s %v, want dangerous naming %s", c.file, rep.Verdict(), rep.NotAllowed(), c.global)
		}
	}
}

// TestScanDocListsAllowlist keeps docs/security/scan.md's allowlist table
// complete: every allowlisted global appears there, spelt exactly.
func TestScanDocListsAllowlist(t *testing.T) {
	b, err := os.ReadFile("../docs/security/scan.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range torch.AllowlistForOracle() {
		if !bytes.Contains(b, []byte("`"+g+"`")) {
			t.Errorf("docs/security/scan.md does not list the allowlisted %s", g)
		}
	}
}
