package docscheck

import (
	"bufio"
	"context"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode"
)

// root is the module's root, from this package's folder.
const root = "../.."

// maxReadme is the README's budget: a quickstart, not the manual.
const maxReadme = 12_000

// quickstart is how README.md must begin: a heading, then these two
// commands, which work on a fresh clone with Go installed.
const quickstart = "```sh\n" +
	"go run ./cmd/safetensors inspect testdata/torch/tiny_transformer.safetensors\n" +
	"go test ./...\n" +
	"```\n"

func read(t *testing.T, rel string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, rel))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// goTool returns the go command: the one on PATH, else the one in
// $GOROOT/bin (go test sets GOROOT for the tests it runs).
func goTool(t *testing.T) string {
	t.Helper()
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	if p := filepath.Join(os.Getenv("GOROOT"), "bin", "go"); os.Getenv("GOROOT") != "" && fileExists(p) {
		return p
	}
	t.Skip("the go command is not on PATH: cannot run go list or the quickstart")
	return ""
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

func TestReadmeSize(t *testing.T) {
	if n := len(read(t, "README.md")); n > maxReadme {
		t.Errorf("README.md is %d bytes, more than the %d a quickstart may take: move the details into docs/", n, maxReadme)
	}
}

// TestReadmeStartsWithQuickstart checks that README.md opens with the two
// commands, that the file the first one names ships with the repository,
// and (unless -short) that the first one works.
func TestReadmeStartsWithQuickstart(t *testing.T) {
	s := read(t, "README.md")
	first, rest, _ := strings.Cut(s, "\n")
	if !strings.HasPrefix(first, "# ") {
		t.Fatalf("README.md starts with %q, not a title", first)
	}
	if !strings.HasPrefix(strings.TrimLeft(rest, "\n"), quickstart) {
		t.Fatalf("README.md must begin, after its title, with\n%s", quickstart)
	}
	if !fileExists(filepath.Join(root, "testdata/torch/tiny_transformer.safetensors")) {
		t.Fatal("the quickstart's file testdata/torch/tiny_transformer.safetensors is gone")
	}
	if testing.Short() {
		t.Skip("-short: not running the quickstart's first command")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, goTool(t), "run", "./cmd/safetensors", "inspect", "testdata/torch/tiny_transformer.safetensors")
	cmd.Dir = root
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("README's first command failed: %v\n%s", err, out)
	}
	for _, want := range []string{"h.0.fc_in.bias", "lm_head.weight", "1,600"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("README's first command printed no %q:\n%s", want, out)
		}
	}
}

// section returns the lines of the Markdown section that starts with the
// heading line head, up to the next heading of the same or a higher level.
func section(t *testing.T, doc, name, head string) []string {
	t.Helper()
	level := strings.IndexFunc(head, func(r rune) bool { return r != '#' })
	var out []string
	in := false
	for _, line := range strings.Split(doc, "\n") {
		if line == head {
			in = true
			continue
		}
		if in {
			if l := strings.IndexFunc(line, func(r rune) bool { return r != '#' }); l > 0 && l <= level && strings.HasPrefix(line[l:], " ") {
				break
			}
			out = append(out, line)
		}
	}
	if !in {
		t.Fatalf("%s has no %q section", name, head)
	}
	return out
}

// firstCell returns the backquoted first cell of a Markdown table row
// ("| `x` | ..."), or "".
func firstCell(line string) string {
	rest, ok := strings.CutPrefix(line, "| `")
	if !ok {
		return ""
	}
	cell, _, ok := strings.Cut(rest, "` |")
	if !ok {
		return ""
	}
	return cell
}

// TestLayoutListsEveryPackage holds CONTRIBUTING.md's layout table to the
// module's packages, both ways.
func TestLayoutListsEveryPackage(t *testing.T) {
	cmd := exec.Command(goTool(t), "list", "-f", "{{.ImportPath}}|{{.Module.Path}}", "./...")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	pkgs := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		imp, mod, _ := strings.Cut(line, "|")
		rel := strings.TrimPrefix(strings.TrimPrefix(imp, mod), "/")
		if rel == "" {
			rel = "."
		}
		pkgs[rel] = true
	}
	listed := map[string]bool{}
	for _, line := range section(t, read(t, "CONTRIBUTING.md"), "CONTRIBUTING.md", "## Layout") {
		if c := firstCell(line); c != "" {
			if listed[c] {
				t.Errorf("CONTRIBUTING.md's layout lists %s twice", c)
			}
			listed[c] = true
		}
	}
	for p := range pkgs {
		if !listed[p] {
			t.Errorf("package %s is missing from CONTRIBUTING.md's layout: add a line \"| `%s` | what it is |\"", p, p)
		}
	}
	for p := range listed {
		if !pkgs[p] {
			t.Errorf("CONTRIBUTING.md's layout lists %s, which is not a package of the module (go list ./...)", p)
		}
	}
}

// requires returns the modules go.mod requires, direct and indirect.
func requires(t *testing.T) (direct, all map[string]bool) {
	t.Helper()
	direct, all = map[string]bool{}, map[string]bool{}
	sc := bufio.NewScanner(strings.NewReader(read(t, "go.mod")))
	block := false
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "require (":
			block = true
			continue
		case block && line == ")":
			block = false
			continue
		case strings.HasPrefix(line, "require "):
			line = strings.TrimPrefix(line, "require ")
		case !block:
			continue
		}
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		all[f[0]] = true
		if !strings.Contains(line, "// indirect") {
			direct[f[0]] = true
		}
	}
	if len(direct) == 0 {
		t.Fatal("found no direct requirement in go.mod")
	}
	return direct, all
}

