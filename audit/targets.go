package audit

import (
	"context"
	"errors"
	"fmt"
	"io"
	"iter"
	"net/url"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/gosafetensors/safetensors/remote/blobstore"
	"github.com/gosafetensors/safetensors/sharded"
	"github.com/gosafetensors/safetensors/source"
)

// Check says what a location is expanded into: what a scan reads or what
// validation reads differ in which files of a directory count and in what
// an index stands for.
type Check int

const (
	// ScanCheck: every checkpoint, pickle, tar or safetensors file (by
	// extension or content) of a directory, every object of a bucket
	// prefix, and a sharded model's index as its shards.
	ScanCheck Check = iota
	// ValidateCheck: the safetensors files and indexes of a directory or
	// bucket prefix; an index is validated as the sharded model it names.
	ValidateCheck
)

// ModelExtensions are the names a directory walk for a scan checks
// whatever their content; other files are checked when their first bytes
// are a checkpoint, a pickle, a tar archive or a safetensors file.
var modelExtensions = []string{".bin", ".pt", ".pth", ".ckpt", ".pkl", ".pickle", ".safetensors", ".zst", ".lz4"}

// ModelExtensions returns the file name extensions a directory walk for a
// scan checks whatever their content.
func ModelExtensions() []string { return slices.Clone(modelExtensions) }

// Target is one file or object to check, from [Targets]. A Target that
// came from opening a location (a named file, an index's shard) holds
// what was opened until [Target.Open] or [Target.Release] is called;
// [Scan] and [Validate] always call one of them.
type Target struct {
	// Location names the file in reports: the path or URL as given, a
	// walked path, a listed object's URL, a shard beside its index.
	Location string

	h   *held  // nil: Location is opened afresh
	rel string // with h an index: the shard's name beside it
}

// held is an object opened while expanding a location, shared by the
// targets that need it and closed when the last of them lets go.
type held struct {
	obj  *source.Object
	refs atomic.Int32
}

func (h *held) release() {
	if h.refs.Add(-1) == 0 {
		h.obj.Close()
	}
}

// Open opens the target (once); the caller closes the object.
func (t *Target) Open(ctx context.Context, opts ...Option) (*source.Object, error) {
	c, err := buildConfig(opts)
	if err != nil {
		return nil, err
	}
	return t.open(ctx, c)
}

func (t *Target) open(ctx context.Context, c *config) (*source.Object, error) {
	h := t.h
	t.h = nil
	switch {
	case h == nil:
		return openLocation(ctx, t.Location, c)
	case t.rel == "":
		return h.obj, nil // handed over, not released
	}
	defer h.release()
	o, err := h.obj.Sibling(ctx, t.rel)
	if err != nil {
		var ioe *source.IOError
		if !errors.As(err, &ioe) {
			err = &source.IOError{Location: t.Location, Op: "open", Err: err}
		}
		return nil, err
	}
	return o, nil
}

// Release lets go of what the target holds without opening it.
func (t *Target) Release() {
	if h := t.h; h != nil {
		t.h = nil
		h.release()
	}
}

// openLocation opens one location, local paths through the root if there
// is one.
func openLocation(ctx context.Context, loc string, c *config) (*source.Object, error) {
	if source.KindOf(loc) == source.LocalPath {
		return c.local().object(ctx, loc, c)
	}
	return source.Open(ctx, loc, c.source...)
}

// IsBucketPrefix reports whether loc names a bucket prefix: a bucket URL
// whose path ends in '/' (the query, if any, aside).
func IsBucketPrefix(loc string) bool {
	if source.KindOf(loc) != source.Bucket {
		return false
	}
	p, _, _ := strings.Cut(loc, "?")
	return strings.HasSuffix(p, "/")
}

// Targets expands a location into the files check reads, streaming them
// in order: a bucket prefix's objects as they are listed, a local
// directory's files as it is walked (recursively, symbolic links not
// followed), for a scan an index's shards; any other location is one
// target, whatever its name. A failure to list or open yields the place
// it happened with the error (and, for a walk, the walk goes on), so that
// reports can say what was not checked. A location that cannot be opened
// is still yielded, with its error: checking it reports that error.
func Targets(ctx context.Context, loc string, check Check, opts ...Option) iter.Seq2[Target, error] {
	c, err := buildConfig(opts)
	if err != nil {
		return func(yield func(Target, error) bool) { yield(Target{Location: loc}, err) }
	}
	return c.targets(ctx, loc, check)
}

