package remote

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/go-json-experiment/json"
)

// MaxInfoBytes bounds the answer of the Hub's repository API that
// [Repo.Files] reads: about 300,000 file names.
const MaxInfoBytes = 32 << 20

// Files lists every file of the repository at its revision, sorted, with
// one request to the Hub's API (/api/models/ORG/REPO/revision/REV, or
// /api/datasets/…, /api/spaces/…; its "siblings"). The revision's commit,
// the API's "sha", is pinned if no file pinned it yet, so that the files
// opened next are those of the commit listed. It says nothing about which
// file is the model: callers choose (package source does, as transformers
// would).
func (r *Repo) Files(ctx context.Context) ([]string, error) {
	info, _, err := r.info(ctx, false)
	if err != nil {
		return nil, err
	}
	files := make([]string, 0, len(info.Siblings))
	for _, s := range info.Siblings {
		if ValidRepoPath(s.Name) == nil {
			files = append(files, s.Name)
		}
	}
	slices.Sort(files)
	return slices.Compact(files), nil
}

// repoInfo is the part of the repository API's answer this package reads.
type repoInfo struct {
	SHA      string `json:"sha"`
	Siblings []struct {
		Name   string `json:"rfilename"`
		BlobID string `json:"blobId"`
		Size   *int64 `json:"size"`
		LFS    *struct {
			SHA256      string `json:"sha256"`
			Size        int64  `json:"size"`
			PointerSize int64  `json:"pointerSize"`
		} `json:"lfs"`
	} `json:"siblings"`
}

// info asks the repository API about the revision (with ?blobs=true, the
// size, git blob id and LFS digest of every file) and pins the commit it
// names.
func (r *Repo) info(ctx context.Context, blobs bool) (*repoInfo, string, error) {
	if r.hub.offline {
		return nil, "", fmt.Errorf("%s: %w", r.ref.String(), ErrOffline)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	rev := r.ref.Revision
	if r.commit != "" {
		rev = r.commit
	}
	kind := "models"
	if r.ref.Type == "dataset" || r.ref.Type == "space" {
		kind = r.ref.Type + "s"
	}
	raw := strings.TrimSuffix(r.base.String(), "/") + "/api/" + kind + "/" + r.ref.Repo + "/revision/" + url.PathEscape(rev)
	if blobs {
		raw += "?blobs=true"
	}
	u, err := url.Parse(raw)
	if err != nil {
		return nil, "", fmt.Errorf("%w: %v", ErrInvalidURL, err)
	}
	name := Ref{Type: r.ref.Type, Repo: r.ref.Repo, Revision: r.ref.Revision}.String() + " (file list)"
	b, err := r.hub.conn.get(ctx, u, name, MaxInfoBytes)
	if err != nil {
		return nil, name, err
	}
	var info repoInfo
	if err := json.Unmarshal(b, &info, json.RejectUnknownMembers(false)); err != nil {
		return nil, name, fmt.Errorf("%s: %w: the repository API's answer does not parse: %v", name, ErrProtocol, err)
	}
	switch {
	case info.SHA == "" && r.commit == "" && r.base.Host == r.hub.endpoint.Host:
		return nil, name, fmt.Errorf("%s: %w: the Hub did not say which commit %q is (no sha); cannot pin the revision", name, ErrProtocol, r.ref.Revision)
	case info.SHA != "" && !isCommit(info.SHA):
		return nil, name, fmt.Errorf("%s: %w: sha %q is not a commit hash", name, ErrProtocol, info.SHA)
	case info.SHA != "" && r.commit != "" && info.SHA != r.commit:
		return nil, name, fmt.Errorf("%s: %w: listed commit %s, but files were read at %s", name, ErrObjectChanged, info.SHA, r.commit)
	case info.SHA != "":
		r.commit = info.SHA
	}
	return &info, name, nil
}

// get reads a whole small response (an API answer, not an object's bytes:
// no Range, nothing pinned), with the retries, redirects, token rules and
// stall timeouts of every request. More than limit bytes is an error.
func (c *conn) get(ctx context.Context, u *url.URL, name string, limit int64) ([]byte, error) {
	f := &File{conn: c, ctx: ctx, name: name, url: u, size: -1}
	var out []byte
	r := &request{f: f, op: "open", n: -1}
	r.consume = func(resp *http.Response, body io.Reader) error {
		if resp.StatusCode != http.StatusOK {
			return statusError(resp)
		}
		if resp.ContentLength > limit {
			return permanent{fmt.Errorf("%w: the answer is %d bytes, more than the %d allowed", ErrProtocol, resp.ContentLength, limit)}
		}
		b, err := io.ReadAll(io.LimitReader(body, limit+1))
		if err != nil {
			return err
		}
		if int64(len(b)) > limit {
			return permanent{fmt.Errorf("%w: the answer is more than the %d bytes allowed", ErrProtocol, limit)}
		}
		if resp.ContentLength >= 0 && int64(len(b)) != resp.ContentLength {
			return fmt.Errorf("body ended after %d of %d bytes: %w", len(b), resp.ContentLength, io.ErrUnexpectedEOF)
		}
		out = b
		return nil
	}
	if err := c.do(ctx, r); err != nil {
		var re *Error
		if errors.As(err, &re) {
			re.Name = name
		}
		return nil, err
	}
	return out, nil
}
