// Package hfcache reads and writes the Hugging Face Hub cache exactly as
// huggingface_hub lays it out, so that a model put there by one tool is
// found offline by the others (transformers, huggingface_hub, vLLM,
// safetensors download and every hf:// read of this module).
//
// Use it to find a cached snapshot of a repository (Repo.Snapshot), or to
// place downloaded files into the cache (package download does). The
// layout, under the cache directory ([Dir]):
//
//	models--ORG--NAME/                 (datasets--…, spaces--…)
//	  blobs/<etag>                     file content; etag = LFS sha256, else git blob id
//	  snapshots/<commit>/<path>        relative symbolic link to ../../blobs/<etag>
//	  refs/<revision>                  the commit a branch or tag named when last fetched
//	  trees/<commit>.json              the commit's file list (huggingface_hub ≥ 1.x)
//	.locks/models--ORG--NAME/<etag>.lock   flock(2) held while a blob is written
//	CACHEDIR.TAG
//
// Everything this package writes is written atomically (a temporary file
// or link renamed into place), so a reader never sees half of it.
package hfcache

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/gosafetensors/safetensors/internal/safename"
)

// ErrInvalid reports a repository id, revision, path or blob name that
// cannot name a place in the cache (it could escape it).
var ErrInvalid = errors.New("hfcache: invalid name")

// ErrNotCached reports a revision or file the cache does not hold.
var ErrNotCached = errors.New("not in the Hugging Face cache")

// Dir returns the cache directory as huggingface_hub chooses it:
// $HF_HUB_CACHE, else $HUGGINGFACE_HUB_CACHE, else $HF_HOME/hub, else
// $XDG_CACHE_HOME/huggingface/hub, else ~/.cache/huggingface/hub. A
// leading ~ and $VARIABLES are expanded, as Python's expanduser and
// expandvars do.
func Dir() (string, error) {
	for _, k := range []string{"HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE"} {
		if v := os.Getenv(k); v != "" {
			return expand(v)
		}
	}
	home := os.Getenv("HF_HOME")
	if home == "" {
		cache := os.Getenv("XDG_CACHE_HOME")
		if cache == "" {
			h, err := os.UserHomeDir()
			if err != nil {
				return "", fmt.Errorf("hfcache: no cache directory: %w (set HF_HUB_CACHE or HF_HOME)", err)
			}
			cache = filepath.Join(h, ".cache")
		}
		home = filepath.Join(cache, "huggingface")
	}
	h, err := expand(home)
	if err != nil {
		return "", err
	}
	return filepath.Join(h, "hub"), nil
}

func expand(p string) (string, error) {
	p = os.ExpandEnv(p)
	if p == "~" || strings.HasPrefix(p, "~/") {
		h, err := os.UserHomeDir()
		if err != nil {
			return "", fmt.Errorf("hfcache: expanding %s: %w", p, err)
		}
		p = filepath.Join(h, p[1:])
	}
	return p, nil
}

// Cache is a cache directory.
type Cache struct {
	Root string
}

// Default returns the cache at [Dir].
func Default() (*Cache, error) {
	d, err := Dir()
	if err != nil {
		return nil, err
	}
	return &Cache{Root: d}, nil
}

// Repo is one repository's folder in a cache.
type Repo struct {
	Cache *Cache
	Type  string // "model", "dataset" or "space"
	ID    string // "ORG/NAME"
	Dir   string // the folder, e.g. ROOT/models--ORG--NAME
}

// FolderName is the folder huggingface_hub gives a repository:
// "models--ORG--NAME" (datasets--…, spaces--…).
func FolderName(typ, id string) string {
	return typ + "s--" + strings.ReplaceAll(id, "/", "--")
}

// ParseFolderName reverses [FolderName]: "models--ORG--NAME" is ("model",
// "ORG/NAME").
func ParseFolderName(name string) (typ, id string, ok bool) {
	t, rest, ok := strings.Cut(name, "s--")
	if !ok || (t != "model" && t != "dataset" && t != "space") {
		return "", "", false
	}
	org, repo, ok := strings.Cut(rest, "--")
	if !ok || org == "" || repo == "" {
		return "", "", false
	}
	return t, org + "/" + repo, true
}

// Repo returns the folder of a repository (which need not exist). typ ""
// means "model".
func (c *Cache) Repo(typ, id string) (*Repo, error) {
	if typ == "" {
		typ = "model"
	}
	if typ != "model" && typ != "dataset" && typ != "space" {
		return nil, fmt.Errorf("%w: repository type %q", ErrInvalid, typ)
	}
	org, name, ok := strings.Cut(id, "/")
	if !ok || !plainSegment(org) || !plainSegment(name) || strings.Contains(id, "--") {
		return nil, fmt.Errorf("%w: repository id %q", ErrInvalid, id)
	}
	return &Repo{Cache: c, Type: typ, ID: id, Dir: filepath.Join(c.Root, FolderName(typ, id))}, nil
}

