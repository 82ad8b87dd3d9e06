package download

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/gosafetensors/safetensors/hfcache"
	"github.com/gosafetensors/safetensors/internal/safename"
	"github.com/gosafetensors/safetensors/load"
	"github.com/gosafetensors/safetensors/remote"
)

// hubFor returns the Hub a download reads through: the caller's, or one
// with an HTTP client and a concurrency bound that give each range its own
// connection, no read-ahead and a one-byte first request (the bytes are
// read by ranges, not through the reader's cache).
func hubFor(cfg *config) (*remote.Hub, error) {
	if cfg.hub != nil {
		return cfg.hub, nil
	}
	return remote.NewHub(append(remoteOptions(cfg), cfg.remote...)...)
}

func remoteOptions(cfg *config) []remote.Option {
	n := cfg.concurrency
	return []remote.Option{remote.WithClient(load.HTTPClient(n)), remote.WithConcurrency(n), remote.WithReadAhead(0), remote.WithPrefetch(1)}
}

// digestOf is what a listed file's bytes must hash to.
func digestOf(f remote.RepoFile) Digest {
	switch {
	case f.LFS != nil:
		return Digest{Kind: "sha256", Hex: f.LFS.SHA256}
	case f.BlobID != "":
		return Digest{Kind: "git-blob", Hex: f.BlobID}
	}
	return Digest{}
}

// selectFiles keeps the listed files under dir ("" for all) that the
// patterns select.
func selectFiles(listing []remote.RepoFile, dir string, cfg *config) ([]remote.RepoFile, error) {
	flt, err := newFilter(cfg.include, cfg.exclude)
	if err != nil {
		return nil, err
	}
	var out []remote.RepoFile
	for _, f := range listing {
		if dir != "" && f.Path != dir && !strings.HasPrefix(f.Path, dir+"/") {
			continue
		}
		if flt.match(f.Path) {
			out = append(out, f)
		}
	}
	return out, nil
}

func downloadHub(ctx context.Context, loc string, cfg *config) (*Result, error) {
	ref, err := remote.ParseHubURL(loc)
	if err != nil {
		return nil, err
	}
	hub, err := hubFor(cfg)
	if err != nil {
		return nil, err
	}
	if hub.Offline() {
		return offlineHub(ref, cfg)
	}
	before := hub.Stats().Requests
	repo, err := hub.Repo(ref)
	if err != nil {
		return nil, err
	}
	listing, err := repo.FileInfos(ctx)
	if err != nil {
		return nil, err
	}
	commit := repo.Commit()
	if !hfcache.IsCommit(commit) {
		return nil, fmt.Errorf("%s: %w: the Hub named no commit for %q", ref, remote.ErrProtocol, ref.Revision)
	}
	sel, err := selectFiles(listing, ref.Path, cfg)
	if err != nil {
		return nil, err
	}
	if len(sel) == 0 {
		return nil, fmt.Errorf("%s at %s: %w the path and patterns given", ref, commit[:12], ErrNoFiles)
	}
	names := make([]string, len(sel))
	for i, f := range sel {
		names[i] = f.Path
	}
	if err := checkNames(ref.String(), names, true); err != nil {
		return nil, err
	}
	open := func(f remote.RepoFile) func(ctx context.Context) (io.ReaderAt, error) {
		return func(ctx context.Context) (io.ReaderAt, error) { return repo.Open(ctx, f.Path) }
	}
	check := func(f remote.RepoFile) func(io.ReaderAt) error {
		return func(r io.ReaderAt) error { return checkHubFile(ref, f, r.(*remote.File)) }
	}
	var res *Result
	if cfg.localDir != "" {
		res, err = hubLocal(ctx, cfg, ref, commit, listing, sel, open, check)
	} else {
		res, err = hubCache(ctx, cfg, ref, commit, listing, sel, open, check)
	}
	if res != nil {
		res.Commit = commit
		res.Requests = hub.Stats().Requests - before
	}
	return res, err
}

