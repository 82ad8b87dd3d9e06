package hfcache

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// TreeEntry is a file of a commit as huggingface_hub's tree cache
// (trees/<commit>.json, format 1) records it.
type TreeEntry struct {
	Size      int64  `json:"size"`
	BlobID    string `json:"blob_id"`
	LFSSHA256 string `json:"lfs_sha256,omitempty"`
	LFSSize   *int64 `json:"lfs_size,omitempty"`
	XetHash   string `json:"xet_hash,omitempty"`
}

// Etag is the name of the entry's blob: its LFS sha256, else its git blob
// id.
func (e TreeEntry) Etag() string {
	if e.LFSSHA256 != "" {
		return e.LFSSHA256
	}
	return e.BlobID
}

type treeFile struct {
	FormatVersion int                  `json:"format_version"`
	Files         map[string]TreeEntry `json:"files"`
}

// maxTreeBytes bounds a tree file read back.
const maxTreeBytes = 64 << 20

// TreePath returns where the file list of a commit is kept.
func (r *Repo) TreePath(commit string) (string, error) { return treePath(r.Dir, commit) }

func treePath(folder, commit string) (string, error) {
	if !IsCommit(commit) {
		return "", fmt.Errorf("%w: commit %q", ErrInvalid, commit)
	}
	return filepath.Join(folder, "trees", commit+".json"), nil
}

// WriteTree records every file of a commit (its whole listing, not only
// the files downloaded: huggingface_hub ≥ 1.x then knows, offline, whether
// a snapshot is complete for the patterns asked).
func (r *Repo) WriteTree(commit string, files map[string]TreeEntry) error {
	return WriteTree(r.Dir, commit, files)
}

// WriteTree writes a commit's file list under folder (a repository's
// folder in the cache, or LOCAL_DIR/.cache/huggingface for a download into
// a local directory, where huggingface_hub keeps it too).
func WriteTree(folder, commit string, files map[string]TreeEntry) error {
	p, err := treePath(folder, commit)
	if err != nil {
		return err
	}
	for name := range files {
		if err := checkRelPath(name); err != nil {
			return err
		}
	}
	b, err := json.MarshalIndent(treeFile{FormatVersion: 1, Files: files}, "", " ")
	if err != nil {
		return err
	}
	return writeAtomic(p, b)
}

// ReadTree reads a commit's file list; [ErrNotCached] if there is none.
func (r *Repo) ReadTree(commit string) (map[string]TreeEntry, error) {
	p, err := r.TreePath(commit)
	if err != nil {
		return nil, err
	}
	f, err := os.Open(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%s: %w", p, ErrNotCached)
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if st.Size() > maxTreeBytes {
		return nil, fmt.Errorf("%s: %w: %d bytes, more than the %d allowed", p, ErrInvalid, st.Size(), maxTreeBytes)
	}
	var t treeFile
	if err := json.NewDecoder(f).Decode(&t); err != nil {
		return nil, fmt.Errorf("%s: %w: %v", p, ErrInvalid, err)
	}
	if t.FormatVersion != 1 {
		return nil, fmt.Errorf("%s: %w: format_version %d", p, ErrInvalid, t.FormatVersion)
	}
	return t.Files, nil
}

// Files lists the files of a commit's snapshot ('/'-separated paths,
// sorted), links and plain files alike.
func (r *Repo) Files(commit string) ([]string, error) {
	dir, err := r.SnapshotDir(commit)
	if err != nil {
		return nil, err
	}
	var out []string
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return nil
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		if !strings.HasPrefix(filepath.Base(rel), ".") || !strings.Contains(rel, ".tmp-") {
			out = append(out, filepath.ToSlash(rel))
		}
		return nil
	})
	slices.Sort(out)
	return out, err
}
