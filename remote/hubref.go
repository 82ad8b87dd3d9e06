package remote

import (
	"fmt"
	"net/url"
	"path"
	"strings"
)

// Ref names a location on the Hugging Face Hub: a repository, a revision
// and a path inside it.
type Ref struct {
	Type     string // "model", "dataset" or "space"
	Repo     string // "ORG/NAME"
	Revision string // branch, tag or commit; "main" when not given
	Path     string // file or folder in the repository; "" for its root
	Endpoint string // scheme://host[/prefix] of a resolve URL; "" for hf:// (the Hub's endpoint)
}

// String returns the location as an hf:// URL.
func (r Ref) String() string {
	var b strings.Builder
	b.WriteString("hf://")
	if r.Type == "dataset" || r.Type == "space" {
		b.WriteString(r.Type + "s/")
	}
	b.WriteString(r.Repo)
	if r.Revision != "" && r.Revision != "main" {
		b.WriteString("@" + url.PathEscape(r.Revision))
	}
	if r.Path != "" {
		b.WriteString("/" + r.Path)
	}
	return b.String()
}

// IsHubURL reports whether s is an hf:// URL or has the shape of a Hub
// resolve URL (http(s)://HOST[/PREFIX]/[datasets/]ORG/REPO/resolve/REV/FILE),
// on any host: mirrors count. [Hub.Handles] accepts only the Hub's endpoint.
func IsHubURL(s string) bool {
	if strings.HasPrefix(s, "hf://") {
		return true
	}
	_, err := parseResolveURL(s)
	return err == nil
}

// ParseHubURL parses hf://[datasets/|spaces/]ORG/REPO[@REV][/PATH] and
// http(s)://HOST[/PREFIX]/[datasets/|spaces/]ORG/REPO/resolve/REV/FILE.
// A revision containing '/' is written URL-escaped (main%2Fx) except for
// pull requests, written as they are (@refs/pr/7). PATH must satisfy
// [ValidRepoPath].
func ParseHubURL(s string) (Ref, error) {
	if rest, ok := strings.CutPrefix(s, "hf://"); ok {
		return parseHF(s, rest)
	}
	return parseResolveURL(s)
}

func parseHF(s, rest string) (Ref, error) {
	bad := func(why string) (Ref, error) {
		return Ref{}, fmt.Errorf("%w: %q: %s (want hf://ORG/REPO[@REV][/PATH])", ErrInvalidURL, s, why)
	}
	if strings.ContainsAny(rest, "?#") {
		return bad("query and fragment are not allowed")
	}
	ref := Ref{Type: "model", Revision: "main"}
	segs := strings.Split(rest, "/")
	switch segs[0] {
	case "datasets", "spaces", "models":
		ref.Type = strings.TrimSuffix(segs[0], "s")
		segs = segs[1:]
	}
	if len(segs) < 2 {
		return bad("no ORG/REPO")
	}
	name, rev, hasRev := strings.Cut(segs[1], "@")
	ref.Repo = segs[0] + "/" + name
	if err := validRepoID(ref.Repo); err != nil {
		return bad(err.Error())
	}
	segs = segs[2:]
	if hasRev {
		if rev == "refs" && len(segs) >= 2 && segs[0] == "pr" && isDigits(segs[1]) {
			rev, segs = "refs/pr/"+segs[1], segs[2:]
		}
		r, err := url.PathUnescape(rev)
		if err != nil || r == "" {
			return bad("invalid revision")
		}
		if err := validRevision(r); err != nil {
			return bad(err.Error())
		}
		ref.Revision = r
	}
	ref.Path = strings.Join(segs, "/")
	ref.Path = strings.TrimSuffix(ref.Path, "/")
	if ref.Path != "" {
		if err := ValidRepoPath(ref.Path); err != nil {
			return Ref{}, fmt.Errorf("%q: %w", s, err)
		}
	}
	return ref, nil
}

