package download

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"path"
	"strings"

	"github.com/gosafetensors/safetensors/remote"
	"github.com/gosafetensors/safetensors/sharded"
)

// downloadHTTP downloads files of an HTTP directory (or one file) into the
// local directory.
func downloadHTTP(ctx context.Context, loc string, cfg *config) (*Result, error) {
	if cfg.localDir == "" {
		return nil, fmt.Errorf("%w: %s: an HTTP download needs a local directory (--local-dir)", ErrLocation, loc)
	}
	base, err := url.Parse(loc)
	if err != nil || base.Host == "" {
		return nil, fmt.Errorf("%w: %s: %v", remote.ErrInvalidURL, loc, err)
	}
	if base.User != nil {
		return nil, fmt.Errorf("%w: credentials in URLs are not supported (use a token)", remote.ErrInvalidURL)
	}
	opts := append(remoteOptions(cfg), cfg.remote...)
	names := cfg.files
	if !strings.HasSuffix(base.Path, "/") {
		if len(names) > 0 {
			return nil, fmt.Errorf("%w: %s: files are named relative to a directory URL ending in '/'", ErrLocation, loc)
		}
		names = []string{path.Base(base.Path)}
		base.Path = path.Dir(base.Path) + "/"
		base.RawPath = ""
	}
	fileURL := func(name string) string {
		return base.ResolveReference(&url.URL{Path: name}).String()
	}
	if len(names) == 0 {
		if names, err = discover(ctx, fileURL, opts); err != nil {
			return nil, err
		}
	}
	flt, err := newFilter(cfg.include, cfg.exclude)
	if err != nil {
		return nil, err
	}
	var sel []string
	for _, name := range names {
		if flt.match(name) {
			sel = append(sel, name)
		}
	}
	if len(sel) > 0 {
		if err := checkNames(loc, sel, false); err != nil {
			return nil, err
		}
	}
	opened := make([]*remote.File, len(sel))
	defer func() {
		for _, f := range opened {
			if f != nil {
				f.Close()
			}
		}
	}()
	// Each open is a request: make them together.
	if err := parallel(ctx, cfg.concurrency, len(sel), func(i int) error {
		f, err := remote.Open(ctx, fileURL(sel[i]), opts...)
		opened[i] = f
		return err
	}); err != nil {
		return nil, err
	}
	res := &Result{Dir: cfg.localDir}
	var targets []*target
	for i, name := range sel {
		f := opened[i]
		dest, part, err := localPaths(cfg.localDir, name)
		if err != nil {
			return res, err
		}
		object := fmt.Sprintf("http %s etag=%s last-modified=%s", f.Name(), f.ETag(), f.LastModified())
		res.Files = append(res.Files, File{Path: name, Size: f.Size(), Local: dest})
		res.Bytes += f.Size()
		if localDone(cfg.localDir, name, object, dest, f.Size()) {
			res.Files[len(res.Files)-1].Present = true
			continue
		}
		t := &target{Name: f.Name(), Dest: dest, Part: part, Size: f.Size(), Object: object, rel: name}
		t.open = func(context.Context) (io.ReaderAt, error) { return f, nil }
		targets = append(targets, t)
	}
	if len(res.Files) == 0 {
		return nil, fmt.Errorf("%s: %w the patterns given", loc, ErrNoFiles)
	}
	err = runLocal(ctx, cfg, res, targets)
	for _, f := range opened {
		res.Requests += f.Stats().Requests
	}
	return res, err
}

// discover finds the model of an HTTP directory as transformers would:
// its safetensors index and the shards it names, else model.safetensors.
func discover(ctx context.Context, fileURL func(string) string, opts []remote.Option) ([]string, error) {
	idx, err := remote.Open(ctx, fileURL(sharded.IndexName), opts...)
	if err == nil {
		defer idx.Close()
		if idx.Size() > sharded.DefaultMaxIndexSize {
			return nil, fmt.Errorf("%s: an index of %d bytes is larger than the %d allowed", idx.Name(), idx.Size(), sharded.DefaultMaxIndexSize)
		}
		b := make([]byte, idx.Size())
		if n, err := idx.ReadAt(b, 0); n < len(b) {
			return nil, err
		}
		x, err := sharded.ParseIndex(b, idx.Name())
		if err != nil {
			return nil, err
		}
		if err := x.Validate(idx.Name()); err != nil {
			return nil, err
		}
		return append([]string{sharded.IndexName}, x.Shards()...), nil
	}
	var se *remote.StatusError
	if !errors.As(err, &se) || se.StatusCode != http.StatusNotFound {
		return nil, err
	}
	return []string{sharded.SingleName}, nil
}
