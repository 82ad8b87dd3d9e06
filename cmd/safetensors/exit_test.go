package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestExitRule: one situation, one exit status, whatever the command (the
// rule the root --help states). Each row is a situation and the commands
// it is checked with; every command that takes the kind of input is
// listed.
func TestExitRule(t *testing.T) {
	tmp := t.TempDir()
	model := torchDir + "sharded_bin" // a sharded PyTorch checkpoint, as transformers writes one
	one := torchDir + "tiny_transformer.safetensors"
	missing := filepath.Join(tmp, "missing.safetensors")
	noModel := filepath.Join(tmp, "empty")
	os.Mkdir(noModel, 0o755)
	os.WriteFile(filepath.Join(noModel, "config.json"), []byte("{}"), 0o644)
	page := filepath.Join(tmp, "page.safetensors")
	os.WriteFile(page, []byte("<!DOCTYPE html><html><title>Sign in</title></html>"), 0o644)
	out := func(name string) string { return filepath.Join(tmp, "out", name) }
	os.Mkdir(filepath.Join(tmp, "out"), 0o755)
	existing := filepath.Join(tmp, "existing.safetensors")
	os.WriteFile(existing, []byte("x"), 0o644)

	for _, c := range []struct {
		situation string
		code      int
		commands  [][]string
	}{
		{"a sharded checkpoint read", 0, [][]string{
			{"inspect", model}, {"inspect", model + "/pytorch_model.bin.index.json"}, {"get", model, "transformer.h.1.ln_1.weight"},
			{"stats", model}, {"estimate", model}, {"diff", model, model}, {"scan", model},
			{"validate", model + "/pytorch_model.bin.index.json"},
		}},
		{"a missing location", 2, [][]string{
			{"inspect", missing}, {"get", missing, "x"}, {"stats", missing}, {"estimate", missing}, {"diff", missing, one},
			{"validate", missing}, {"scan", missing}, {"convert", missing, out("a.safetensors")},
			{"split", missing, out("s")}, {"merge", missing, out("m.safetensors")}, {"compress", missing, "-o", out("c.zst")},
		}},
		{"a folder with no model", 2, [][]string{
			{"inspect", noModel}, {"get", noModel, "x"}, {"stats", noModel}, {"estimate", noModel}, {"diff", noModel, one},
			{"validate", noModel}, {"convert", noModel, out("cd")}, {"split", noModel, out("s2")}, {"merge", noModel, out("m2.safetensors")},
		}},
		{"content that is not a model", 1, [][]string{
			{"inspect", page}, {"get", page, "x"}, {"stats", page}, {"estimate", page}, {"validate", page},
			{"scan", page}, {"convert", page, out("p.safetensors")}, {"split", page, out("s3")}, {"merge", page, out("m3.safetensors")},
			{"compress", page, "-o", out("p.zst")},
		}},
		{"a tensor that is not there", 2, [][]string{
			{"get", model, "transformer.h.99.ln_1.weight"}, {"get", one, "nope"}, {"stats", model, "nope"},
		}},
		{"a filter that matches nothing", 2, [][]string{
			{"inspect", model, "--filter", "h.1.*"}, {"inspect", one, "--filter", "nope", "--json"},
		}},
		{"an output that exists", 2, [][]string{
			{"get", one, "wte.weight", "-o", existing}, {"convert", torchDir + "tiny_transformer.bin", existing},
			{"merge", one, existing}, {"compress", one, "-o", existing},
		}},
		{"a usage mistake", 2, [][]string{
			{"inspect"}, {"get", one}, {"inspect", "--sort", "bogus", one}, {"get", one, "wte.weight", "--slice", "0:1:0:1"},
			{"get", one, "wte.weight", "--slice", "99:100"},
		}},
		{"the models differ", 1, [][]string{{"diff", one, model}}},
	} {
		for _, args := range c.commands {
			code, _, stderr := runCLI(t, args...)
			if code != c.code {
				t.Errorf("%s: %s: exit %d, want %d\n%s", c.situation, strings.Join(args, " "), code, c.code, stderr)
			}
		}
	}
}

// The root --help states the rule, once.
func TestExitRuleInHelp(t *testing.T) {
	_, out, _ := runCLI(t, "--help")
	if !strings.Contains(out, exitRule) {
		t.Fatalf("the root --help does not state the exit rule:\n%s", out)
	}
}

// Every command that reads a model leads with the diagnosis (what the
// bytes really are), not the decoder's complaint, and never shows a
// message as a Go-quoted string.
func TestDiagnosisFirst(t *testing.T) {
	dir := t.TempDir()
	page := filepath.Join(dir, "page.safetensors")
	os.WriteFile(page, []byte("<!DOCTYPE html><html><title>Sign in</title></html>"), 0o644)
	b, err := os.ReadFile(torchDir + "tiny_transformer.safetensors")
	if err != nil {
		t.Fatal(err)
	}
	cut := filepath.Join(dir, "cut.safetensors")
	os.WriteFile(cut, b[:3000], 0o644)
	for file, diagnosis := range map[string]string{page: "this is an HTML page", cut: "truncated download?"} {
		for _, args := range [][]string{{"inspect", file}, {"get", file, "x"}, {"stats", file}, {"validate", file}, {"scan", file}} {
			_, stdout, stderr := runCLI(t, args...)
			out := stdout + stderr
			lines := strings.Split(out, "\n")
			first := ""
			for _, l := range lines {
				if strings.Contains(l, diagnosis) {
					first = l
					break
				}
				if strings.Contains(l, "HeaderTooLarge") || strings.Contains(l, "MetadataIncompleteBuffer") || strings.Contains(l, "opcode") {
					break
				}
			}
			if first == "" {
				t.Errorf("%v: the diagnosis %q does not come first:\n%s", args, diagnosis, out)
			}
			if strings.Contains(out, `\n`) || strings.Count(out, diagnosis) != 1 {
				t.Errorf("%v: a quoted message or the diagnosis twice:\n%s", args, out)
			}
		}
	}
}

// A checkpoint named .safetensors is read by its content, clean or not,
// and inspect and scan say the name is wrong.
func TestNameMismatchWarned(t *testing.T) {
	lie := filepath.Join(t.TempDir(), "model.safetensors")
	copyTestFile(t, torchDir+"tiny_transformer.bin", lie)
	for _, args := range [][]string{{"inspect", lie}, {"scan", lie}} {
		code, out, errOut := runCLI(t, args...)
		if code != 0 || !strings.Contains(out, "the name says safetensors, but this is a PyTorch checkpoint (zip)") {
			t.Errorf("%v: exit %d\n%s%s", args, code, out, errOut)
		}
	}
}
