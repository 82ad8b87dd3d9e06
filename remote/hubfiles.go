package remote

import (
	"context"
	"fmt"
	"slices"
	"strings"
)

// RepoFile is a file of a repository at a commit, as the Hub's repository
// API lists it with its blobs: what a download needs to check every byte.
type RepoFile struct {
	Path string
	Size int64
	// BlobID is the git blob id of what git stores for the file: the SHA-1
	// of "blob SIZE\x00" and the content for a regular file, of its pointer
	// for an LFS file.
	BlobID string
	// LFS is set for a file stored with Git LFS (or Xet): SHA256 is the
	// lowercase hex SHA-256 of its content, which the Hub also reports as
	// X-Linked-Etag.
	LFS *LFSInfo
}

// LFSInfo describes the content of an LFS file.
type LFSInfo struct {
	SHA256      string
	Size        int64
	PointerSize int64
}

// Digest returns the name huggingface_hub gives the file's blob in its
// cache: the LFS SHA-256, else the git blob id.
func (f RepoFile) Digest() string {
	if f.LFS != nil {
		return f.LFS.SHA256
	}
	return f.BlobID
}

// FileInfos lists every file of the repository at its revision with its
// size, git blob id and LFS digest, sorted by path, with one request to the
// Hub's repository API (?blobs=true). Like [Repo.Files] it pins the commit
// the API names. An entry the Hub lists without a size, with a malformed
// digest, or with an LFS size other than its size is an error
// ([ErrProtocol]): a download checked against it would prove nothing.
// Paths are as the Hub lists them, including those that fail
// [ValidRepoPath] (which [Repo.Files] leaves out): a caller that writes or
// requests them checks them, and can say which it refused.
func (r *Repo) FileInfos(ctx context.Context) ([]RepoFile, error) {
	info, name, err := r.info(ctx, true)
	if err != nil {
		return nil, err
	}
	out := make([]RepoFile, 0, len(info.Siblings))
	for _, s := range info.Siblings {
		f := RepoFile{Path: s.Name, BlobID: strings.ToLower(s.BlobID)}
		switch {
		case s.Size == nil || *s.Size < 0:
			return nil, fmt.Errorf("%s: %w: %s is listed without a size", name, ErrProtocol, s.Name)
		case !isHex(f.BlobID, 40):
			return nil, fmt.Errorf("%s: %w: %s: blobId %q is not a git blob id", name, ErrProtocol, s.Name, s.BlobID)
		}
		f.Size = *s.Size
		if l := s.LFS; l != nil {
			sum := strings.ToLower(l.SHA256)
			switch {
			case !isHex(sum, 64):
				return nil, fmt.Errorf("%s: %w: %s: lfs.sha256 %q is not a SHA-256", name, ErrProtocol, s.Name, l.SHA256)
			case l.Size != f.Size:
				return nil, fmt.Errorf("%s: %w: %s: lfs.size %d differs from its size %d", name, ErrProtocol, s.Name, l.Size, f.Size)
			}
			f.LFS = &LFSInfo{SHA256: sum, Size: l.Size, PointerSize: l.PointerSize}
		}
		out = append(out, f)
	}
	slices.SortFunc(out, func(a, b RepoFile) int { return strings.Compare(a.Path, b.Path) })
	for i := 1; i < len(out); i++ {
		if out[i].Path == out[i-1].Path {
			return nil, fmt.Errorf("%s: %w: %s is listed twice", name, ErrProtocol, out[i].Path)
		}
	}
	return out, nil
}

func isHex(s string, n int) bool {
	if len(s) != n {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !(s[i] >= '0' && s[i] <= '9' || s[i] >= 'a' && s[i] <= 'f') {
			return false
		}
	}
	return true
}
