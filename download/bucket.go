package download

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/gosafetensors/safetensors/internal/redact"
	"github.com/gosafetensors/safetensors/remote/blobstore"
)

// downloadBucket downloads the objects under a bucket prefix (or one
// object) into the local directory, through one pool of bucket clients.
func downloadBucket(ctx context.Context, loc string, cfg *config) (*Result, error) {
	if cfg.localDir == "" {
		return nil, fmt.Errorf("%w: %s: a bucket download needs a local directory (--local-dir)", ErrLocation, loc)
	}
	pool, err := blobstore.NewPool(append([]blobstore.Option{blobstore.WithConcurrency(cfg.concurrency), blobstore.WithMaxConns(cfg.concurrency)}, cfg.blob...)...)
	if err != nil {
		return nil, err
	}
	defer pool.Close()
	flt, err := newFilter(cfg.include, cfg.exclude)
	if err != nil {
		return nil, err
	}
	type item struct {
		rel, url string
	}
	var items []item
	_, key, err := blobstore.SplitURL(loc)
	if err != nil {
		return nil, err
	}
	if key == "" || strings.HasSuffix(key, "/") { // a prefix (the query, if any, follows it)
		prefix := key
		var keyErrs []error
		for o, err := range pool.Objects(ctx, loc) {
			if err != nil {
				var ke *blobstore.KeyError
				if errors.As(err, &ke) && o.Key != "" {
					keyErrs = append(keyErrs, err)
					continue
				}
				return nil, err
			}
			rel := strings.TrimPrefix(o.Key, prefix)
			if strings.HasSuffix(rel, "/") && o.Size == 0 { // a "folder" marker
				continue
			}
			if flt.match(rel) {
				items = append(items, item{rel, o.URL})
			}
		}
		if len(keyErrs) > 0 {
			return nil, errors.Join(keyErrs...)
		}
	} else {
		rel := key[strings.LastIndexByte(key, '/')+1:]
		items = append(items, item{rel, loc})
	}
	if len(items) == 0 {
		return nil, fmt.Errorf("%s: %w the patterns given", redact.Location(loc), ErrNoFiles)
	}
	names := make([]string, len(items))
	for i, it := range items {
		names[i] = it.rel
	}
	if err := checkNames(loc, names, false); err != nil {
		return nil, err
	}
	objs := make([]*blobstore.Object, len(items))
	defer func() {
		for _, o := range objs {
			if o != nil {
				o.Close()
			}
		}
	}()
	if err := parallel(ctx, cfg.concurrency, len(items), func(i int) error {
		o, err := pool.Open(ctx, items[i].url)
		objs[i] = o
		return err
	}); err != nil {
		return nil, err
	}
	res := &Result{Dir: cfg.localDir}
	var targets []*target
	for i, it := range items {
		o := objs[i]
		dest, part, err := localPaths(cfg.localDir, it.rel)
		if err != nil {
			return nil, err
		}
		object := fmt.Sprintf("bucket %s etag=%s modified=%s", o.Name(), o.ETag(), o.ModTime().UTC().Format("2006-01-02T15:04:05.999999999Z"))
		res.Files = append(res.Files, File{Path: it.rel, Size: o.Size(), Local: dest})
		res.Bytes += o.Size()
		if localDone(cfg.localDir, it.rel, object, dest, o.Size()) {
			res.Files[len(res.Files)-1].Present = true
			continue
		}
		t := &target{Name: o.Name(), rel: it.rel, Dest: dest, Part: part, Size: o.Size(), Object: object}
		t.open = func(context.Context) (io.ReaderAt, error) { return o, nil }
		targets = append(targets, t)
	}
	err = runLocal(ctx, cfg, res, targets)
	for _, o := range objs {
		res.Requests += o.Stats().Requests
	}
	return res, err
}