// checkHubFile compares what the Hub answered for a file with its listing,
// before a byte of it is read.
func checkHubFile(ref remote.Ref, f remote.RepoFile, rf *remote.File) error {
	name := remote.Ref{Type: ref.Type, Repo: ref.Repo, Revision: ref.Revision, Path: f.Path}.String()
	if rf.Size() != f.Size {
		return fmt.Errorf("%s: %w: the Hub lists %d bytes, the file has %d", name, remote.ErrObjectChanged, f.Size, rf.Size())
	}
	if le := hfcache.NormalizeETag(rf.LinkedETag()); f.LFS != nil && le != "" && le != f.LFS.SHA256 {
		return fmt.Errorf("%s: %w: the Hub lists sha256 %s, its X-Linked-Etag says %s", name, remote.ErrObjectChanged, f.LFS.SHA256, le)
	}
	return nil
}

type opener func(remote.RepoFile) func(ctx context.Context) (io.ReaderAt, error)
type checker func(remote.RepoFile) func(io.ReaderAt) error

// hubCache downloads into the Hugging Face cache: blobs named by digest,
// snapshot links, the ref and the commit's file list, written only once
// every selected file is in place and checked.
func hubCache(ctx context.Context, cfg *config, ref remote.Ref, commit string, listing, sel []remote.RepoFile, open opener, check checker) (*Result, error) {
	cache, err := cacheFor(cfg)
	if err != nil {
		return nil, err
	}
	crepo, err := cache.Repo(ref.Type, ref.Repo)
	if err != nil {
		return nil, err
	}
	res := &Result{}
	first := map[string]int{} // digest -> index in res.Files of its first file
	var missing []string      // digests to download, sorted
	for _, f := range sel {
		d := digestOf(f)
		blob, err := crepo.BlobPath(d.Hex)
		if err != nil {
			return nil, err
		}
		link, err := crepo.SnapshotPath(commit, f.Path)
		if err != nil {
			return nil, err
		}
		res.Files = append(res.Files, File{Path: f.Path, Size: f.Size, Digest: d, Local: link})
		res.Bytes += f.Size
		if _, dup := first[d.Hex]; dup {
			continue
		}
		first[d.Hex] = len(res.Files) - 1
		if regularSize(blob) == f.Size {
			res.Files[len(res.Files)-1].Present = true
		} else {
			missing = append(missing, d.Hex)
		}
	}
	// Locks are taken in digest order, so that two processes downloading
	// overlapping sets (another commit, other patterns) cannot each hold
	// one the other waits for.
	slices.Sort(missing)
	var targets []*target
	var unlocks []func()
	defer func() {
		for _, u := range unlocks {
			u()
		}
	}()
	for _, hex := range missing {
		i := first[hex]
		f := sel[i]
		unlock, err := crepo.Lock(ctx, hex)
		if err != nil {
			return nil, err
		}
		unlocks = append(unlocks, unlock)
		blob, _ := crepo.BlobPath(hex)
		if regularSize(blob) == f.Size { // another process finished it meanwhile
			res.Files[i].Present = true
			continue
		}
		d := res.Files[i].Digest
		targets = append(targets, &target{
			Name: remote.Ref{Type: ref.Type, Repo: ref.Repo, Revision: ref.Revision, Path: f.Path}.String(),
			Dest: blob, Part: blob + partialSuffix, Size: f.Size, Object: "hub " + d.String(), Digest: d,
			open: open(f), check: check(f),
		})
	}
	e := newEngine(cfg)
	err = e.run(ctx, targets)
	res.Moved, res.Resumed, res.readBack, res.direct = e.moved.Load(), resumed(targets), e.readBack.Load(), e.direct.Load()
	if err != nil {
		return res, err
	}
	snap, err := crepo.SnapshotDir(commit)
	if err != nil {
		return res, err
	}
	res.Dir = snap
	if err := cache.Tag(); err != nil {
		return res, err
	}
	if err := crepo.WriteTree(commit, treeEntries(listing)); err != nil {
		return res, err
	}
	for _, f := range sel {
		if err := crepo.Link(commit, f.Path, digestOf(f).Hex); err != nil {
			return res, err
		}
	}
	if ref.Revision != "" && ref.Revision != commit {
		if err := crepo.WriteRef(ref.Revision, commit); err != nil {
			return res, err
		}
	}
	return res, nil
}

