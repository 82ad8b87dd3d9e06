// Package redact takes the secrets out of locations and messages before
// they are printed, logged or returned: the one place that decides what of
// a URL may be shown. A URL is shown without its userinfo, its query and
// its fragment: a query is where signed URLs carry their signatures and
// credentials (X-Amz-Signature, X-Amz-Credential, a SAS sig, a token) and
// bucket URLs their options, which are not told apart here; "?…" says
// that one was there. Local paths are not URLs and are shown as they are.
package redact

import (
	"net/url"
	"regexp"
	"strings"
	"sync"
)

// Location returns loc as it may be shown: a URL (scheme://...) without
// its userinfo, query ("?…" in its place) and fragment, the rest as spelt;
// anything else (a local path) as it is. Location is idempotent.
func Location(loc string) string {
	scheme, rest, ok := strings.Cut(loc, "://")
	if !ok || !isScheme(scheme) {
		return loc
	}
	rest, _, _ = strings.Cut(rest, "#")
	rest, query, hasQuery := strings.Cut(rest, "?")
	authority, path := rest, ""
	if i := strings.IndexByte(rest, '/'); i >= 0 {
		authority, path = rest[:i], rest[i:]
	}
	if i := strings.LastIndexByte(authority, '@'); i >= 0 {
		authority = authority[i+1:]
	}
	s := scheme + "://" + authority + path
	if hasQuery && query != "" {
		s += "?…"
	}
	return s
}

// URL is Location for a parsed URL.
func URL(u *url.URL) string {
	if u == nil {
		return ""
	}
	return Location(u.String())
}

// isScheme reports whether s is a URL scheme (RFC 3986: a letter, then
// letters, digits, '+', '-', '.').
func isScheme(s string) bool {
	for i, c := range s {
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z':
		case i > 0 && ('0' <= c && c <= '9' || c == '+' || c == '-' || c == '.'):
		default:
			return false
		}
	}
	return s != ""
}

// urlQuery matches the query or fragment of a URL inside a message,
// urlUserinfo its userinfo: SDK and net/http errors quote the request URL,
// whose query may carry a signature, a SAS token or an access key.
var (
	urlQuery = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`([a-zA-Z][a-zA-Z0-9+.-]*://[^\s"'?#]*)[?#]([^\s"']*)`)
	})
	urlUserinfo = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`([a-zA-Z][a-zA-Z0-9+.-]*://)[^\s"'/@]*@`) })
)

// Text returns msg with the userinfo, the query and the fragment of every
// URL in it removed ("?…" in their place), for messages that quote URLs
// (an SDK's request URL with its signing parameters, a location as
// given). Punctuation that ends a clause (".,:;)]}") is taken to end the
// URL.
func Text(msg string) string {
	msg = urlUserinfo().ReplaceAllString(msg, "$1")
	return urlQuery().ReplaceAllStringFunc(msg, func(m string) string {
		sub := urlQuery().FindStringSubmatch(m)
		base, query := sub[1], sub[2]
		tail := query[len(strings.TrimRight(query, ".,:;)]}")):]
		if strings.HasPrefix(query, "…") && m[len(base)] == '?' {
			return m // already redacted
		}
		return base + "?…" + tail
	})
}

// Error returns err with its message passed through Message(msg, loc);
// errors.Is and errors.As still see err. A nil err stays nil, and an
// error with nothing to hide is returned as it is.
func Error(err error, loc string) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	r := Message(msg, loc)
	if r == msg {
		return err
	}
	return &redacted{msg: r, err: err}
}

// Message returns msg as it may be shown: the location loc (if not "")
// replaced by Location(loc) wherever it occurs, so that the message names
// it as reports do, then Text.
func Message(msg, loc string) string {
	if loc != "" {
		if shown := Location(loc); shown != loc {
			msg = strings.ReplaceAll(msg, loc, shown)
		}
	}
	return Text(msg)
}

// redacted is an error whose message lost its secrets.
type redacted struct {
	msg string
	err error
}

func (e *redacted) Error() string { return e.msg }
func (e *redacted) Unwrap() error { return e.err }

// Unnamed returns msg, the message of the cause of an error that names
// loc itself, without a leading "loc: " (loc as given or as [Location]
// shows it): the one rule for naming locations in errors is that the
// outermost error that knows the location names it, once, and the errors
// it wraps are quoted without it. A location the cause names further in
// (a redirect's target, a shard of an index) is another location, and
// stays.
func Unnamed(msg, loc string) string {
	if loc == "" {
		return msg
	}
	for _, l := range []string{loc, Location(loc)} {
		if rest, ok := strings.CutPrefix(msg, l+": "); ok {
			return rest
		}
	}
	return msg
}

// Wrap returns an error "loc: msg: cause" whose cause err is quoted
// [Unnamed]: loc is named once. errors.Is and errors.As see err.
func Wrap(loc, msg string, err error) error { return &named{loc: loc, msg: msg, err: err} }

type named struct {
	loc, msg string
	err      error
}

func (e *named) Error() string { return e.loc + ": " + e.msg + ": " + Unnamed(e.err.Error(), e.loc) }
func (e *named) Unwrap() error { return e.err }
