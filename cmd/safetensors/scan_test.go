package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// scanResult is one element of scan --json as its schema spells it
// (docs/json.md), decoded with strings so that the wire format is tested,
// not the library's types.
type scanResult struct {
	Path    string `json:"path"`
	Format  string `json:"format"`
	Verdict string `json:"verdict"`
	Globals []struct {
		Module  string `json:"module"`
		Name    string `json:"name"`
		Entry   string `json:"entry"`
		Offset  int64  `json:"offset"`
		Verdict string `json:"verdict"`
		Reason  string `json:"reason"`
	} `json:"globals"`
	DangerousOpcodes []struct {
		Opcode string `json:"opcode"`
		Entry  string `json:"entry"`
		Offset int64  `json:"offset"`
		Target string `json:"target"`
	} `json:"dangerous_opcodes"`
	Problems []string `json:"problems"`
	Error    string   `json:"error"`
}

func scanJSON(t *testing.T, args ...string) (int, []scanResult, string) {
	t.Helper()
	code, out, errOut := runCLI(t, append([]string{"scan", "--json"}, args...)...)
	var res []scanResult
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("scan --json %v: output is not a JSON array: %v\n%s", args, err, out)
	}
	return code, res, errOut
}

func TestScanExitCodes(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "missing.bin")
	for _, tc := range []struct {
		args []string
		code int
	}{
		{[]string{torchDir + "tiny_transformer.bin"}, 0},
		{[]string{torchDir + "tiny_transformer_legacy.bin", torchDir + "tied_weights.safetensors"}, 0},
		{[]string{torchDir}, 0},
		{[]string{"../../testdata/malicious/reduce_posix_system_p0.pkl"}, 1},
		{[]string{torchDir + "dtypes.pt", "../../testdata/malicious/"}, 1},
		{[]string{"../../testdata/broken/garbage.pt"}, 1},
		{[]string{"../../testdata/unsupported/quantized.pt"}, 1},
		{[]string{filesDir + "single_f32.safetensors"}, 0},
		{[]string{missing}, 2},
		{[]string{torchDir + "dtypes.pt", missing}, 2},
		{[]string{missing, "../../testdata/malicious/raw_pickle_p0.bin"}, 1},
		{[]string{}, 2},
	} {
		code, out, errOut := runCLI(t, append([]string{"scan"}, tc.args...)...)
		if code != tc.code {
			t.Errorf("scan %v: exit %d, want %d\n%s%s", tc.args, code, tc.code, out, errOut)
		}
	}
}

func TestScanJSON(t *testing.T) {
	code, res, _ := scanJSON(t, "../../testdata/malicious/reduce_posix_system_p2.pkl", torchDir+"tied_weights.pt",
		torchDir+"tied_weights.safetensors", "../../testdata/unsupported/quantized.pt", "../../testdata/broken/truncated_zip_half.bin")
	if code != 1 || len(res) != 5 {
		t.Fatalf("exit %d, %d results", code, len(res))
	}
	evil, clean, st, quant, broken := res[0], res[1], res[2], res[3], res[4]
	if evil.Verdict != "dangerous" || evil.Format != "pickle" {
		t.Errorf("evil: %+v", evil)
	}
	found := false
	for _, g := range evil.Globals {
		if g.Module == "posix" && g.Name == "system" && g.Verdict == "not allowed" && g.Entry != "" {
			found = true
		}
	}
	if !found || len(evil.DangerousOpcodes) == 0 || evil.DangerousOpcodes[0].Opcode != "REDUCE" {
		t.Errorf("evil globals %+v opcodes %+v", evil.Globals, evil.DangerousOpcodes)
	}
	if clean.Verdict != "clean" || clean.Format != "zip" || len(clean.Globals) == 0 || len(clean.Problems) != 0 {
		t.Errorf("clean: %+v", clean)
	}
	for _, g := range clean.Globals {
		if g.Verdict != "allowed" {
			t.Errorf("clean file global %+v", g)
		}
	}
	if st.Verdict != "clean" || st.Format != "safetensors" {
		t.Errorf("safetensors: %+v", st)
	}
	if quant.Verdict != "unsupported" {
		t.Errorf("quantized: %+v", quant)
	}
	if broken.Verdict != "invalid" || len(broken.Problems) == 0 {
		t.Errorf("broken: %+v", broken)
	}
	// Empty lists are [] in the JSON, never null.
	_, out, _ := runCLI(t, "scan", "--json", torchDir+"tied_weights.safetensors")
	for _, key := range []string{`"globals": []`, `"dangerous_opcodes": []`, `"problems": []`} {
		if !strings.Contains(out, key) {
			t.Errorf("JSON lacks %s:\n%s", key, out)
		}
	}
}