func (c *config) targets(ctx context.Context, loc string, check Check) iter.Seq2[Target, error] {
	return func(yield func(Target, error) bool) {
		switch {
		case IsBucketPrefix(loc):
			c.listPrefix(ctx, loc, check, yield)
			return
		case source.KindOf(loc) == source.LocalPath:
			if st, err := c.local().stat(loc); err == nil && st.IsDir() {
				c.walkDir(loc, check, yield)
				return
			}
		}
		o, err := openLocation(ctx, loc, c)
		if err != nil {
			yield(Target{Location: loc}, err)
			return
		}
		if check == ScanCheck && o.Format == source.Index {
			if shards, err := readIndex(o); err == nil {
				h := &held{obj: o}
				h.refs.Store(int32(len(shards)))
				for i, s := range shards {
					if !yield(Target{Location: siblingName(o.Name, s), h: h, rel: s}, nil) {
						for range shards[i+1:] {
							h.release()
						}
						return
					}
				}
				return
			}
			// a broken index is reported as itself
		}
		h := &held{obj: o}
		h.refs.Store(1)
		yield(Target{Location: loc, h: h}, nil)
	}
}

// listPrefix yields the objects of a bucket prefix as they are listed. An
// object the driver cannot read under its real key is yielded with its
// error (reported as not checked, never skipped); any other listing error
// ends the listing, reported for the prefix.
func (c *config) listPrefix(ctx context.Context, loc string, check Check, yield func(Target, error) bool) {
	objs := blobstore.Objects(ctx, loc)
	if c.pool != nil {
		objs = c.pool.Objects(ctx, loc)
	}
	for o, err := range objs {
		if err != nil {
			var ke *blobstore.KeyError
			if errors.As(err, &ke) && o.Key != "" {
				if !yield(Target{Location: o.URL}, &source.IOError{Location: ke.URL, Op: "open", Err: err}) {
					return
				}
				continue
			}
			yield(Target{Location: loc}, &source.IOError{Location: loc, Op: "list", Err: err})
			return
		}
		if check == ValidateCheck && !validateName(o.URL) {
			continue
		}
		if !yield(Target{Location: o.URL}, nil) {
			return
		}
	}
}

// readIndex reads an object whose content is an index and returns the
// shards it names, sorted.
func readIndex(o *source.Object) ([]string, error) {
	if o.Size > sharded.DefaultMaxIndexSize {
		return nil, fmt.Errorf("%s: index of %d bytes is larger than the %d allowed", o.Name, o.Size, sharded.DefaultMaxIndexSize)
	}
	b := make([]byte, o.Size)
	if n, err := o.ReadAt(b, 0); err != nil && !(errors.Is(err, io.EOF) && int64(n) == o.Size) {
		return nil, &source.IOError{Location: o.Name, Op: "read", Err: err}
	}
	idx, err := sharded.ParseIndex(b, o.Name)
	if err != nil {
		return nil, err
	}
	return idx.Shards(), nil
}

// siblingName names the file rel beside the location loc: a path joined
// to its directory, a URL's last path segment replaced (a bucket URL's
// query kept, an http(s) URL's dropped as the opener drops it).
func siblingName(loc, rel string) string {
	if source.KindOf(loc) == source.LocalPath {
		return filepath.Join(filepath.Dir(loc), rel)
	}
	u, err := url.Parse(loc)
	if err != nil {
		return rel
	}
	u.Path = path.Join(path.Dir(u.Path), rel)
	u.RawPath = ""
	if u.Scheme == "http" || u.Scheme == "https" {
		u.RawQuery = ""
	}
	return u.String()
}

// validateName picks what validate checks in a directory or a bucket
// prefix by name: safetensors files and sharded-model indexes.
func validateName(name string) bool {
	lower := strings.ToLower(name)
	if source.KindOf(name) != source.LocalPath {
		lower, _, _ = strings.Cut(lower, "?")
	}
	return strings.HasSuffix(lower, ".safetensors") || strings.HasSuffix(lower, ".safetensors.index.json")
}