func parseResolveURL(s string) (Ref, error) {
	bad := func(why string) (Ref, error) {
		return Ref{}, fmt.Errorf("%w: %q: %s (want https://HOST/ORG/REPO/resolve/REV/FILE)", ErrInvalidURL, s, why)
	}
	u, err := parseHTTPURL(s)
	if err != nil {
		return Ref{}, err
	}
	segs := strings.Split(strings.TrimPrefix(u.EscapedPath(), "/"), "/")
	k := -1
	for i, seg := range segs {
		if seg == "resolve" && i >= 2 {
			k = i
			break
		}
	}
	if k < 0 || k+2 >= len(segs) {
		return bad("no /ORG/REPO/resolve/REV/FILE")
	}
	ref := Ref{Type: "model"}
	prefix := segs[:k-2]
	if n := len(prefix); n > 0 && (prefix[n-1] == "datasets" || prefix[n-1] == "spaces") {
		ref.Type = strings.TrimSuffix(prefix[n-1], "s")
		prefix = prefix[:n-1]
	}
	unesc := func(p string) (string, bool) {
		v, err := url.PathUnescape(p)
		return v, err == nil
	}
	org, ok1 := unesc(segs[k-2])
	name, ok2 := unesc(segs[k-1])
	rev, ok3 := unesc(segs[k+1])
	file, ok4 := unesc(strings.Join(segs[k+2:], "/"))
	if !ok1 || !ok2 || !ok3 || !ok4 {
		return bad("invalid escape")
	}
	ref.Repo, ref.Revision, ref.Path = org+"/"+name, rev, file
	if err := validRepoID(ref.Repo); err != nil {
		return bad(err.Error())
	}
	if err := validRevision(rev); err != nil {
		return bad(err.Error())
	}
	if err := ValidRepoPath(file); err != nil {
		return Ref{}, fmt.Errorf("%q: %w", s, err)
	}
	ep := url.URL{Scheme: u.Scheme, Host: u.Host}
	if len(prefix) > 0 {
		ep.Path = "/" + strings.Join(prefix, "/")
	}
	ref.Endpoint = ep.String()
	return ref, nil
}

// validRepoID checks ORG/NAME: letters, digits, '-', '_', '.', no "..",
// neither part starting or ending with '-' or '.', at most 96 characters.
func validRepoID(id string) error {
	org, name, _ := strings.Cut(id, "/")
	for _, p := range []string{org, name} {
		if p == "" || len(p) > 96 {
			return fmt.Errorf("repository %q: empty or too long name", id)
		}
		for i := 0; i < len(p); i++ {
			c := p[i]
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
				return fmt.Errorf("repository %q: character %q not allowed", id, c)
			}
		}
		if strings.Contains(p, "..") || strings.HasPrefix(p, "-") || strings.HasPrefix(p, ".") || strings.HasSuffix(p, "-") || strings.HasSuffix(p, ".") {
			return fmt.Errorf("repository %q: invalid name", id)
		}
	}
	return nil
}

func validRevision(rev string) error {
	if rev == "" || len(rev) > 256 || strings.Contains(rev, "..") || strings.HasPrefix(rev, "/") || strings.HasSuffix(rev, "/") {
		return fmt.Errorf("invalid revision %q", rev)
	}
	for i := 0; i < len(rev); i++ {
		if rev[i] < 0x21 || rev[i] == 0x7f || strings.IndexByte(`\:?*[~^`, rev[i]) >= 0 {
			return fmt.Errorf("invalid revision %q", rev)
		}
	}
	return nil
}

func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

func isCommit(s string) bool {
	if len(s) != 40 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !(s[i] >= '0' && s[i] <= '9' || s[i] >= 'a' && s[i] <= 'f') {
			return false
		}
	}
	return true
}

// ValidRepoPath checks a path relative to a repository root (a file named
// by an index's weight_map, a --subfolder): not empty, no "..", "." or empty
// segment, not absolute, no backslash, no "://", no control characters, no
// percent escapes (so nothing decodes into any of these), at most 1024 bytes.
// It makes no request.
func ValidRepoPath(p string) error {
	bad := func(why string) error { return fmt.Errorf("%w %q: %s", ErrInvalidPath, p, why) }
	switch {
	case p == "":
		return bad("empty")
	case len(p) > 1024:
		return bad("longer than 1024 bytes")
	case strings.HasPrefix(p, "/"):
		return bad("absolute")
	case strings.Contains(p, "://"):
		return bad("a URL, not a path")
	case strings.ContainsAny(p, `\%`):
		return bad(`contains '\' or '%'`)
	}
	for i := 0; i < len(p); i++ {
		if p[i] < 0x20 || p[i] == 0x7f {
			return bad("contains a control character")
		}
	}
	if len(p) >= 2 && p[1] == ':' {
		return bad("a drive letter")
	}
	for _, seg := range strings.Split(p, "/") {
		if seg == "" || seg == "." || seg == ".." {
			return bad("empty, '.' or '..' segment")
		}
	}
	if path.Clean(p) != p {
		return bad("not a clean path")
	}
	return nil
}
