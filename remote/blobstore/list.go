package blobstore

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"time"

	"github.com/gosafetensors/safetensors/remote/blobstore/internal/driver"
)

// ObjectInfo describes a listed object.
type ObjectInfo struct {
	URL     string // the object's URL (with the prefix URL's query); Open reads exactly Key
	Key     string // the object's real key, byte for byte
	Size    int64
	ModTime string // RFC 3339, "" if unknown
}

// ErrUnreadableKey reports a listed key that the bucket's driver cannot
// read under its real name (gocloud's drivers rewrite some keys, e.g. those
// holding "../" or control characters, and read another object, or none).
// Such an object is reported, never read in place of another, never
// counted as checked.
var ErrUnreadableKey = driver.ErrUnreadableKey

// KeyError is an error about one listed object; the listing goes on.
type KeyError struct {
	URL string // the object's URL, query redacted
	Key string
	Err error
}

func (e *KeyError) Error() string { return fmt.Sprintf("%s: %v", e.URL, e.Err) }
func (e *KeyError) Unwrap() error { return e.Err }

// pageSize is the objects asked for per list request.
const pageSize = 1000

// maxIdlePages bounds the list requests in a row that yield no new object:
// a server that answers every page with a fresh continuation token and no
// keys (or keys already seen) cannot keep a listing going.
const maxIdlePages = 1000

// Objects streams the objects whose keys start with the prefix named by
// prefixURL (e.g. s3://bucket/models/), in key order, each once: keys that
// a server repeats on a duplicated page are yielded once, and a listing out
// of key order is an error (its completeness could not be proved). Memory
// holds at most two pages of keys, whatever the object count.
//
// A non-nil error with a non-empty ObjectInfo is a [*KeyError] about that
// object alone (e.g. [ErrUnreadableKey]) and the listing goes on; any other
// error ends it. Breaking out of the loop stops listing.
func Objects(ctx context.Context, prefixURL string, opts ...Option) iter.Seq2[ObjectInfo, error] {
	cfg, err := buildConfig(opts)
	if err != nil {
		return errSeq(err)
	}
	if cfg.pool != nil {
		return cfg.pool.objects(ctx, prefixURL, cfg.maxObjects)
	}
	return func(yield func(ObjectInfo, error) bool) {
		bucketURL, prefix, err := SplitURL(prefixURL)
		if err != nil {
			yield(ObjectInfo{}, err)
			return
		}
		b, err := openDriver(ctx, bucketURL, cfg)
		if err != nil {
			yield(ObjectInfo{}, fmt.Errorf("%s: opening bucket: %w", redactString(prefixURL), err))
			return
		}
		defer b.Close()
		listBucket(ctx, b, bucketURL, prefix, cfg.maxObjects, redactString(prefixURL), yield)
	}
}

// List returns the objects whose keys start with the prefix named by
// prefixURL, sorted by key, at most WithMaxObjects of them (default
// [DefaultMaxObjects]; more is an error rather than a silent cut). Objects
// whose keys cannot be read are left out and reported, joined, in the
// error, with the objects that can. Prefer [Objects] for large prefixes.
func List(ctx context.Context, prefixURL string, opts ...Option) ([]ObjectInfo, error) {
	opts = append([]Option{WithMaxObjects(DefaultMaxObjects)}, opts...)
	var out []ObjectInfo
	var keyErrs []error
	for o, err := range Objects(ctx, prefixURL, opts...) {
		if err != nil {
			if ke := (*KeyError)(nil); errors.As(err, &ke) && o.Key != "" {
				keyErrs = append(keyErrs, err)
				continue
			}
			return out, errors.Join(append(keyErrs, err)...)
		}
		out = append(out, o)
	}
	return out, errors.Join(keyErrs...)
}

func errSeq(err error) iter.Seq2[ObjectInfo, error] {
	return func(yield func(ObjectInfo, error) bool) { yield(ObjectInfo{}, err) }
}

// listBucket lists prefix in b, yielding each object once.
func listBucket(ctx context.Context, b driver.Bucket, bucketURL, prefix string, limit int, name string, yield func(ObjectInfo, error) bool) {
	var (
		token   string
		last    string // the greatest key yielded so far
		cur     = map[string]struct{}{}
		prev    = map[string]struct{}{} // keys of the page before
		tokens  = map[string]struct{}{}
		idle    int // list requests in a row with no new object
		n       int // objects yielded
		started bool
	)
	for {
		if err := ctx.Err(); err != nil {
			yield(ObjectInfo{}, fmt.Errorf("%s: listing: %w", name, err))
			return
		}
		page, err := b.ListPage(ctx, prefix, token, pageSize)
		if err != nil {
			yield(ObjectInfo{}, fmt.Errorf("%s: listing: %w", name, sanitize(err)))
			return
		}
		prev, cur = cur, prev
		clear(cur)
		fresh := false
		for _, o := range page.Objects {
			if started && o.Key <= last {
				_, inPrev := prev[o.Key]
				_, inCur := cur[o.Key]
				if inPrev || inCur || o.Key == last {
					continue // a repeated page or key: yielded once already
				}
				yield(ObjectInfo{}, fmt.Errorf("%s: listing: key %q comes after %q: the server does not list in key order, so the listing cannot be shown complete", name, o.Key, last))
				return
			}
			cur[o.Key] = struct{}{}
			last, started, fresh = o.Key, true, true
			if limit > 0 && n >= limit {
				yield(ObjectInfo{}, fmt.Errorf("%s: more than %d objects (raise the limit with WithMaxObjects)", name, limit))
				return
			}
			n++
			info := ObjectInfo{URL: objectURL(bucketURL, o.Key), Key: o.Key, Size: o.Size}
			if !o.ModTime.IsZero() {
				info.ModTime = o.ModTime.UTC().Format(time.RFC3339)
			}
			var kerr error
			if o.Err != nil {
				kerr = &KeyError{URL: redactString(info.URL), Key: o.Key, Err: o.Err}
			}
			if !yield(info, kerr) {
				return
			}
		}
		if fresh {
			idle = 0
		} else if idle++; idle > maxIdlePages {
			yield(ObjectInfo{}, fmt.Errorf("%s: listing: %d list requests in a row without a new object: the server does not end its listing", name, idle))
			return
		}
		if page.Next == "" {
			return
		}
		if _, dup := tokens[page.Next]; dup {
			yield(ObjectInfo{}, fmt.Errorf("%s: listing: the server repeats a continuation token", name))
			return
		}
		if len(tokens) > 2*maxIdlePages {
			clear(tokens) // the idle bound ends a loop of fresh tokens; this one catches short cycles
		}
		tokens[page.Next] = struct{}{}
		token = page.Next
	}
}
