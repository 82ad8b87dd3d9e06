package download

import (
	"fmt"
	"regexp"
	"strings"
)

// checkPattern refuses a pattern Python's fnmatch would not read as we do.
func checkPattern(p string) error {
	if p == "" {
		return fmt.Errorf("empty pattern")
	}
	if _, err := compilePattern(p); err != nil {
		return fmt.Errorf("pattern %q: %v", p, err)
	}
	return nil
}

// compilePattern translates a pattern as huggingface_hub's
// filter_repo_objects reads it: a pattern ending in '/' gets a '*'; then
// Python's fnmatch: '*' any run of characters ('/' included), '?' one
// character, '[seq]' and '[!seq]' a class; the whole path must match.
func compilePattern(p string) (*regexp.Regexp, error) {
	if strings.HasSuffix(p, "/") {
		p += "*"
	}
	var b strings.Builder
	b.WriteString(`(?s)\A`)
	for i := 0; i < len(p); i++ {
		switch c := p[i]; c {
		case '*':
			b.WriteString(`.*`)
		case '?':
			b.WriteString(`.`)
		case '[':
			j := i + 1
			if j < len(p) && p[j] == '!' {
				j++
			}
			if j < len(p) && p[j] == ']' {
				j++
			}
			for j < len(p) && p[j] != ']' {
				j++
			}
			if j >= len(p) { // no closing ']': a literal '[', as fnmatch does
				b.WriteString(`\[`)
				continue
			}
			class := p[i+1 : j]
			neg := strings.HasPrefix(class, "!")
			if neg {
				class = class[1:]
			}
			class = strings.ReplaceAll(class, `\`, `\\`)
			if neg {
				b.WriteString("[^" + class + "]")
			} else if strings.HasPrefix(class, "^") {
				b.WriteString(`[\` + class + "]")
			} else {
				b.WriteString("[" + class + "]")
			}
			i = j
		default:
			b.WriteString(regexp.QuoteMeta(string(c)))
		}
	}
	b.WriteString(`\z`)
	return regexp.Compile(b.String())
}

// filter chooses paths by include and exclude patterns.
type filter struct{ include, exclude []*regexp.Regexp }

func newFilter(include, exclude []string) (*filter, error) {
	f := &filter{}
	for _, p := range include {
		re, err := compilePattern(p)
		if err != nil {
			return nil, err
		}
		f.include = append(f.include, re)
	}
	for _, p := range exclude {
		re, err := compilePattern(p)
		if err != nil {
			return nil, err
		}
		f.exclude = append(f.exclude, re)
	}
	return f, nil
}

func (f *filter) match(path string) bool {
	if len(f.include) > 0 {
		ok := false
		for _, re := range f.include {
			if re.MatchString(path) {
				ok = true
				break
			}
		}
		if !ok {
			return false
		}
	}
	for _, re := range f.exclude {
		if re.MatchString(path) {
			return false
		}
	}
	return true
}
