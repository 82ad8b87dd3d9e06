package download

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/gosafetensors/safetensors/hfcache"
	"github.com/gosafetensors/safetensors/remote"
	"github.com/gosafetensors/safetensors/sharded"
	"github.com/gosafetensors/safetensors/source"
)

// Check is the verdict on one file.
type Check struct {
	Path   string // relative to the folder checked ('/'-separated); blobs/NAME for a blob
	Size   int64
	Digest Digest // what it was checked against (Kind "" when nothing is known)
	// Status is "ok", "mismatch" (its bytes hash to something else),
	// "unverified" (no digest is known for it), or "broken" (a link that
	// leads nowhere, or outside the cache's blobs).
	Status string
	Detail string // for mismatch and broken: what was found
}

// Report is what [Verify] found.
type Report struct {
	Location string
	Dir      string
	Files    []Check
	// Indexes lists the indexes checked against their shards' headers.
	Indexes  []string
	Problems []string // each problem, one line
	Warnings []string
	Bytes    int64 // bytes hashed
}

// OK reports whether nothing is wrong.
func (r *Report) OK() bool { return len(r.Problems) == 0 }

// Verify checks again what is on disk:
//
//   - a cache repository folder (…/models--ORG--NAME): every blob against
//     its name (a SHA-256, or a git blob id), every snapshot's links, and
//     each snapshot as a folder (below);
//   - hf://ORG/REPO[@REV] or a snapshot folder (…/snapshots/COMMIT): each
//     file, through its link, against the blob it names and the commit's
//     file list where the cache has one;
//   - any other folder (a --local-dir download): each file against the
//     digest its huggingface_hub metadata records, if any;
//
// and, in each folder, every model.safetensors.index.json (or other
// safetensors index) against its shards' headers — every tensor listed is
// in its shard, no shard holds a tensor the index does not list — and every
// pytorch_model.bin.index.json against its checkpoints, read through the
// opener; when a folder holds a model in both formats, their tensors must
// agree in dtype and shape. Problems are in the report, not the error:
// the error says the location could not be checked at all.
func Verify(ctx context.Context, location string, opts ...Option) (*Report, error) {
	cfg, err := buildConfig(opts)
	if err != nil {
		return nil, err
	}
	rep := &Report{Location: location}
	dir := location
	if strings.HasPrefix(location, "hf://") {
		ref, err := remote.ParseHubURL(location)
		if err != nil {
			return nil, err
		}
		cache, err := cacheFor(&cfg)
		if err != nil {
			return nil, err
		}
		crepo, err := cache.Repo(ref.Type, ref.Repo)
		if err != nil {
			return nil, err
		}
		if _, dir, err = crepo.Snapshot(ref.Revision); err != nil {
			return nil, err
		}
	}
	st, err := os.Stat(dir)
	if err != nil {
		return nil, err
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("%s: not a folder (verify checks a download: a cache repository, a snapshot or a local directory)", dir)
	}
	rep.Dir = dir
	v := &verifier{ctx: ctx, rep: rep, workers: min(cfg.concurrency, 4)}
	switch kind, repoDir := classify(dir); kind {
	case "repo":
		err = v.repo(dir)
	case "snapshot":
		err = v.snapshot(repoDir, dir)
	default:
		err = v.local(dir)
	}
	if err != nil {
		return rep, err
	}
	slices.SortFunc(rep.Files, func(a, b Check) int { return strings.Compare(a.Path, b.Path) })
	return rep, nil
}

// classify tells a cache repository folder, a snapshot (or a folder of
// one) and any other folder apart.
func classify(dir string) (kind, repoDir string) {
	d := filepath.Clean(dir)
	if _, _, ok := hfcache.ParseFolderName(filepath.Base(d)); ok {
		for _, sub := range []string{"snapshots", "blobs"} {
			if _, err := os.Stat(filepath.Join(d, sub)); err == nil {
				return "repo", d
			}
		}
	}
	for p := d; ; {
		snaps := filepath.Dir(p)
		repo := filepath.Dir(snaps)
		if filepath.Base(snaps) == "snapshots" {
			if _, _, ok := hfcache.ParseFolderName(filepath.Base(repo)); ok {
				return "snapshot", repo
			}
		}
		if snaps == p {
			return "local", ""
		}
		p = snaps
	}
}

type verifier struct {
	ctx     context.Context
	rep     *Report
	workers int
	mu      sync.Mutex
}

func (v *verifier) add(c Check) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.rep.Files = append(v.rep.Files, c)
	v.rep.Bytes += c.Size
	switch c.Status {
	case "mismatch":
		v.rep.Problems = append(v.rep.Problems, fmt.Sprintf("%s: %s mismatch: expected %s, got %s", c.Path, c.Digest.Kind, c.Digest.Hex, c.Detail))
	case "broken":
		v.rep.Problems = append(v.rep.Problems, fmt.Sprintf("%s: %s", c.Path, c.Detail))
	}
}

