package safename

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCheck(t *testing.T) {
	ok := []string{
		"model.safetensors", "config.json", ".gitattributes", ".gitignore", ".gitmodules",
		"sub/dir/model-00001-of-00002.safetensors", "x/.cache/other", ".cache/torch/x",
		"git", ".github/workflows/ci.yml", ".git-blame-ignore-revs", "a.git", "gitx~1",
		"100%.json", "2023-01-01T00:00:00.json", "日本語/モデル.safetensors", ".hidden",
		strings.Repeat("a", MaxComponentBytes),
	}
	for _, n := range ok {
		if err := Check(n); err != nil {
			t.Errorf("Check(%q) = %v, want nil", n, err)
		}
	}
	bad := map[string]string{
		"":                          "empty",
		"/etc/passwd":               "absolute",
		"../../x.json":              "'..'",
		"a/../../x":                 "'..'",
		"a//b":                      "empty",
		"a/":                        "empty",
		"./a":                       "'.'",
		`a\b`:                       `'\'`,
		`\\host\share\x`:            `'\'`,
		"C:foo":                     "drive",
		"sub/D:x":                   "drive",
		".git/config":               ".git folder",
		".git":                      ".git itself",
		".GIT/config":               ".git folder",
		".Git/hooks/pre-commit":     ".git folder",
		"sub/.git/config":           ".git folder",
		"git~1/config":              ".git folder",
		"GIT~1/config":              ".git folder",
		".git./config":              "ends with a dot",
		".git /config":              "ends with a dot or a space",
		".git::$INDEX_ALLOCATION/x": ".git folder",
		".git:stream":               ".git itself",
		".g\u200cit/config":         "invisible",
		".git\u200d/config":         "invisible",
		"a\u202eb":                  "invisible",
		"a\x00b":                    "control",
		"a\nb":                      "control",
		"a\u0085b":                  "control",
		"\xff.json":                 "UTF-8",
		".cache/huggingface/download/model.safetensors.metadata": ".cache/huggingface folder",
		".cache/huggingface":                     ".cache/huggingface itself",
		".CACHE/HuggingFace/x":                   ".cache/huggingface folder",
		"cache~1/huggingface/x":                  ".cache/huggingface folder",
		".cache/safetensors/download/a.partial":  ".cache/safetensors folder",
		"sub/.cache/huggingface/trees/x.json":    ".cache/huggingface folder",
		"notes.":                                 "ends with a dot",
		"a /b":                                   "space",
		strings.Repeat("a", MaxComponentBytes+1): "component of",
		strings.Repeat("a/", 600) + "a":          "longer than",
	}
	for n, want := range bad {
		err := Check(n)
		var e *Error
		if !errors.As(err, &e) || !errors.Is(err, ErrUnsafe) || e.Name != n {
			t.Errorf("Check(%q) = %v, want an *Error naming it", n, err)
			continue
		}
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Check(%q) = %v, want it to say %q", n, err, want)
		}
	}
	// A file named ".cache" at the top would take the place of both
	// metadata folders.
	if err := Check(".cache/huggingface"); err == nil {
		t.Error(".cache/huggingface accepted")
	}
}

// TestMaxComponentWritable: a name of MaxComponentBytes bytes can be
// written with the longest suffix the module adds, one more byte cannot
// on this file system (NAME_MAX 255).
func TestMaxComponentWritable(t *testing.T) {
	dir := t.TempDir()
	longest := "." + strings.Repeat("a", MaxComponentBytes) + ".metadata.tmp-123456789abc"
	if len(longest) != 255 {
		t.Fatalf("the longest suffixed name has %d bytes", len(longest))
	}
	if err := os.WriteFile(filepath.Join(dir, longest), nil, 0o666); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, longest+"x"), nil, 0o666); err == nil {
		t.Skip("this file system takes names longer than 255 bytes")
	}
}

func TestCheckSet(t *testing.T) {
	if err := CheckSet([]string{"a/b", "a/c", "b", "B.json"}); err != nil {
		t.Fatal(err)
	}
	cases := map[string][]string{
		"a file and a folder": {"a", "a/b"},
		"same name":           {"x/y/z", "x/y"},
		"only in case":        {"Model.safetensors", "model.safetensors"},
		"listed twice":        {"m", "m"},
	}
	for want, names := range cases {
		err := CheckSet(names)
		if !errors.Is(err, ErrUnsafe) || !strings.Contains(err.Error(), want) {
			t.Errorf("CheckSet(%q) = %v, want %q", names, err, want)
		}
	}
	// A folder spelt in another case is the same folder there.
	if err := CheckSet([]string{"A/b", "a"}); err == nil {
		t.Error(`"A/b" and "a" accepted`)
	}
	// Every unsafe name is reported, not only the first.
	err := CheckSet([]string{".git/config", "ok", "../x"})
	if err == nil || !strings.Contains(err.Error(), ".git/config") || !strings.Contains(err.Error(), "../x") {
		t.Errorf("CheckSet = %v, want both names", err)
	}
}