func TestScanDirectory(t *testing.T) {
	dir := t.TempDir()
	sub := filepath.Join(dir, "a", "b")
	os.MkdirAll(sub, 0o777)
	copyTestFile(t, "../../testdata/malicious/reduce_posix_system_p2.pkl", filepath.Join(sub, "weights")) // sniffed: protocol 2
	copyTestFile(t, torchDir+"dtypes.pt", filepath.Join(dir, "model.PT"))
	copyTestFile(t, torchDir+"dtypes.pt", filepath.Join(dir, "noext")) // sniffed: zip
	os.WriteFile(filepath.Join(dir, "README.txt"), []byte("hello"), 0o666)
	os.WriteFile(filepath.Join(dir, "bad.safetensors"), []byte("not really"), 0o666)
	code, res, _ := scanJSON(t, dir)
	if code != 1 {
		t.Errorf("exit %d", code)
	}
	got := map[string]string{}
	for _, r := range res {
		rel, _ := filepath.Rel(dir, r.Path)
		got[rel] = r.Verdict
	}
	want := map[string]string{"a/b/weights": "dangerous", "model.PT": "clean", "noext": "clean", "bad.safetensors": "invalid"}
	if len(got) != len(want) {
		t.Errorf("scanned %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: %q, want %q (all %v)", k, got[k], v, got)
		}
	}
	code, out, _ := runCLI(t, "scan", dir)
	if code != 1 || !strings.Contains(out, "not allowed posix.system") || !strings.Contains(out, "bad.safetensors: invalid (unknown)") {
		t.Errorf("text output (exit %d):\n%s", code, out)
	}
	// A directory with nothing to scan is not clean: nothing was read
	// that could be wrong (exit 2, docs/cli-conventions.md).
	empty := t.TempDir()
	os.WriteFile(filepath.Join(empty, "README.md"), []byte("# a model card, not a model\n"), 0o666)
	code, _, errOut := runCLI(t, "scan", empty)
	if code != 2 || !strings.Contains(errOut, "no model found") {
		t.Errorf("empty dir: exit %d %q", code, errOut)
	}
}

func TestScanAllFixtures(t *testing.T) {
	// Every malicious fixture is reported dangerous and names its global.
	var idx []struct {
		File          string   `json:"file"`
		MustNameOneOf []string `json:"must_name_one_of"`
	}
	b, err := os.ReadFile("../../testdata/malicious/INDEX.json")
	if err != nil {
		t.Fatal(err)
	}
	json.Unmarshal(b, &idx)
	for _, e := range idx {
		_, res, _ := scanJSON(t, "../../testdata/malicious/"+e.File)
		if len(res) != 1 || res[0].Verdict != "dangerous" {
			t.Errorf("%s: %+v", e.File, res)
			continue
		}
		named := false
		for _, g := range res[0].Globals {
			for _, n := range e.MustNameOneOf {
				if g.Module+"."+g.Name == n && g.Verdict == "not allowed" {
					named = true
				}
			}
		}
		if !named {
			t.Errorf("%s: no not-allowed global among %v: %+v", e.File, e.MustNameOneOf, res[0].Globals)
		}
	}
	if _, err := os.Stat("/tmp/pwned_marker"); err == nil {
		t.Error("/tmp/pwned_marker exists")
	}
}

// scan of a sharded model's index scans its shards, one result per file,
// and passes a safe model (issue 14.4: it read the index as a pickle and
// said invalid).
func TestScanIndexScansShards(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "model")
	if code, _, errOut := runCLI(t, "split", torchDir+"tiny_transformer.safetensors", dir, "--max-shard-size", "3KB"); code != 0 {
		t.Fatalf("split: exit %d %s", code, errOut)
	}
	code, res, _ := scanJSON(t, filepath.Join(dir, "model.safetensors.index.json"))
	if code != 0 || len(res) < 2 {
		t.Fatalf("exit %d, %+v", code, res)
	}
	for _, r := range res {
		if r.Verdict != "clean" || r.Format != "safetensors" || !strings.HasPrefix(filepath.Base(r.Path), "model-0000") {
			t.Errorf("%+v", r)
		}
	}
	bin := t.TempDir()
	for name, src := range map[string]string{"pytorch_model-00001-of-00002.bin": torchDir + "tiny_transformer.bin", "pytorch_model-00002-of-00002.bin": "../../testdata/malicious/torch_zip_os_system.bin"} {
		b, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(bin, name), b, 0o644)
	}
	os.WriteFile(filepath.Join(bin, "pytorch_model.bin.index.json"), []byte(`{"weight_map": {"a": "pytorch_model-00001-of-00002.bin", "b": "pytorch_model-00002-of-00002.bin"}}`), 0o644)
	code, res, _ = scanJSON(t, filepath.Join(bin, "pytorch_model.bin.index.json"))
	if code != 1 || len(res) != 2 || res[0].Verdict != "clean" || res[1].Verdict != "dangerous" {
		t.Fatalf("exit %d, %+v", code, res)
	}
}

// A file name cannot write control characters to the terminal through
// scan's text output.
func TestScanTextQuotesPaths(t *testing.T) {
	dir := t.TempDir()
	name := filepath.Join(dir, "evil\x1b[2Jname.pkl")
	b, _ := os.ReadFile("../../testdata/malicious/reduce_posix_system_p2.pkl")
	if err := os.WriteFile(name, b, 0o644); err != nil {
		t.Skip("cannot make the file:", err)
	}
	_, out, _ := runCLI(t, "scan", name)
	if strings.Contains(out, "\x1b") || !strings.Contains(out, `\x1b[2Jname.pkl`) {
		t.Fatalf("output %q", out)
	}
}
