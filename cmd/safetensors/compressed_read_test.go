package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// Every reading command takes a compressed file as the original.
func TestCommandsReadCompressedFiles(t *testing.T) {
	orig := torchDir + "tiny_transformer.safetensors"
	for _, codec := range []string{"zstd", "lz4", "grouped"} {
		out := filepath.Join(t.TempDir(), "m."+codec)
		if code, _, errOut := runCLI(t, "compress", "--codec", codec, orig, out); code != 0 {
			t.Fatalf("compress %s: exit %d %s", codec, code, errOut)
		}
		code, inspectOut, errOut := runCLI(t, "inspect", out)
		if code != 0 || !strings.Contains(inspectOut, "1.60K (1,600)") || !strings.Contains(inspectOut, "uncompressed") {
			t.Fatalf("inspect %s: exit %d\n%s%s", codec, code, inspectOut, errOut)
		}
		if code, out, errOut := runCLI(t, "validate", "--full", out); code != 0 || !strings.HasPrefix(out, "ok ") {
			t.Fatalf("validate %s: exit %d %s %s", codec, code, out, errOut)
		}
		_, want, _ := runCLI(t, "get", orig, "lm_head.weight", "--slice", "3:5")
		if code, got, errOut := runCLI(t, "get", out, "lm_head.weight", "--slice", "3:5"); code != 0 || got != want {
			t.Fatalf("get --slice %s: exit %d %s\n%s\n%s", codec, code, errOut, got, want)
		}
		if code, out, errOut := runCLI(t, "diff", orig, out); code != 0 {
			t.Fatalf("diff %s: exit %d %s %s", codec, code, out, errOut)
		}
		_, a, _ := runCLI(t, "stats", "--json", orig)
		if code, b, _ := runCLI(t, "stats", "--json", out); code != 0 || a != b {
			t.Fatalf("stats %s differ", codec)
		}
		if code, out, _ := runCLI(t, "scan", out); code != 0 || !strings.Contains(out, "clean") {
			t.Fatalf("scan %s: exit %d %s", codec, code, out)
		}
	}
}