// TestDependenciesDocumented checks that docs/dependencies.md names every
// module go.mod requires directly, and that its tables name no module
// go.mod does not require.
func TestDependenciesDocumented(t *testing.T) {
	direct, all := requires(t)
	doc := read(t, "docs/dependencies.md")
	for m := range direct {
		if !strings.Contains(doc, "`"+m+"`") {
			t.Errorf("go.mod requires %s, which docs/dependencies.md does not name: add it (as `%s`) with who imports it and why", m, m)
		}
	}
	modulePath := regexp.MustCompile("`([a-z0-9.-]+\\.[a-z]+/[^`\\s]*)`")
	for _, line := range strings.Split(doc, "\n") {
		if !strings.HasPrefix(line, "| `") {
			continue
		}
		cell := strings.SplitN(line, "|", 3)[1]
		for _, m := range modulePath.FindAllStringSubmatch(cell, -1) {
			if !all[m[1]] {
				t.Errorf("docs/dependencies.md lists %s, which go.mod does not require", m[1])
			}
		}
	}
}

// markdownFiles returns README.md, CONTRIBUTING.md and every .md file under
// docs/, relative to the root.
func markdownFiles(t *testing.T) []string {
	t.Helper()
	files := []string{"README.md", "CONTRIBUTING.md"}
	err := filepath.WalkDir(filepath.Join(root, "docs"), func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasSuffix(p, ".md") {
			rel, _ := filepath.Rel(root, p)
			files = append(files, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// prose returns doc without its fenced code blocks and inline code spans,
// where a ](x) is not a link.
func prose(doc string) string {
	var b strings.Builder
	fence := false
	for _, line := range strings.Split(doc, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fence = !fence
			continue
		}
		if fence {
			continue
		}
		parts := strings.Split(line, "`")
		for i := 0; i < len(parts); i += 2 {
			b.WriteString(parts[i])
		}
		b.WriteByte('\n')
	}
	return b.String()
}

// anchors returns the heading anchors GitHub gives the Markdown doc.
func anchors(doc string) map[string]bool {
	out := map[string]bool{}
	fence := false
	for _, line := range strings.Split(doc, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fence = !fence
		}
		if fence || !strings.HasPrefix(line, "#") {
			continue
		}
		text := strings.TrimSpace(strings.TrimLeft(line, "#"))
		slug := slugify(text)
		s := slug
		for i := 1; out[s]; i++ {
			s = fmt.Sprintf("%s-%d", slug, i)
		}
		out[s] = true
	}
	return out
}

// slugify is GitHub's heading anchor: lower case, punctuation dropped
// (hyphens and underscores kept), spaces turned into hyphens.
func slugify(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

var linkRE = regexp.MustCompile(`\]\(([^()\s]+)\)`)

// TestLinks checks that every relative link of the project's Markdown leads
// to a file that exists, and every #anchor to a heading of its file.
func TestLinks(t *testing.T) {
	heads := map[string]map[string]bool{}
	headsOf := func(rel string) map[string]bool {
		if h, ok := heads[rel]; ok {
			return h
		}
		h := anchors(read(t, rel))
		heads[rel] = h
		return h
	}
	for _, file := range markdownFiles(t) {
		for _, m := range linkRE.FindAllStringSubmatch(prose(read(t, file)), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			path, anchor, _ := strings.Cut(target, "#")
			rel := file
			if path != "" {
				rel = filepath.ToSlash(filepath.Join(filepath.Dir(file), path))
				if !fileExists(filepath.Join(root, rel)) {
					t.Errorf("%s: link to %s: no such file", file, target)
					continue
				}
			}
			if anchor != "" {
				if !strings.HasSuffix(rel, ".md") {
					t.Errorf("%s: link to %s: an anchor into a file that is not Markdown", file, target)
				} else if !headsOf(rel)[anchor] {
					t.Errorf("%s: link to %s: %s has no heading with the anchor #%s", file, target, rel, anchor)
				}
			}
		}
	}
}

// TestGoMentionsOfDocs checks that the docs/ files Go code and help texts
// point readers to exist.
func TestGoMentionsOfDocs(t *testing.T) {
	mention := regexp.MustCompile(`docs/[A-Za-z0-9_/.-]*[A-Za-z0-9_-]\.[a-z]+`)
	var bad []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".") && p != root) {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(p, ".go") {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		for _, m := range mention.FindAllString(string(b), -1) {
			if !fileExists(filepath.Join(root, m)) {
				rel, _ := filepath.Rel(root, p)
				bad = append(bad, fmt.Sprintf("%s mentions %s, which does not exist", rel, m))
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(bad)
	for _, b := range slices.Compact(bad) {
		t.Error(b)
	}
}

func TestSlugify(t *testing.T) {
	for heading, want := range map[string]string{
		"`scan --json`":                       "scan---json",
		"Offline, and `hf://` reads":          "offline-and-hf-reads",
		"The opener (`source`)":               "the-opener-source",
		"grouped, version 2":                  "grouped-version-2",
		"What `scan` promises":                "what-scan-promises",
		"Numbers in `stats`, `diff` and JSON": "numbers-in-stats-diff-and-json",
		"Fixtures and testdata":               "fixtures-and-testdata",
		"snake_case and Ünïcode":              "snake_case-and-ünïcode",
	} {
		if got := slugify(heading); got != want {
			t.Errorf("slugify(%q) = %q, want %q", heading, got, want)
		}
	}
	if a := anchors("# A\n## A\n```\n# not a heading\n```\n"); !a["a"] || !a["a-1"] || a["not-a-heading"] {
		t.Errorf("anchors: %v", a)
	}
}
