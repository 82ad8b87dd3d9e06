package main

import (
	"os"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/gosafetensors/safetensors/audit"
	"github.com/gosafetensors/safetensors/inspect"
	"github.com/spf13/cobra"
)

// jsonTypes is the Go type each command's --json output marshals, to hold
// docs/json.md to what the commands print.
var jsonTypes = map[string]any{
	"convert":  convertJSON{},
	"diff":     diffJSON{},
	"download": downloadJSON{},
	"estimate": estimateJSON{},
	"inspect":  inspect.Report{},
	"load":     loadJSON{},
	"scan":     audit.ScanReport{},
	"stats":    statsJSON{},
	"validate": audit.ValidateReport{},
	"verify":   verifyJSON{},
}

// jsonFields returns the JSON names of t's fields, and of the fields of the
// structs it holds (in slices, maps, pointers), recursively.
func jsonFields(t reflect.Type, seen map[reflect.Type]bool, out map[string]bool) {
	for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice || t.Kind() == reflect.Array || t.Kind() == reflect.Map {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct || seen[t] {
		return
	}
	seen[t] = true
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" || !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		if name == "" {
			name = f.Name
		}
		out[name] = true
		jsonFields(f.Type, seen, out)
	}
}

// codeWords returns the identifiers written in code spans of lines.
func codeWords(lines []string) map[string]bool {
	words := map[string]bool{}
	span := regexp.MustCompile("`[^`]+`")
	ident := regexp.MustCompile(`[A-Za-z_][A-Za-z0-9_]*`)
	fence := false
	for _, line := range lines {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fence = !fence
			continue
		}
		spans := span.FindAllString(line, -1)
		if fence {
			spans = []string{line} // an example document names its fields too
		}
		for _, s := range spans {
			for _, w := range ident.FindAllString(s, -1) {
				words[w] = true
			}
		}
	}
	return words
}

// TestJSONDocs checks that every command with a --json flag has a section
// in docs/json.md, and that the section names every field the command
// prints.
func TestJSONDocs(t *testing.T) {
	b, err := os.ReadFile("../../docs/json.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := strings.Split(string(b), "\n")
	sections := map[string][]string{}
	var cur string
	for _, line := range doc {
		if strings.HasPrefix(line, "## ") {
			cur = ""
			if name, ok := strings.CutSuffix(strings.TrimPrefix(line, "## `"), " --json`"); ok && !strings.ContainsAny(name, "` ") {
				cur = name
				sections[cur] = nil
			}
			continue
		}
		if cur != "" {
			sections[cur] = append(sections[cur], line)
		}
	}
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		for _, sub := range c.Commands() {
			walk(sub)
		}
		if c.LocalFlags().Lookup("json") == nil {
			return
		}
		name := c.Name()
		lines, ok := sections[name]
		if !ok {
			t.Errorf("%s has a --json flag and docs/json.md no \"## `%s --json`\" section: document its output there", c.CommandPath(), name)
			return
		}
		typ, ok := jsonTypes[name]
		if !ok {
			t.Errorf("%s has a --json flag: add the type it prints to jsonTypes in docs_json_test.go", c.CommandPath())
			return
		}
		fields := map[string]bool{}
		jsonFields(reflect.TypeOf(typ), map[reflect.Type]bool{}, fields)
		words := codeWords(lines)
		for f := range fields {
			if !words[f] {
				t.Errorf("docs/json.md, section `%s --json`: the field %q that %s prints is not described", name, f, c.CommandPath())
			}
		}
	}
	walk(newRootCmd())
	for name := range sections {
		if _, ok := jsonTypes[name]; !ok {
			t.Errorf("docs/json.md has a section for `%s --json`, a command without --json output", name)
		}
	}
}
