package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
)

// TestAllowFlag (16.3): scan --allow and convert --allow treat the named
// globals as allowed; scan's report says which ones the file used; without
// the flag the verdict is unchanged; names the library refuses are usage
// errors before anything is read.
func TestAllowFlag(t *testing.T) {
	in := "../../testdata/oracle/argparse_namespace.pt"
	code, out, _ := runCLI(t, "scan", in)
	if code != 1 || !strings.Contains(out, "dangerous") {
		t.Fatalf("scan without --allow: exit %d\n%s", code, out)
	}
	code, out, _ = runCLI(t, "scan", "--allow", "argparse.Namespace", in)
	if code != 0 || !strings.Contains(out, ": clean") || !strings.Contains(out, "argparse.Namespace (by --allow)") {
		t.Fatalf("scan --allow: exit %d\n%s", code, out)
	}
	code, out, _ = runCLI(t, "scan", "--json", "--allow", "argparse.Namespace", in)
	var res []struct {
		Verdict     string   `json:"verdict"`
		UserAllowed []string `json:"user_allowed"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil || code != 0 || len(res) != 1 || res[0].Verdict != "clean" ||
		len(res[0].UserAllowed) != 1 || res[0].UserAllowed[0] != "argparse.Namespace" {
		t.Fatalf("scan --json --allow: exit %d %v\n%s", code, err, out)
	}
	for _, args := range [][]string{{"scan", "--allow", "posix.system", in}, {"convert", "-n", "--allow", "builtins.eval", in}} {
		if code, _, errOut := runCLI(t, args...); code != 2 || !strings.Contains(errOut, "--allow") {
			t.Errorf("%v: exit %d %s, want a usage error", args, code, errOut)
		}
	}
	outFile := filepath.Join(t.TempDir(), "m.safetensors")
	if code, _, _ := runCLI(t, "convert", in, outFile); code != 1 {
		t.Errorf("convert without --allow: exit %d, want 1", code)
	}
	code, out, errOut := runCLI(t, "convert", "--allow", "argparse.Namespace", in, outFile)
	if code != 0 {
		t.Fatalf("convert --allow: exit %d\n%s%s", code, out, errOut)
	}
	code, out, _ = runCLI(t, "inspect", outFile)
	if code != 0 || strings.Contains(out, "hparams") {
		t.Errorf("the converted file: exit %d\n%s", code, out)
	}
}
