package remote

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
)

// DefaultEndpoint is the Hugging Face Hub.
const DefaultEndpoint = "https://huggingface.co"

// Hub opens files of Hugging Face Hub repositories. It reads its defaults
// from the environment like huggingface_hub: HF_ENDPOINT, the token from
// HF_TOKEN, then HUGGING_FACE_HUB_TOKEN, then the file HF_TOKEN_PATH or
// $HF_HOME/token (HF_HOME defaults to $XDG_CACHE_HOME/huggingface, then
// ~/.cache/huggingface), and HF_HUB_OFFLINE. The token is sent only to the
// endpoint's host. All files opened through one Hub share its concurrency
// bound and traffic counters.
type Hub struct {
	endpoint *url.URL
	conn     *conn
	offline  bool
}

// NewHub returns a Hub configured from the environment and opts (which win).
func NewHub(opts ...Option) (*Hub, error) {
	cfg, err := buildConfig(opts)
	if err != nil {
		return nil, err
	}
	if cfg.endpoint == "" {
		cfg.endpoint = DefaultEndpoint
		if e := os.Getenv("HF_ENDPOINT"); e != "" {
			if err := WithEndpoint(e)(&cfg); err != nil {
				return nil, fmt.Errorf("HF_ENDPOINT: %w", err)
			}
		}
	}
	ep, err := url.Parse(cfg.endpoint)
	if err != nil {
		return nil, err
	}
	h := &Hub{endpoint: ep, conn: newConn(cfg)}
	if cfg.offline != nil {
		h.offline = *cfg.offline
	} else {
		h.offline = isTrue(os.Getenv("HF_HUB_OFFLINE"))
	}
	token := ""
	if cfg.token != nil {
		token = *cfg.token
	} else if token, err = envToken(); err != nil {
		return nil, err
	}
	if token != "" {
		h.conn.token, h.conn.authHost, h.conn.authScheme = token, ep.Host, ep.Scheme
	}
	return h, nil
}

func isTrue(v string) bool {
	switch strings.ToUpper(strings.TrimSpace(v)) {
	case "1", "ON", "YES", "TRUE":
		return true
	}
	return false
}

// envToken finds the token as huggingface_hub does.
func envToken() (string, error) {
	for _, k := range []string{"HF_TOKEN", "HUGGING_FACE_HUB_TOKEN"} {
		if t := strings.TrimSpace(os.Getenv(k)); t != "" {
			return t, nil
		}
	}
	p := os.Getenv("HF_TOKEN_PATH")
	if p == "" {
		home := os.Getenv("HF_HOME")
		if home == "" {
			cache := os.Getenv("XDG_CACHE_HOME")
			if cache == "" {
				dir, err := os.UserHomeDir()
				if err != nil {
					return "", nil
				}
				cache = filepath.Join(dir, ".cache")
			}
			home = filepath.Join(cache, "huggingface")
		}
		p = filepath.Join(home, "token")
	}
	f, err := os.Open(p)
	if errors.Is(err, os.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("reading the Hugging Face token: %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, 64<<10))
	if err != nil {
		return "", fmt.Errorf("reading the Hugging Face token %s: %w", p, err)
	}
	t := strings.TrimSpace(string(b))
	if strings.ContainsAny(t, "\r\n") {
		return "", fmt.Errorf("the Hugging Face token file %s holds more than one line", p)
	}
	return t, nil
}

// Endpoint returns the Hub endpoint, e.g. https://huggingface.co.
func (h *Hub) Endpoint() string { return h.endpoint.String() }

// Handles reports whether location is for this Hub: an hf:// URL, or a
// resolve URL (http(s)://HOST/[datasets/]ORG/REPO/resolve/REV/FILE) on the
// endpoint's host. Other resolve-shaped URLs are plain HTTP files: their
// server may not report X-Repo-Commit, which [Repo.Open] requires.
func (h *Hub) Handles(location string) bool {
	if strings.HasPrefix(location, "hf://") {
		return true
	}
	ref, err := parseResolveURL(location)
	if err != nil {
		return false
	}
	u, err := url.Parse(ref.Endpoint)
	return err == nil && u.Host == h.endpoint.Host && u.Scheme == h.endpoint.Scheme
}

// Offline reports whether network access is forbidden.
func (h *Hub) Offline() bool { return h.offline }

// Stats returns the traffic of every file opened through h.
func (h *Hub) Stats() Stats { return h.conn.stats.snapshot() }

// Repo returns the repository ref names, without any request. A ref from a
// resolve URL on another host than the endpoint is read from that host,
// without the token.
func (h *Hub) Repo(ref Ref) (*Repo, error) {
	if err := validRepoID(ref.Repo); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidURL, err)
	}
	if ref.Revision == "" {
		ref.Revision = "main"
	}
	if err := validRevision(ref.Revision); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidURL, err)
	}
	base := h.endpoint
	if ref.Endpoint != "" {
		u, err := parseHTTPURL(ref.Endpoint)
		if err != nil {
			return nil, err
		}
		base = u
	}
	r := &Repo{hub: h, ref: ref, base: base}
	if isCommit(ref.Revision) {
		r.commit = ref.Revision
	}
	return r, nil
}

