package serve

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"path"
	"strings"

	"github.com/gosafetensors/safetensors/internal/redact"
	"github.com/gosafetensors/safetensors/remote"
)

// DefaultHubRedirects are the patterns a Hub location's redirects may
// reach besides the Hub's endpoint: the Hub's CDN and storage hosts
// (cdn-lfs.hf.co, cas-bridge.xethub.hf.co, cdn-lfs.huggingface.co …).
var DefaultHubRedirects = []string{"https://*.hf.co/**", "https://*.huggingface.co/**"}

// scope is what one audit was allowed to read: the location a client
// named, from which the URLs the service then requests on its behalf are
// judged. It travels in the audit's context to the HTTP client's
// transport, which checks every request (redirects, retries, an index's
// shards, the Hub's API) before anything is sent.
type scope struct {
	loc *url.URL    // an http(s) location: its own directory may be read (an index's shards)
	hub *remote.Ref // a Hub location: its repository on the Hub's endpoint, and the Hub's CDN
}

type scopeKey struct{}

// withScope returns ctx carrying the scope of the location q names.
func (s *Server) withScope(ctx context.Context, q *request) context.Context {
	sc := &scope{}
	loc := q.location
	switch {
	case q.file != nil || loc == "":
	case strings.HasPrefix(loc, "hf://"):
		if ref, err := remote.ParseHubURL(loc); err == nil {
			sc.hub = &ref
		}
	case strings.HasPrefix(loc, "http://"), strings.HasPrefix(loc, "https://"):
		if u, err := url.Parse(loc); err == nil {
			sc.loc = u
		}
		if s.hub.Handles(loc) {
			if ref, err := remote.ParseHubURL(loc); err == nil {
				sc.hub = &ref
			}
		}
	}
	return context.WithValue(ctx, scopeKey{}, sc)
}

// reachPolicy judges every URL the service requests over HTTP.
type reachPolicy struct {
	patterns []*pattern // the --allow-location patterns
	hubCDN   []*pattern // where a Hub location's redirects may also go
	endpoint *url.URL   // the Hub's endpoint
}

// check returns nil if the service may request u for the audit whose
// scope ctx carries: u matches an --allow-location pattern (its query
// aside: the server that redirected chose it, and the client's own query
// was checked with the location), or lies in the directory of the
// location the client named (an index's shards), or, for a Hub location,
// names its repository on the Hub's endpoint (the model-info API, resolve
// URLs) or matches a Hub redirect pattern (the CDN). Without a scope only
// the patterns allow.
func (rp *reachPolicy) check(ctx context.Context, u *url.URL) error {
	refuse := func(why string) error {
		return &reachError{url: redact.Location(u.String()), why: why}
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return refuse("not http(s)")
	}
	nf := *u
	nf.Fragment, nf.RawFragment = "", "" // never sent
	if _, err := checkSpelling(nf.String()); err != nil {
		return refuse("spelt in a way that could be read two ways")
	}
	for _, p := range rp.patterns {
		if p.matchIgnoringQuery(u) {
			return nil
		}
	}
	sc, _ := ctx.Value(scopeKey{}).(*scope)
	if sc == nil {
		return refuse("matches no --allow-location pattern")
	}
	if l := sc.loc; l != nil && l.Scheme == u.Scheme && strings.EqualFold(l.Host, u.Host) && path.Dir(l.Path) == path.Dir(u.Path) {
		return nil
	}
	if sc.hub != nil {
		if rp.onHubRepo(u, *sc.hub) {
			return nil
		}
		for _, p := range rp.hubCDN {
			if p.matchIgnoringQuery(u) {
				return nil
			}
		}
		return refuse("matches no --allow-location pattern, is not the Hub repository's and matches no --allow-hub-redirect pattern")
	}
	return refuse("matches no --allow-location pattern")
}

// onHubRepo reports whether u is on the Hub's endpoint (or the resolve
// URL's host, for a Hub-shaped URL on the endpoint) and names ref's
// repository: /api/models/ORG/REPO/…, /ORG/REPO/… (datasets and spaces
// with their prefix). A redirect to another repository (a renamed one)
// is refused unless a pattern allows it.
func (rp *reachPolicy) onHubRepo(u *url.URL, ref remote.Ref) bool {
	base := rp.endpoint
	if ref.Endpoint != "" {
		b, err := url.Parse(ref.Endpoint)
		if err != nil {
			return false
		}
		base = b
	}
	if base == nil || u.Scheme != base.Scheme || !strings.EqualFold(u.Host, base.Host) {
		return false
	}
	rest, ok := strings.CutPrefix(u.Path, strings.TrimSuffix(base.Path, "/"))
	if !ok {
		return false
	}
	kind := "models"
	prefix := "/"
	if ref.Type == "dataset" || ref.Type == "space" {
		kind = ref.Type + "s"
		prefix = "/" + kind + "/"
	}
	repo := strings.ToLower(ref.Repo) + "/"
	low := strings.ToLower(rest) + "/"
	return strings.HasPrefix(low, "/api/"+kind+"/"+repo) || strings.HasPrefix(low, prefix+repo)
}

// reachError is a request the service refused to send: permanent, never
// retried, a forbidden location (403).
type reachError struct {
	url, why string
}

func (e *reachError) Error() string {
	return fmt.Sprintf("%v: the service would have requested %s on the location's behalf (a redirect, a shard, the Hub), which %s", ErrForbiddenLocation, e.url, e.why)
}
func (e *reachError) Unwrap() error   { return ErrForbiddenLocation }
func (e *reachError) Permanent() bool { return true }

// reachTransport checks every request before it is sent.
type reachTransport struct {
	rt     http.RoundTripper
	policy *reachPolicy
}

func (t *reachTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if err := t.policy.check(r.Context(), r.URL); err != nil {
		if r.Body != nil {
			r.Body.Close()
		}
		return nil, err
	}
	return t.rt.RoundTrip(r)
}
