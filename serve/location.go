package serve

import (
	"errors"
	"fmt"
	"net/netip"
	"net/url"
	"path"
	"strings"

	"github.com/gosafetensors/safetensors/internal/redact"
	"github.com/gosafetensors/safetensors/remote"
	"github.com/gosafetensors/safetensors/source"
)

// ErrForbiddenLocation is the error of a location the service refuses to
// read: no --allow-location pattern matches it, it is a local path and
// the service has no root, or it is spelt in a way that could mean two
// things (credentials in the URL, "..", a fragment).
var ErrForbiddenLocation = errors.New("serve: location not allowed")

// pattern is one --allow-location pattern: SCHEME://HOST/PATH[?QUERY].
//
// The host is a glob (path.Match: "*.example.com", "127.0.0.1:*"), or "**"
// for any host; the path a glob in which "*" matches within one segment and
// "**" any number of segments (none included). A pattern whose host is "**"
// and that has no path ("https://**", "s3://**") matches every location of
// its scheme.
//
// hf:// locations (hf://[datasets/|spaces/]ORG/REPO[@REV][/PATH]) have no
// host: the organisation is their first segment, and their pattern is
// matched against the segments [datasets|spaces/]ORG/REPO/PATH as a whole,
// so "hf://**" matches every Hub location, "hf://my-org/**" every
// repository of my-org (not its datasets: "hf://datasets/my-org/**"), and
// "hf://*/**" every model and dataset. The organisation and repository are
// compared ignoring case, as the Hub compares them. A pattern whose
// repository segment names a revision ("hf://my-org/model@main/**")
// matches that revision only; without one, every revision.
//
// The query, if the pattern has one, must be given exactly (a bucket
// URL's endpoint and options); without one the location may have no
// query unless the pattern ends in "?*".
type pattern struct {
	raw, scheme, host, path, query string
	anyQuery                       bool
	hf                             []string // an hf:// pattern's segments
	hfRev                          bool     // it names a revision
}

func parsePattern(s string) (*pattern, error) {
	bad := func(why string) (*pattern, error) {
		return nil, fmt.Errorf("--allow-location %q: %s (want SCHEME://HOST/PATH, e.g. https://huggingface.co/**, hf://my-org/** or s3://uploads/models/**)", s, why)
	}
	p := &pattern{raw: s}
	rest := s
	if i := strings.LastIndex(rest, "?"); i >= 0 {
		p.query, rest = rest[i+1:], rest[:i]
		if p.query == "*" {
			p.anyQuery, p.query = true, ""
		}
	}
	scheme, after, ok := strings.Cut(rest, "://")
	if !ok || scheme == "" {
		return bad("no scheme")
	}
	p.scheme = strings.ToLower(scheme)
	var hasPath bool
	p.host, p.path, hasPath = strings.Cut(after, "/")
	p.path = "/" + p.path
	if p.host == "" {
		return bad("no host (bucket, organisation)")
	}
	if strings.ContainsAny(p.host, "@") && p.scheme != "hf" {
		return bad("credentials are not allowed in a pattern")
	}
	if _, err := path.Match(p.host, ""); err != nil {
		return bad("host: " + err.Error())
	}
	if p.scheme == "file" {
		return bad("file:// reads the service's own disk: use --root")
	}
	if p.host == "**" && !hasPath {
		p.path = "/**"
	}
	if p.scheme == "hf" {
		if p.query != "" || p.anyQuery {
			return bad("hf:// locations have no query")
		}
		p.hf = strings.Split(strings.TrimSuffix(after, "/"), "/")
		if p.hf[0] == "models" {
			p.hf = p.hf[1:]
		}
		repo := 1 // the index of the repository segment
		if len(p.hf) > 0 && (p.hf[0] == "datasets" || p.hf[0] == "spaces") {
			repo = 2
		}
		for i, seg := range p.hf {
			if _, err := path.Match(seg, ""); err != nil {
				return bad("path: " + err.Error())
			}
			name, rev, hasRev := strings.Cut(seg, "@")
			if hasRev && i != repo {
				return bad("a revision (@REV) belongs to the repository segment")
			}
			p.hfRev = p.hfRev || hasRev
			if i == repo || i == repo-1 {
				p.hf[i] = strings.ToLower(name)
				if hasRev {
					p.hf[i] += "@" + rev
				}
			}
		}
	}
	return p, nil
}

// match reports whether the location (already checked by checkSpelling
// and parsed) matches.
func (p *pattern) match(u *url.URL) bool {
	if strings.ToLower(u.Scheme) != p.scheme {
		return false
	}
	if p.hf != nil {
		segs, ok := hfSegments(u.String(), p.hfRev)
		return ok && globPath(p.hf, segs)
	}
	if ok, _ := path.Match(strings.ToLower(p.host), strings.ToLower(u.Host)); !ok && p.host != "**" {
		return false
	}
	if !p.anyQuery && u.RawQuery != p.query {
		return false
	}
	p2 := u.Path
	if p2 == "" {
		p2 = "/"
	}
	return globPath(strings.Split(p.path, "/"), strings.Split(p2, "/"))
}