func (v *verifier) problem(format string, args ...any) {
	v.mu.Lock()
	v.rep.Problems = append(v.rep.Problems, fmt.Sprintf(format, args...))
	v.mu.Unlock()
}

// digestFromName is what a blob named name must hash to.
func digestFromName(name string) Digest {
	switch {
	case isLowerHex(name, 64):
		return Digest{Kind: "sha256", Hex: name}
	case isLowerHex(name, 40):
		return Digest{Kind: "git-blob", Hex: name}
	}
	return Digest{}
}

func isLowerHex(s string, n int) bool {
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

// hashAll checks files against their digests, a few at a time.
func (v *verifier) hashAll(items []Check, paths []string) error {
	return parallel(v.ctx, v.workers, len(items), func(i int) error {
		c := items[i]
		if c.Status != "" {
			v.add(c)
			return nil
		}
		if c.Digest.Kind == "" {
			c.Status = "unverified"
			c.Size = max(regularSize(paths[i]), 0)
			v.add(c)
			return nil
		}
		got, size, err := fileDigest(paths[i], c.Digest, make([]byte, hashBufSize))
		if err != nil {
			c.Status, c.Detail = "broken", err.Error()
			v.add(c)
			return nil
		}
		c.Size = size
		if got == c.Digest.Hex {
			c.Status = "ok"
		} else {
			c.Status, c.Detail = "mismatch", got
		}
		v.add(c)
		return nil
	})
}

// repo checks every blob by its name, then each snapshot.
func (v *verifier) repo(dir string) error {
	ents, err := os.ReadDir(filepath.Join(dir, "blobs"))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	var items []Check
	var paths []string
	for _, e := range ents {
		name := e.Name()
		if strings.HasSuffix(name, partialSuffix) || strings.HasSuffix(name, ".journal") || strings.HasSuffix(name, ".incomplete") || strings.HasPrefix(name, ".") {
			v.rep.Warnings = append(v.rep.Warnings, "blobs/"+name+": an unfinished download (run download again to finish it)")
			continue
		}
		items = append(items, Check{Path: "blobs/" + name, Digest: digestFromName(name)})
		paths = append(paths, filepath.Join(dir, "blobs", name))
	}
	if err := v.hashAll(items, paths); err != nil {
		return err
	}
	snaps, err := os.ReadDir(filepath.Join(dir, "snapshots"))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	for _, s := range snaps {
		if s.IsDir() {
			if err := v.links(dir, filepath.Join(dir, "snapshots", s.Name()), "snapshots/"+s.Name()+"/"); err != nil {
				return err
			}
			v.models(filepath.Join(dir, "snapshots", s.Name()))
		}
	}
	return nil
}

// snapshot checks the files of one snapshot (or a folder of it) through
// their links, against the blobs they name and the commit's file list.
func (v *verifier) snapshot(repoDir, dir string) error {
	items, paths, err := v.snapshotFiles(repoDir, dir)
	if err != nil {
		return err
	}
	if err := v.hashAll(items, paths); err != nil {
		return err
	}
	v.models(dir)
	return nil
}

// links checks that every entry of a snapshot is a link into blobs/ that
// leads to a file (the blobs themselves were hashed by name).
func (v *verifier) links(repoDir, dir, prefix string) error {
	items, _, err := v.snapshotFiles(repoDir, dir)
	for _, c := range items {
		if c.Status == "broken" {
			c.Path = prefix + c.Path
			v.add(c)
		}
	}
	return err
}

// snapshotFiles lists a snapshot folder's files with the digest each must
// have: the blob its link names, checked against the commit's file list.
func (v *verifier) snapshotFiles(repoDir, dir string) ([]Check, []string, error) {
	blobs := filepath.Join(repoDir, "blobs")
	var tree map[string]hfcache.TreeEntry
	var treeBase string
	if rel, err := filepath.Rel(filepath.Join(repoDir, "snapshots"), dir); err == nil {
		commit, sub, _ := strings.Cut(filepath.ToSlash(rel), "/")
		if typ, id, ok := hfcache.ParseFolderName(filepath.Base(repoDir)); ok {
			r, err := (&hfcache.Cache{Root: filepath.Dir(repoDir)}).Repo(typ, id)
			if err == nil {
				if t, err := r.ReadTree(commit); err == nil {
					tree = t
					if sub != "" {
						treeBase = sub + "/"
					}
				}
			}
		}
	}
	var items []Check
	var paths []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return nil
		}
		rel, _ := filepath.Rel(dir, p)
		rel = filepath.ToSlash(rel)
		c := Check{Path: rel}
		target, lerr := os.Readlink(p)
		switch {
		case lerr != nil: // a plain file (copied where links are not possible)
			if e, ok := tree[treeBase+rel]; ok {
				c.Digest = digestFromName(e.Etag())
			}
		default:
			abs := filepath.Clean(filepath.Join(filepath.Dir(p), target))
			if filepath.Dir(abs) != blobs {
				c.Status, c.Detail = "broken", fmt.Sprintf("links to %s, outside the repository's blobs/", target)
				break
			}
			if regularSize(abs) < 0 {
				c.Status, c.Detail = "broken", fmt.Sprintf("links to %s, which is missing", target)
				break
			}
			name := filepath.Base(abs)
			c.Digest = digestFromName(name)
			if e, ok := tree[treeBase+rel]; ok && e.Etag() != name {
				c.Status, c.Detail = "broken", fmt.Sprintf("links to blob %s, but the commit's file list says %s", name, e.Etag())
			}
		}
		items = append(items, c)
		paths = append(paths, p)
		return nil
	})
	return items, paths, err
}