// plainSegment reports a non-empty path segment that names no parent,
// holds no separator and no control character.
func plainSegment(s string) bool {
	if s == "" || s == "." || s == ".." || strings.ContainsAny(s, `/\`) {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] == 0x7f {
			return false
		}
	}
	return true
}

// checkRelPath checks a '/'-separated path relative to a folder with the
// rule for names a server chose (internal/safename: inside the folder, no
// alias of another name, nothing in a .git folder or a metadata folder).
func checkRelPath(p string) error {
	if err := safename.Check(p); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	return nil
}

// IsCommit reports a full commit hash (40 lowercase hex digits).
func IsCommit(s string) bool { return isHex(s, 40) }

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

// NormalizeETag turns an ETag header into the blob name huggingface_hub
// uses: without W/ and quotes.
func NormalizeETag(etag string) string {
	return strings.Trim(strings.TrimPrefix(etag, "W/"), `"`)
}

// BlobPath returns the path of the blob named etag.
func (r *Repo) BlobPath(etag string) (string, error) {
	if !plainSegment(etag) || strings.HasSuffix(etag, ".incomplete") {
		return "", fmt.Errorf("%w: blob name %q", ErrInvalid, etag)
	}
	return filepath.Join(r.Dir, "blobs", etag), nil
}

// SnapshotDir returns the folder of a commit's snapshot.
func (r *Repo) SnapshotDir(commit string) (string, error) {
	if !plainSegment(commit) {
		return "", fmt.Errorf("%w: commit %q", ErrInvalid, commit)
	}
	return filepath.Join(r.Dir, "snapshots", commit), nil
}

// SnapshotPath returns where file (a repository path, '/'-separated)
// appears in a commit's snapshot.
func (r *Repo) SnapshotPath(commit, file string) (string, error) {
	dir, err := r.SnapshotDir(commit)
	if err != nil {
		return "", err
	}
	if err := checkRelPath(file); err != nil {
		return "", err
	}
	return filepath.Join(dir, filepath.FromSlash(file)), nil
}

// RefPath returns the file that records the commit of a branch or tag
// (refs/pr/1 included).
func (r *Repo) RefPath(rev string) (string, error) {
	if err := checkRelPath(rev); err != nil {
		return "", fmt.Errorf("%w: revision %q", ErrInvalid, rev)
	}
	return filepath.Join(r.Dir, "refs", filepath.FromSlash(rev)), nil
}

// LockPath returns the lock file huggingface_hub holds while it writes the
// blob etag.
func (r *Repo) LockPath(etag string) (string, error) {
	if _, err := r.BlobPath(etag); err != nil {
		return "", err
	}
	return filepath.Join(r.Cache.Root, ".locks", FolderName(r.Type, r.ID), etag+".lock"), nil
}

// Commit returns the commit rev names in the cache: rev itself when it is
// a commit hash, else the content of refs/<rev>. A revision never fetched
// is [ErrNotCached].
func (r *Repo) Commit(rev string) (string, error) {
	if IsCommit(rev) {
		return rev, nil
	}
	p, err := r.RefPath(rev)
	if err != nil {
		return "", err
	}
	b, err := os.ReadFile(p)
	if errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("%s@%s: %w", r.ID, rev, ErrNotCached)
	}
	if err != nil {
		return "", err
	}
	// huggingface_hub writes the hash alone; tolerate a final newline.
	c := string(bytes.TrimSpace(b))
	if !IsCommit(c) {
		return "", fmt.Errorf("%s: %w: %q is not a commit hash", p, ErrInvalid, c)
	}
	return c, nil
}

// Snapshot returns the commit rev names and the folder of its snapshot,
// which must exist ([ErrNotCached] otherwise). It makes no request: this
// is where an offline read looks.
func (r *Repo) Snapshot(rev string) (commit, dir string, err error) {
	if commit, err = r.Commit(rev); err != nil {
		return "", "", err
	}
	if dir, err = r.SnapshotDir(commit); err != nil {
		return "", "", err
	}
	st, err := os.Stat(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return "", "", fmt.Errorf("%s@%s (commit %s): %w", r.ID, rev, commit, ErrNotCached)
	}
	if err != nil {
		return "", "", err
	}
	if !st.IsDir() {
		return "", "", fmt.Errorf("%s: %w: not a directory", dir, ErrInvalid)
	}
	return commit, dir, nil
}

