// Package safename decides whether a file name that a server chose — a
// Hub listing's path, a bucket key below a prefix, a shard an index names —
// may become a path on the local disk, below a folder the user gave
// (download --local-dir) or a cache snapshot.
//
// A name must not leave the folder (absolute, "..", a drive, a UNC or
// backslash path: huggingface_hub refuses those too), must not alias
// another name on the file systems tools are used on (trailing dots and
// spaces, which Windows drops; invisible characters, which HFS+ ignores;
// case, which macOS and Windows ignore), and must not land where it
// changes what a tool does: a .git folder (a repository's config runs
// commands: core.fsmonitor, core.hooksPath), and the metadata folders of
// huggingface_hub (.cache/huggingface) and of this module
// (.cache/safetensors), under any spelling those file systems take for
// them (".GIT", "git~1", ".git.", ".git::$INDEX_ALLOCATION"), at any
// depth. No legitimate repository holds such a name: git refuses .git in
// a tree, huggingface_hub refuses to upload .git and .cache folders.
//
// The rule is one function, [Check], for one name, and [CheckSet] for the
// names one download writes together (a file and a folder of one name,
// two names that differ only in case).
package safename

import (
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"
)

// ErrUnsafe is wrapped by every error of this package.
var ErrUnsafe = errors.New("unsafe file name")

// MaxBytes bounds a whole name (as remote.ValidRepoPath does).
const MaxBytes = 1024

// MaxComponentBytes bounds one component of a name: 255 bytes (NAME_MAX
// of ext4, XFS, tmpfs, APFS) less the longest suffix this module's writers
// add to a file's name — a temporary ".NAME.metadata.tmp-<12 hex>" beside
// huggingface_hub's metadata of a --local-dir download (27 bytes) — so
// that every file a download writes for a name can be created.
const MaxComponentBytes = 255 - len("..metadata.tmp-123456789abc")

// Error reports a name that may not be written, and why.
type Error struct {
	Name   string // as the server gave it
	Reason string
	// Other is the name a CheckSet error found it collides with.
	Other string
}

func (e *Error) Error() string {
	if e.Other != "" {
		return fmt.Sprintf("%s: %q and %q: %s", ErrUnsafe, e.Name, e.Other, e.Reason)
	}
	return fmt.Sprintf("%s %q: %s", ErrUnsafe, e.Name, e.Reason)
}

// Unwrap returns ErrUnsafe.
func (e *Error) Unwrap() error { return ErrUnsafe }

// reserved are the folders no name may enter or replace, as sequences of
// folded components (see fold).
var reserved = [][]string{
	{".git"},
	{".cache", "huggingface"},
	{".cache", "safetensors"},
}

// Check returns a *Error if name, a '/'-separated path relative to a local
// folder, may not be written there.
func Check(name string) error {
	bad := func(why string) error { return &Error{Name: name, Reason: why} }
	switch {
	case name == "":
		return bad("empty")
	case len(name) > MaxBytes:
		return bad(fmt.Sprintf("longer than %d bytes", MaxBytes))
	case !utf8.ValidString(name):
		return bad("not valid UTF-8")
	case strings.HasPrefix(name, "/"):
		return bad("an absolute path")
	case strings.ContainsRune(name, '\\'):
		return bad(`contains '\' (a Windows separator: a UNC or drive path, or a way out of the folder)`)
	}
	for _, r := range name {
		if unicode.IsControl(r) || unicode.Is(unicode.Cf, r) {
			return bad(fmt.Sprintf("contains the invisible or control character %U", r))
		}
	}
	segs := strings.Split(name, "/")
	folded := make([]string, len(segs))
	for i, s := range segs {
		switch {
		case s == "" || s == "." || s == "..":
			return bad("an empty, '.' or '..' component")
		case len(s) > MaxComponentBytes:
			return bad(fmt.Sprintf("a component of %d bytes (at most %d: file systems allow 255 with the suffixes of partial and metadata files)", len(s), MaxComponentBytes))
		case strings.HasSuffix(s, ".") || strings.HasSuffix(s, " "):
			return bad(fmt.Sprintf("component %q ends with a dot or a space (Windows drops them: it would be another name)", s))
		case len(s) >= 2 && s[1] == ':' && isLetter(s[0]):
			return bad(fmt.Sprintf("component %q is a Windows drive path", s))
		}
		folded[i] = fold(s)
	}
	for i := range folded {
		for _, r := range reserved {
			n := min(len(r), len(folded)-i)
			if slices.Equal(folded[i:i+n], r[:n]) && (n == len(r) || i+n == len(folded)) {
				where := strings.Join(r, "/")
				switch {
				case n < len(r):
					return bad(fmt.Sprintf("would take the place of the %s folder (%s)", where, reason(r)))
				case i+n == len(folded):
					return bad(fmt.Sprintf("names %s itself (%s)", where, reason(r)))
				}
				return bad(fmt.Sprintf("inside a %s folder (%s)", where, reason(r)))
			}
		}
	}
	if runtime.GOOS == "windows" && !filepath.IsLocal(filepath.FromSlash(name)) {
		return bad("not a local name on Windows (a reserved device name or a colon)")
	}
	return nil
}

func reason(r []string) string {
	if r[0] == ".git" {
		return "git reads its config, hooks and attributes there and runs commands they name"
	}
	if r[1] == "huggingface" {
		return "huggingface_hub's metadata: it decides what is up to date"
	}
	return "this module's partial files and journals"
}

// fold returns the name a case-insensitive Windows or macOS file system
// resolves component s to, for comparison with reserved names: an NTFS
// stream (":$DATA") cut off, lower case, and the 8.3 short names of .git
// and .cache.
func fold(s string) string {
	if i := strings.IndexByte(s, ':'); i > 0 {
		s = s[:i]
	}
	s = strings.TrimRight(s, ". ")
	s = strings.ToLower(s)
	switch s {
	case "git~1":
		return ".git"
	case "cache~1":
		return ".cache"
	}
	return s
}

func isLetter(c byte) bool { return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' }

// CheckSet checks each name with [Check], then the names together, as one
// download writes them into one folder: no name may be a folder of another
// ("a" and "a/b": one of them cannot be written), and no two names may
// differ only in case (on macOS and Windows one would overwrite the other).
// It returns every problem (errors.Join), in the order of names.
func CheckSet(names []string) error {
	var errs []error
	files := make(map[string]string, len(names))   // folded name -> name
	folders := make(map[string]string, len(names)) // folded folder -> a name under it
	for _, n := range names {
		if err := Check(n); err != nil {
			errs = append(errs, err)
			continue
		}
		k := strings.ToLower(n)
		if o, ok := files[k]; ok {
			if o == n {
				errs = append(errs, &Error{Name: n, Reason: "listed twice"})
			} else {
				errs = append(errs, &Error{Name: n, Other: o, Reason: "differ only in case (one would overwrite the other on macOS and Windows)"})
			}
			continue
		}
		files[k] = n
		for i := strings.IndexByte(k, '/'); i >= 0; i = nextSlash(k, i) {
			if _, ok := folders[k[:i]]; !ok {
				folders[k[:i]] = n
			}
		}
	}
	for _, n := range names {
		if o, ok := folders[strings.ToLower(n)]; ok && Check(n) == nil {
			errs = append(errs, &Error{Name: n, Other: o, Reason: "a file and a folder of the same name"})
		}
	}
	return errors.Join(errs...)
}

func nextSlash(s string, i int) int {
	j := strings.IndexByte(s[i+1:], '/')
	if j < 0 {
		return -1
	}
	return i + 1 + j
}
