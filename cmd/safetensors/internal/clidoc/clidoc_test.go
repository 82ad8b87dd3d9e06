package clidoc

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

func tree() *cobra.Command {
	root := &cobra.Command{Use: "tool", Short: "A tool", Long: "Tool does:\n\n  a  one\n  b  two\n"}
	root.PersistentFlags().Bool("global", false, "a persistent flag")
	run := func(*cobra.Command, []string) error { return nil }
	do := &cobra.Command{Use: "do FILE", Short: "Do it", Long: "## not a heading\n\n    indented", Example: "  tool do x", RunE: run}
	do.Flags().Int("count", 3, "how many")
	root.AddCommand(do, &cobra.Command{Use: "secret", Short: "Hidden", Hidden: true, RunE: run})
	root.InitDefaultCompletionCmd()
	return root
}

func TestPages(t *testing.T) {
	root := tree()
	pages, err := Pages(root)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for name := range pages {
		names = append(names, name)
	}
	slices.Sort(names)
	if want := []string{"README.md", "do.md"}; !slices.Equal(names, want) {
		t.Fatalf("pages %v, want %v (no hidden, help or completion page)", names, want)
	}
	do := string(pages["do.md"])
	for _, want := range []string{
		Header + "# tool do\n\nDo it\n",
		"## Synopsis\n\n```text\n## not a heading\n\n    indented\n```\n",
		"```\ntool do FILE [flags]\n```",
		"## Examples\n\n```\n  tool do x\n```",
		"--count int   how many (default 3)",
		"## Options inherited from parent commands",
		"--global   a persistent flag",
		"* [tool](README.md)",
	} {
		if !strings.Contains(do, want) {
			t.Errorf("do.md lacks %q:\n%s", want, do)
		}
	}
	index := string(pages["README.md"])
	for _, want := range []string{"# tool\n", "```text\nTool does:\n\n  a  one\n  b  two\n```\n", "* [tool do](do.md)", "`tool completion bash|zsh|fish|powershell`"} {
		if !strings.Contains(index, want) {
			t.Errorf("README.md lacks %q:\n%s", want, index)
		}
	}
	for name, page := range pages {
		if regexp.MustCompile(`(?i)auto generated|20\d\d`).Match(page) {
			t.Errorf("%s has a date:\n%s", name, page)
		}
		for _, m := range regexp.MustCompile(`\]\(([^)]+)\)`).FindAllSubmatch(page, -1) {
			if l := string(m[1]); !strings.HasPrefix(l, "../") && pages[l] == nil {
				t.Errorf("%s links to %s, no page", name, l)
			}
		}
	}
	if root.Long != "Tool does:\n\n  a  one\n  b  two\n" || root.DisableAutoGenTag {
		t.Error("Pages changed the command tree")
	}
	again, _ := Pages(tree())
	for name := range pages {
		if string(again[name]) != string(pages[name]) {
			t.Errorf("%s differs from one rendering to the next", name)
		}
	}
	if root.Commands()[0].Hidden {
		t.Error("Pages left the completion command hidden")
	}
	if _, err := Pages(root.Commands()[0]); err == nil {
		t.Error("a subcommand accepted as the root")
	}
}

func TestWriteStale(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "gone.md"), []byte("x"), 0o666); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("x"), 0o666); err != nil {
		t.Fatal(err)
	}
	if stale, err := Stale(tree(), dir); err != nil || !slices.Equal(stale, []string{"README.md", "do.md", "gone.md"}) {
		t.Fatalf("before Write: stale %v, %v", stale, err)
	}
	if err := Write(tree(), dir); err != nil {
		t.Fatal(err)
	}
	if stale, err := Stale(tree(), dir); err != nil || len(stale) != 0 {
		t.Fatalf("after Write: stale %v, %v", stale, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "gone.md")); !os.IsNotExist(err) {
		t.Errorf("a page no command has is left: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "notes.txt")); err != nil {
		t.Errorf("a file that is no page was removed: %v", err)
	}
	changed := tree()
	do, _, _ := changed.Find([]string{"do"})
	do.Flags().Bool("new", false, "a new flag")
	if stale, err := Stale(changed, dir); err != nil || !slices.Equal(stale, []string{"do.md"}) {
		t.Errorf("a new flag: stale %v, %v", stale, err)
	}
}