// WriteRef records that rev names commit (nothing is written when rev is
// the commit itself, as huggingface_hub does).
func (r *Repo) WriteRef(rev, commit string) error {
	if !IsCommit(commit) {
		return fmt.Errorf("%w: commit %q", ErrInvalid, commit)
	}
	if rev == commit {
		return nil
	}
	p, err := r.RefPath(rev)
	if err != nil {
		return err
	}
	if b, err := os.ReadFile(p); err == nil && string(b) == commit {
		return nil
	}
	return writeAtomic(p, []byte(commit))
}

// Link makes file in the commit's snapshot a relative symbolic link to the
// blob etag (../../blobs/<etag>, with one more ../ per folder of file), as
// huggingface_hub does, replacing whatever was there atomically.
func (r *Repo) Link(commit, file, etag string) error {
	dst, err := r.SnapshotPath(commit, file)
	if err != nil {
		return err
	}
	blob, err := r.BlobPath(etag)
	if err != nil {
		return err
	}
	rel, err := filepath.Rel(filepath.Dir(dst), blob)
	if err != nil {
		return err
	}
	if cur, err := os.Readlink(dst); err == nil && cur == rel {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o777); err != nil {
		return err
	}
	tmp, err := tempName(dst)
	if err != nil {
		return err
	}
	if err := os.Symlink(rel, tmp); err != nil {
		return err
	}
	if err := os.Rename(tmp, dst); err != nil {
		os.Remove(tmp)
		return err
	}
	return nil
}

// Tag writes the cache's CACHEDIR.TAG if there is none, so that backup
// tools skip the cache (huggingface_hub writes the same).
func (c *Cache) Tag() error {
	p := filepath.Join(c.Root, "CACHEDIR.TAG")
	if _, err := os.Stat(p); err == nil {
		return nil
	}
	return writeAtomic(p, []byte(cachedirTag))
}

const cachedirTag = "Signature: 8a477f597d28d172789f06886806bc55\n" +
	"# This file is a cache directory tag created by huggingface_hub.\n" +
	"# For information about cache directory tags, see:\n" +
	"#\thttps://bford.info/cachedir/\n"

// tempName returns an unused name beside p.
func tempName(p string) (string, error) {
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return filepath.Join(filepath.Dir(p), "."+filepath.Base(p)+".tmp-"+hex.EncodeToString(b[:])), nil
}

// writeAtomic writes a small file through a synced temporary file renamed
// into place.
func writeAtomic(p string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(p), 0o777); err != nil {
		return err
	}
	tmp, err := tempName(p)
	if err != nil {
		return err
	}
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o666)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, p)
	}
	if err != nil {
		os.Remove(tmp)
	}
	return err
}

// LocalMetadataPath is where huggingface_hub records, for a file
// downloaded into a local directory, the commit and etag it was
// downloaded at: LOCAL_DIR/.cache/huggingface/download/<file>.metadata.
func LocalMetadataPath(localDir, file string) (string, error) {
	if err := checkRelPath(file); err != nil {
		return "", err
	}
	return filepath.Join(localDir, ".cache", "huggingface", "download", filepath.FromSlash(file)+".metadata"), nil
}

// WriteLocalMetadata records file's commit and etag as huggingface_hub
// does ("COMMIT\nETAG\nUNIX-TIME\n"), so that `hf download --local-dir`
// finds the file up to date.
func WriteLocalMetadata(localDir, file, commit, etag string, unixTime float64) error {
	p, err := LocalMetadataPath(localDir, file)
	if err != nil {
		return err
	}
	return writeAtomic(p, []byte(fmt.Sprintf("%s\n%s\n%f\n", commit, etag, unixTime)))
}

// ReadLocalMetadata reads what [WriteLocalMetadata] wrote; ok is false
// when there is none, or it is malformed.
func ReadLocalMetadata(localDir, file string) (commit, etag string, unixTime float64, ok bool) {
	p, err := LocalMetadataPath(localDir, file)
	if err != nil {
		return "", "", 0, false
	}
	b, err := os.ReadFile(p)
	if err != nil || len(b) > 4096 {
		return "", "", 0, false
	}
	lines := strings.Split(string(b), "\n")
	if len(lines) < 3 {
		return "", "", 0, false
	}
	if _, err := fmt.Sscanf(lines[2], "%g", &unixTime); err != nil {
		return "", "", 0, false
	}
	return strings.TrimSpace(lines[0]), strings.TrimSpace(lines[1]), unixTime, true
}