// matchIgnoringQuery is match for a URL the service requests on a
// location's behalf (a redirect's target): its query is not the client's.
func (p *pattern) matchIgnoringQuery(u *url.URL) bool {
	v := *u
	v.RawQuery, v.ForceQuery = p.query, false
	return p.match(&v)
}

// hfSegments returns the segments an hf:// pattern is matched against:
// [datasets|spaces,] ORG, REPO (with "@REV" if withRev), then the path in
// the repository; the organisation and repository in lower case.
func hfSegments(loc string, withRev bool) ([]string, bool) {
	ref, err := remote.ParseHubURL(loc)
	if err != nil {
		return nil, false
	}
	var segs []string
	if ref.Type == "dataset" || ref.Type == "space" {
		segs = append(segs, ref.Type+"s")
	}
	org, repo, _ := strings.Cut(strings.ToLower(ref.Repo), "/")
	if withRev {
		repo += "@" + url.PathEscape(ref.Revision)
	}
	segs = append(segs, org, repo)
	if ref.Path != "" {
		segs = append(segs, strings.Split(ref.Path, "/")...)
	}
	return segs, true
}

// globPath matches path segments: "**" any number of them, else
// path.Match per segment.
func globPath(pat, segs []string) bool {
	for len(pat) > 0 {
		if pat[0] == "**" {
			if len(pat) == 1 {
				return true
			}
			for i := 0; i <= len(segs); i++ {
				if globPath(pat[1:], segs[i:]) {
					return true
				}
			}
			return false
		}
		if len(segs) == 0 {
			return false
		}
		if ok, _ := path.Match(pat[0], segs[0]); !ok {
			return false
		}
		pat, segs = pat[1:], segs[1:]
	}
	return len(segs) == 0
}

// checkSpelling refuses URLs that could be read two ways: credentials,
// a fragment, dot segments (raw or percent-encoded) that a server would
// resolve after the check, backslashes, control characters.
func checkSpelling(loc string) (*url.URL, error) {
	bad := func(why string) (*url.URL, error) {
		return nil, fmt.Errorf("%w: %s: %s", ErrForbiddenLocation, redact.Location(loc), why)
	}
	if strings.ContainsFunc(loc, func(r rune) bool { return r < 0x20 || r == 0x7f || r == '\\' }) {
		return bad("control characters or backslashes")
	}
	u, err := url.Parse(loc)
	if err != nil {
		return bad("not a URL")
	}
	switch {
	case u.User != nil:
		return bad("credentials in a URL are not accepted")
	case u.Fragment != "" || strings.Contains(loc, "#"):
		return bad("a fragment")
	case u.Opaque != "":
		return bad("an opaque URL")
	}
	if numericHost(u.Hostname()) {
		return bad("an IP address spelt other than in canonical form (decimal, octal, hex or shortened forms mean different hosts to different resolvers)")
	}
	for _, seg := range strings.Split(u.EscapedPath(), "/") {
		dec, err := url.PathUnescape(seg)
		if err != nil || dec == "." || dec == ".." || strings.ContainsAny(dec, "/\\") {
			return bad("a path segment that is '.', '..', or an encoded separator")
		}
	}
	return u, nil
}

// numericHost reports a host whose last label is a number (decimal, or
// hex with 0x) without being a canonical IP address: 2130706433,
// 0177.0.0.1, 0x7f.1, 127.1. No domain name ends in a number; resolvers
// that take such spellings as addresses read them in different ways.
func numericHost(host string) bool {
	if host == "" {
		return false
	}
	if ip, err := netip.ParseAddr(host); err == nil {
		return ip.Zone() != "" // a scoped IPv6 address names an interface
	}
	labels := strings.Split(strings.TrimSuffix(host, "."), ".")
	last := strings.ToLower(labels[len(labels)-1])
	if strings.HasPrefix(last, "0x") {
		return true
	}
	return last != "" && strings.Trim(last, "0123456789") == ""
}

// locationPolicy says which locations a request may name.
type locationPolicy struct {
	patterns []*pattern
	root     bool // local paths are allowed (inside the root)
}

// check returns nil if loc may be read.
func (lp *locationPolicy) check(loc string) error {
	if loc == "" {
		return fmt.Errorf("%w: empty location", ErrForbiddenLocation)
	}
	if source.KindOf(loc) == source.LocalPath {
		switch {
		case strings.Contains(loc, "://"):
			return fmt.Errorf("%w: %s: scheme not supported", ErrForbiddenLocation, redact.Location(loc))
		case !lp.root:
			return fmt.Errorf("%w: %s: a local path, and the service has no --root", ErrForbiddenLocation, loc)
		case strings.HasPrefix(loc, "/"):
			return fmt.Errorf("%w: %s: an absolute path; paths are relative to the root", ErrForbiddenLocation, loc)
		}
		return nil // os.Root confines it
	}
	u, err := checkSpelling(loc)
	if err != nil {
		return err
	}
	for _, p := range lp.patterns {
		if p.match(u) {
			return nil
		}
	}
	return fmt.Errorf("%w: %s matches no --allow-location pattern", ErrForbiddenLocation, redact.Location(loc))
}