// local checks a local directory's files against the digests
// huggingface_hub's metadata records for them.
func (v *verifier) local(dir string) error {
	var items []Check
	var paths []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if rel == ".cache" {
				return filepath.SkipDir
			}
			return nil
		}
		c := Check{Path: rel}
		if _, etag, _, ok := hfcache.ReadLocalMetadata(dir, rel); ok {
			c.Digest = digestFromName(etag)
		}
		items = append(items, c)
		paths = append(paths, p)
		return nil
	})
	if err != nil {
		return err
	}
	if err := v.hashAll(items, paths); err != nil {
		return err
	}
	v.models(dir)
	return nil
}

// models checks each index of a folder against its shards' headers, and
// the two formats of a model against each other.
func (v *verifier) models(dir string) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		v.problem("%s: %v", dir, err)
		return
	}
	var st, pt *source.Model
	for _, e := range ents {
		name := e.Name()
		p := filepath.Join(dir, name)
		switch {
		case strings.HasSuffix(name, ".safetensors.index.json"):
			m, err := sharded.Open(v.ctx, p)
			v.index(p, err)
			if err == nil {
				m.Close()
			}
			if name == sharded.IndexName {
				st = v.open(p)
			}
		case strings.HasSuffix(name, ".bin.index.json"), strings.HasSuffix(name, ".pt.index.json"):
			m, err := source.OpenModel(v.ctx, p)
			v.index(p, err)
			if err == nil {
				// The opener settles a checkpoint index's disagreements
				// with its shards as convert does, and says so: for
				// verify they are problems.
				for _, w := range m.Warnings() {
					if strings.Contains(w, "is not in the index") || strings.Contains(w, "the index says") || strings.Contains(w, "left out of the new index") {
						v.problem("%s", w)
					} else {
						v.rep.Warnings = append(v.rep.Warnings, w)
					}
				}
				if name == source.CheckpointIndex {
					pt = m
					continue
				}
				m.Close()
			}
		case name == sharded.SingleName && st == nil:
			st = v.open(p)
		case name == source.CheckpointFile && pt == nil:
			pt = v.open(p)
		}
	}
	if st != nil && pt != nil {
		v.compare(dir, st, pt)
	}
	for _, m := range []*source.Model{st, pt} {
		if m != nil {
			m.Close()
		}
	}
}

func (v *verifier) index(p string, err error) {
	v.mu.Lock()
	v.rep.Indexes = append(v.rep.Indexes, p)
	v.mu.Unlock()
	if err != nil {
		v.problem("%v", err)
	}
}

func (v *verifier) open(p string) *source.Model {
	m, err := source.OpenModel(v.ctx, p)
	if err != nil {
		v.problem("%v", err)
		return nil
	}
	return m
}

// compare checks that a model's safetensors and PyTorch forms agree on
// every tensor both hold; a tensor only one holds is a warning (tied
// weights are saved once, under either name).
func (v *verifier) compare(dir string, st, pt *source.Model) {
	for _, name := range st.Names() {
		a, _ := st.Info(name)
		b, ok := pt.Info(name)
		if !ok {
			v.rep.Warnings = append(v.rep.Warnings, fmt.Sprintf("%s: tensor %q is in the safetensors model, not in the PyTorch one", dir, name))
			continue
		}
		if a.DType != b.DType || !slices.Equal(a.Shape, b.Shape) {
			v.problem("%s: tensor %q is %s%v in the safetensors model, %s%v in the PyTorch one", dir, name, a.DType, a.Shape, b.DType, b.Shape)
		}
	}
	for _, name := range pt.Names() {
		if _, ok := st.Info(name); !ok {
			v.rep.Warnings = append(v.rep.Warnings, fmt.Sprintf("%s: tensor %q is in the PyTorch model, not in the safetensors one", dir, name))
		}
	}
}
