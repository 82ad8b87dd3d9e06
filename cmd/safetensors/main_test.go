package main

import (
	"bytes"
	"strings"
	"testing"
)

const (
	filesDir = "../../testdata/safetensors/files/"
	torchDir = "../../testdata/torch/"
)

// runCLI runs the command in-process and returns its exit status and output.
func runCLI(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = run(args, &out, &errb)
	return code, out.String(), errb.String()
}

func TestRootHelpAndVersion(t *testing.T) {
	code, out, _ := runCLI(t, "--help")
	if code != 0 {
		t.Fatalf("--help: exit %d", code)
	}
	for _, sub := range []string{"inspect", "validate", "get"} {
		if !strings.Contains(out, sub) {
			t.Errorf("help does not list %q:\n%s", sub, out)
		}
	}
	code, out, _ = runCLI(t, "--version")
	if code != 0 || !strings.Contains(out, "safetensors version") {
		t.Errorf("--version: exit %d, %q", code, out)
	}
}

func TestUsageErrorsExit2(t *testing.T) {
	for _, args := range [][]string{
		{"inspect"},
		{"inspect", "--no-such-flag", "x"},
		{"nosuchcommand"},
		{"get", filesDir + "single_f32.safetensors"},
		{"inspect", "--sort", "bogus", filesDir + "single_f32.safetensors"},
	} {
		code, _, errOut := runCLI(t, args...)
		if code != 2 {
			t.Errorf("%v: exit %d, want 2 (stderr %q)", args, code, errOut)
		}
		if !strings.HasPrefix(errOut, "safetensors: ") {
			t.Errorf("%v: stderr %q does not start with \"safetensors: \"", args, errOut)
		}
	}
}

func TestExitError(t *testing.T) {
	inner := errorString("boom")
	e := &exitError{Code: 1, Err: inner}
	if e.Error() != "boom" || e.Unwrap() != inner {
		t.Errorf("exitError: %q %v", e.Error(), e.Unwrap())
	}
	if (&exitError{Code: 3}).Error() == "" {
		t.Error("empty message without Err")
	}
}

type errorString string

func (e errorString) Error() string { return string(e) }

// Every command shows an example in its --help.
func TestEveryCommandHasAnExample(t *testing.T) {
	for _, c := range newRootCmd().Commands() {
		if c.Name() == "help" || c.Name() == "completion" {
			continue
		}
		if c.Example == "" {
			t.Errorf("%s has no Example", c.Name())
		}
	}
}