// Repo is one repository at one revision. The first file opened resolves the
// revision to the commit the Hub reports (X-Repo-Commit); every later file
// is read at that commit, so a branch that moves meanwhile cannot mix files
// of two commits. The Hub's endpoint must report the commit; a resolve URL
// on another host that does not is read at the revision's name.
type Repo struct {
	hub  *Hub
	ref  Ref
	base *url.URL

	mu     sync.Mutex // held while the revision is resolved
	commit string
}

// Ref returns the repository's location (Path is the one it was made with).
func (r *Repo) Ref() Ref { return r.ref }

// Commit returns the pinned commit, or "" before the first file is opened.
func (r *Repo) Commit() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.commit
}

// URL returns the resolve URL of a file at revision rev (unescaped; a
// revision with '/' such as refs/pr/1 is escaped as the Hub expects).
func (r *Repo) URL(file, rev string) string {
	var b strings.Builder
	b.WriteString(strings.TrimSuffix(r.base.String(), "/"))
	if r.ref.Type == "dataset" || r.ref.Type == "space" {
		b.WriteString("/" + r.ref.Type + "s")
	}
	b.WriteString("/" + r.ref.Repo + "/resolve/" + url.PathEscape(rev))
	for _, seg := range strings.Split(file, "/") {
		b.WriteString("/" + url.PathEscape(seg))
	}
	return b.String()
}

// Open opens a file of the repository by its path relative to the root. The
// path is checked with [ValidRepoPath] before any request.
func (r *Repo) Open(ctx context.Context, file string) (*File, error) {
	if err := ValidRepoPath(file); err != nil {
		return nil, err
	}
	if r.hub.offline {
		return nil, fmt.Errorf("%s: %w", r.ref.String(), ErrOffline)
	}
	if c := r.Commit(); c != "" {
		return r.openAt(ctx, file, c, nil)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.commit != "" { // resolved while we waited
		return r.openAt(ctx, file, r.commit, nil)
	}
	var seen string
	onHop := func(u *url.URL, h http.Header) {
		// Only the endpoint may name the commit, not a CDN it redirects to.
		if seen == "" && u.Host == r.base.Host {
			seen = h.Get("X-Repo-Commit")
		}
	}
	f, err := r.openAt(ctx, file, r.ref.Revision, onHop)
	if seen != "" {
		if !isCommit(seen) {
			if f != nil {
				f.Close()
			}
			return nil, fmt.Errorf("%s: %w: X-Repo-Commit %q is not a commit hash", r.ref.String(), ErrProtocol, seen)
		}
		r.commit = seen
	}
	if err != nil {
		return nil, err
	}
	if r.commit == "" && r.base.Host == r.hub.endpoint.Host {
		f.Close()
		return nil, fmt.Errorf("%s: %w: the Hub did not say which commit %q is (no X-Repo-Commit); cannot pin the revision", r.ref.String(), ErrProtocol, r.ref.Revision)
	}
	if r.commit != "" {
		// Later requests of this file (after its CDN URL expires) go to
		// the commit, not to the branch, which may move meanwhile.
		u, err := url.Parse(r.URL(file, r.commit))
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("%w: %v", ErrInvalidURL, err)
		}
		f.url, f.pinned = u, pinCommit
	}
	// A resolve URL on another host (a mirror) that names no commit: files
	// are read at the revision's name, each pinned by its own validators.
	return f, nil
}

func (r *Repo) openAt(ctx context.Context, file, rev string, onHop func(*url.URL, http.Header)) (*File, error) {
	u, err := url.Parse(r.URL(file, rev))
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidURL, err)
	}
	name := Ref{Type: r.ref.Type, Repo: r.ref.Repo, Revision: r.ref.Revision, Path: file}.String()
	f, err := r.hub.conn.open(ctx, u, onHop)
	if err != nil {
		var re *Error
		if errors.As(err, &re) {
			re.Name = name
		}
		return nil, err
	}
	f.name = name
	if isCommit(rev) {
		f.pinned = pinCommit // content-addressed: the bytes of a commit never change
	}
	return f, nil
}