// partialSuffix names a partial download beside its final name. It is not
// huggingface_hub's ".incomplete": huggingface_hub < 1.1 resumes an
// .incomplete file by appending to it, assuming it holds a prefix of the
// blob, and a preallocated file written by ranges at their places is not
// one (it would rename it into place, holes and all).
const partialSuffix = ".partial"

func resumed(ts []*target) int64 {
	var n int64
	for _, t := range ts {
		n += t.resumed
	}
	return n
}

func newEngine(cfg *config) *engine {
	e := &engine{concurrency: cfg.concurrency, chunk: cfg.chunk, streamBuf: int(min(int64(cmp.Or(cfg.streamBuf, streamBufSize)), cfg.chunk/4)), noHash: cfg.noHash, noSync: cfg.noSync, earlyDirect: cfg.earlyDirect, noDirect: cfg.noDirect, progress: cfg.progress}
	if !cfg.chunkSet {
		e.sizer = newSizer(cfg.chunk)
	}
	return e
}

func cacheFor(cfg *config) (*hfcache.Cache, error) {
	if cfg.cacheDir != "" {
		return &hfcache.Cache{Root: cfg.cacheDir}, nil
	}
	return hfcache.Default()
}

// treeEntries is the commit's file list as huggingface_hub caches it.
func treeEntries(listing []remote.RepoFile) map[string]hfcache.TreeEntry {
	m := make(map[string]hfcache.TreeEntry, len(listing))
	for _, f := range listing {
		if safename.Check(f.Path) != nil || remote.ValidRepoPath(f.Path) != nil {
			continue // excluded (else the download failed): written nowhere
		}
		e := hfcache.TreeEntry{Size: f.Size, BlobID: f.BlobID}
		if f.LFS != nil {
			size := f.LFS.Size
			e.LFSSHA256, e.LFSSize = f.LFS.SHA256, &size
		}
		m[f.Path] = e
	}
	return m
}

// localPaths returns where a file of a download into dir goes, and its
// partial (under dir/.cache/safetensors/download, out of the way).
func localPaths(dir, rel string) (dest, part string, err error) {
	if err := safename.Check(rel); err != nil {
		return "", "", err
	}
	dest = filepath.Join(dir, filepath.FromSlash(rel))
	part = filepath.Join(dir, ".cache", "safetensors", "download", filepath.FromSlash(rel)+partialSuffix)
	return dest, part, nil
}

// hubLocal downloads a Hub repository's files as plain files under a
// local directory, with huggingface_hub's metadata beside them.
func hubLocal(ctx context.Context, cfg *config, ref remote.Ref, commit string, listing, sel []remote.RepoFile, open opener, check checker) (*Result, error) {
	res := &Result{Dir: cfg.localDir}
	var targets []*target
	var tfiles []remote.RepoFile
	buf := make([]byte, hashBufSize)
	for _, f := range sel {
		d := digestOf(f)
		dest, part, err := localPaths(cfg.localDir, f.Path)
		if err != nil {
			return nil, err
		}
		res.Files = append(res.Files, File{Path: f.Path, Size: f.Size, Digest: d, Local: dest})
		res.Bytes += f.Size
		if localUpToDate(cfg.localDir, f, d, dest, commit, buf) {
			res.Files[len(res.Files)-1].Present = true
			continue
		}
		targets = append(targets, &target{
			Name: remote.Ref{Type: ref.Type, Repo: ref.Repo, Revision: ref.Revision, Path: f.Path}.String(),
			Dest: dest, Part: part, Size: f.Size, Object: "hub " + d.String(), Digest: d,
			open: open(f), check: check(f),
		})
		tfiles = append(tfiles, f)
	}
	e := newEngine(cfg)
	err := e.run(ctx, targets)
	res.Moved, res.Resumed, res.readBack, res.direct = e.moved.Load(), resumed(targets), e.readBack.Load(), e.direct.Load()
	// Record what is in place, even after an error: those files are
	// complete and checked.
	for i, t := range targets {
		if t.complete {
			if merr := hfcache.WriteLocalMetadata(cfg.localDir, tfiles[i].Path, commit, t.Digest.Hex, float64(time.Now().UnixNano())/1e9); merr != nil && err == nil {
				err = merr
			}
		}
	}
	if err != nil {
		return res, err
	}
	return res, hfcache.WriteTree(filepath.Join(cfg.localDir, ".cache", "huggingface"), commit, treeEntries(listing))
}

