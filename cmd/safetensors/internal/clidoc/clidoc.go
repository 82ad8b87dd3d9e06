// Package clidoc renders the CLI reference, docs/cli, from a cobra command
// tree with github.com/spf13/cobra/doc: one Markdown page per command, named
// after it (serve.md for "safetensors serve"), and README.md for the root
// command, which is the index. The output is deterministic (no dates), so a
// test can compare it with the committed pages.
//
// Cobra's own commands are left out: help (GenMarkdown leaves it out) and
// completion, which the reference names in one line instead of five
// boilerplate pages. It is imported by the generator behind the gendocs
// build tag and by the CLI's tests, never by the safetensors binary.
package clidoc

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/gosafetensors/safetensors/internal/atomicfile"
	"github.com/spf13/cobra"
	"github.com/spf13/cobra/doc"
)

// Header starts every page.
const Header = "<!-- Generated from the commands by `go generate ./cmd/safetensors`; do not edit. -->\n\n"

// Index is the file name of the root command's page.
const Index = "README.md"

// indexFooter ends the index page.
const indexFooter = `
The conventions every command follows — locations, exit status, output, writing files — are in
[../cli-conventions.md](../cli-conventions.md); JSON outputs in [../json.md](../json.md).
Shell completion scripts: ` + "`%[1]s completion bash|zsh|fish|powershell`" + ` (cobra's; see
` + "`%[1]s completion --help`" + `).
`

// Environment is the environment the reference is rendered in, as
// variable=value pairs: flag defaults drawn from the machine (os.TempDir,
// the home and XDG state directories) then print as the variables' names
// and the pages are the same on every machine. Set it before the command
// tree is built, as the generator and TestCLIDocs do.
var Environment = []string{"TMPDIR=$TMPDIR", "HOME=~", "XDG_STATE_HOME=$XDG_STATE_HOME"}

// SetEnvironment sets each variable of Environment with set (os.Setenv,
// or a test's t.Setenv).
func SetEnvironment(set func(key, value string) error) error {
	for _, kv := range Environment {
		k, v, _ := strings.Cut(kv, "=")
		if err := set(k, v); err != nil {
			return err
		}
	}
	return nil
}

// Pages renders the reference of root and its subcommands: file name to
// page. The command tree is left as it was, but for cobra's help command
// and flag, which cobra adds when it renders help.
func Pages(root *cobra.Command) (map[string][]byte, error) {
	if root.HasParent() {
		return nil, errors.New("clidoc: not a root command: " + root.CommandPath())
	}
	for _, c := range root.Commands() {
		if c.Name() == "completion" && !c.Hidden {
			c.Hidden = true // no page, no link
			defer func() { c.Hidden = false }()
		}
	}
	pages := make(map[string][]byte)
	var walk func(c *cobra.Command) error
	walk = func(c *cobra.Command) error {
		if c != root && (!c.IsAvailableCommand() || c.IsAdditionalHelpTopicCommand()) {
			return nil
		}
		page, err := render(c, root)
		if err != nil {
			return fmt.Errorf("clidoc: %s: %w", c.CommandPath(), err)
		}
		pages[fileName(c.CommandPath(), root.Name())] = page
		for _, sub := range c.Commands() {
			if err := walk(sub); err != nil {
				return err
			}
		}
		return nil
	}
	if err := walk(root); err != nil {
		return nil, err
	}
	return pages, nil
}

// render is cobra/doc's page of c, after Header, with the long description
// fenced as text (it is laid out for a terminal: aligned columns, indented
// lists) and links to the pages' file names.
func render(c, root *cobra.Command) ([]byte, error) {
	long, tag := c.Long, c.DisableAutoGenTag
	defer func() { c.Long, c.DisableAutoGenTag = long, tag }()
	if strings.TrimSpace(long) != "" {
		c.Long = "```text\n" + strings.Trim(long, "\n") + "\n```"
	}
	c.DisableAutoGenTag = true
	var buf bytes.Buffer
	buf.WriteString(Header)
	link := func(name string) string {
		return fileName(strings.ReplaceAll(strings.TrimSuffix(name, ".md"), "_", " "), root.Name())
	}
	if err := doc.GenMarkdownCustom(c, &buf, link); err != nil {
		return nil, err
	}
	if c == root {
		fmt.Fprintf(&buf, indexFooter, root.Name())
	}
	return promote(buf.Bytes()), nil
}

// promote raises cobra/doc's headings one level ("## safetensors serve" is
// the page's title, "### Options" a section), outside code blocks.
func promote(page []byte) []byte {
	lines := strings.SplitAfter(string(page), "\n")
	fenced := false
	for i, l := range lines {
		switch {
		case strings.HasPrefix(l, "```"):
			fenced = !fenced
		case !fenced && strings.HasPrefix(l, "##"):
			lines[i] = l[1:]
		}
	}
	return []byte(strings.Join(lines, ""))
}

// fileName is the page of the command with path ("safetensors serve" is
// serve.md, the root is Index).
func fileName(path, rootName string) string {
	rest := strings.Fields(path)[1:]
	if len(rest) == 0 {
		return Index
	}
	return strings.Join(rest, "_") + ".md"
}

// Write makes dir hold the reference of root: every page is written
// atomically, and a .md file of dir that is no page (a removed command's)
// is removed.
func Write(root *cobra.Command, dir string) error {
	pages, err := Pages(root)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o777); err != nil {
		return err
	}
	for _, name := range sortedKeys(pages) {
		f, err := atomicfile.Create(filepath.Join(dir, name))
		if err != nil {
			return err
		}
		if _, err := f.Write(pages[name]); err != nil {
			f.Abort()
			return err
		}
		if err := f.Commit(); err != nil {
			return err
		}
	}
	old, err := filepath.Glob(filepath.Join(dir, "*.md"))
	if err != nil {
		return err
	}
	for _, p := range old {
		if _, ok := pages[filepath.Base(p)]; !ok {
			if err := os.Remove(p); err != nil {
				return err
			}
		}
	}
	return nil
}

// Stale compares dir with the reference of root and returns the names of
// the pages that differ from it or are missing, and of the .md files of
// dir that are no page, sorted; none when dir is current.
func Stale(root *cobra.Command, dir string) ([]string, error) {
	pages, err := Pages(root)
	if err != nil {
		return nil, err
	}
	var stale []string
	for name, want := range pages {
		got, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, err
		}
		if err != nil || !bytes.Equal(got, want) {
			stale = append(stale, name)
		}
	}
	old, err := filepath.Glob(filepath.Join(dir, "*.md"))
	if err != nil {
		return nil, err
	}
	for _, p := range old {
		if _, ok := pages[filepath.Base(p)]; !ok {
			stale = append(stale, filepath.Base(p))
		}
	}
	slices.Sort(stale)
	return stale, nil
}

func sortedKeys(m map[string][]byte) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