// localUpToDate reports whether a file of a local directory is already
// the listed one: its metadata names the digest and it was not modified
// since, or its bytes hash to it.
func localUpToDate(dir string, f remote.RepoFile, d Digest, dest, commit string, buf []byte) bool {
	st, err := os.Stat(dest)
	if err != nil || !st.Mode().IsRegular() || st.Size() != f.Size {
		return false
	}
	if _, etag, ts, ok := hfcache.ReadLocalMetadata(dir, f.Path); ok && etag == d.Hex && float64(st.ModTime().UnixNano())/1e9-1 <= ts {
		return true
	}
	got, _, err := fileDigest(dest, d, buf)
	if err != nil || got != d.Hex {
		return false
	}
	return hfcache.WriteLocalMetadata(dir, f.Path, commit, d.Hex, float64(time.Now().UnixNano())/1e9) == nil
}

// offlineHub answers a download under HF_HUB_OFFLINE from the cache: the
// snapshot, if it holds every file selected (by the commit's file list
// where the cache has it, else by what the snapshot holds).
func offlineHub(ref remote.Ref, cfg *config) (*Result, error) {
	if cfg.localDir != "" {
		return nil, fmt.Errorf("%s: %w", ref, remote.ErrOffline)
	}
	cache, err := cacheFor(cfg)
	if err != nil {
		return nil, err
	}
	crepo, err := cache.Repo(ref.Type, ref.Repo)
	if err != nil {
		return nil, err
	}
	commit, dir, err := crepo.Snapshot(ref.Revision)
	if err != nil {
		return nil, fmt.Errorf("%s: %w, and %w", ref, remote.ErrOffline, err)
	}
	var listing []remote.RepoFile
	if tree, err := crepo.ReadTree(commit); err == nil {
		for p, e := range tree {
			f := remote.RepoFile{Path: p, Size: e.Size, BlobID: e.BlobID}
			if e.LFSSHA256 != "" {
				f.LFS = &remote.LFSInfo{SHA256: e.LFSSHA256, Size: e.Size}
			}
			listing = append(listing, f)
		}
	} else {
		names, err := crepo.Files(commit)
		if err != nil {
			return nil, err
		}
		for _, n := range names {
			p, _ := crepo.SnapshotPath(commit, n)
			listing = append(listing, remote.RepoFile{Path: n, Size: regularSize(p)})
		}
	}
	slices.SortFunc(listing, func(a, b remote.RepoFile) int { return strings.Compare(a.Path, b.Path) })
	sel, err := selectFiles(listing, ref.Path, cfg)
	if err != nil {
		return nil, err
	}
	if len(sel) == 0 {
		return nil, fmt.Errorf("%s: %w in the cached snapshot %s", ref, ErrNoFiles, dir)
	}
	res := &Result{Commit: commit, Dir: dir}
	var missing []string
	for _, f := range sel {
		p, _ := crepo.SnapshotPath(commit, f.Path)
		if regularSize(p) < 0 {
			missing = append(missing, f.Path)
			continue
		}
		res.Files = append(res.Files, File{Path: f.Path, Size: f.Size, Digest: digestOf(f), Local: p, Present: true})
		res.Bytes += f.Size
	}
	if len(missing) > 0 {
		return res, fmt.Errorf("%s: %w, and the cached snapshot %s lacks %d of the files selected (%s)", ref, remote.ErrOffline, dir, len(missing), strings.Join(missing[:min(3, len(missing))], ", "))
	}
	return res, nil
}
