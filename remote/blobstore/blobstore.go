// Package blobstore reads objects in cloud storage — S3 and S3-compatible
// stores, Google Cloud Storage, Azure Blob Storage, local directories —
// through gocloud.dev/blob, as io.ReaderAt with the rules of package remote:
// the object's size, modification time and ETag are pinned when it is opened
// and checked on every read (S3 reads also send If-Match), a short or long
// read is an error, and errors are I/O errors wrapped with %w. Retries are
// the SDKs' own.
//
// Locations are URLs: s3://BUCKET/KEY?region=..&endpoint=..&use_path_style=true,
// gs://BUCKET/KEY, azblob://CONTAINER/KEY, file:///DIR/FILE (the directory is
// the bucket) and mem:// (an empty in-memory bucket; use [NewObject] with a
// bucket of your own). Credentials come from each SDK's standard chain
// (AWS_* variables and ~/.aws, Application Default Credentials,
// AZURE_STORAGE_* variables).
//
// This is the only package of the module that imports cloud SDKs.
package blobstore

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"path"
	"strings"
	"sync"

	"gocloud.dev/blob"
	_ "gocloud.dev/blob/azureblob" // azblob://
	_ "gocloud.dev/blob/fileblob"  // file://
	_ "gocloud.dev/blob/gcsblob"   // gs://
	_ "gocloud.dev/blob/memblob"   // mem://
	_ "gocloud.dev/blob/s3blob"    // s3://

	"github.com/gosafetensors/safetensors/remote"
)

// Schemes are the URL schemes this package opens.
var Schemes = []string{"s3", "gs", "azblob", "file", "mem"}

// IsURL reports whether s starts with one of [Schemes] and "://".
func IsURL(s string) bool {
	for _, sc := range Schemes {
		if strings.HasPrefix(s, sc+"://") {
			return true
		}
	}
	return false
}

// SplitURL splits an object (or prefix) URL into the bucket URL gocloud
// opens and the key (or prefix) inside it. For file:// the directory of the
// path is the bucket; a URL ending in '/' names the directory itself with an
// empty key.
func SplitURL(raw string) (bucketURL, key string, err error) {
	u, err := url.Parse(raw)
	if err != nil {
		return "", "", fmt.Errorf("%w: %v", remote.ErrInvalidURL, err)
	}
	if !IsURL(raw) {
		return "", "", fmt.Errorf("%w: %q: want one of %v followed by ://", remote.ErrInvalidURL, redact(u), Schemes)
	}
	if u.User != nil || u.Fragment != "" {
		return "", "", fmt.Errorf("%w: %q: credentials and fragments are not allowed in the URL", remote.ErrInvalidURL, redact(u))
	}
	b := *u
	if u.Scheme == "file" {
		if u.Host != "" && u.Host != "localhost" {
			return "", "", fmt.Errorf("%w: %q: file URLs must be file:///absolute/path", remote.ErrInvalidURL, raw)
		}
		dir, file := path.Split(u.Path)
		if dir == "" || !path.IsAbs(dir) {
			return "", "", fmt.Errorf("%w: %q: file URLs must be file:///absolute/path", remote.ErrInvalidURL, raw)
		}
		b.Path, b.RawPath = strings.TrimSuffix(dir, "/"), ""
		if b.Path == "" {
			b.Path = "/"
		}
		return b.String(), file, nil
	}
	if u.Host == "" && u.Scheme != "mem" {
		return "", "", fmt.Errorf("%w: %q: no bucket", remote.ErrInvalidURL, redact(u))
	}
	b.Path, b.RawPath = "", ""
	return b.String(), strings.TrimPrefix(u.Path, "/"), nil
}

// objectURL joins a bucket URL and a key back into an object URL.
func objectURL(bucketURL, key string) string {
	u, err := url.Parse(bucketURL)
	if err != nil {
		return bucketURL + "/" + key
	}
	u.Path = strings.TrimSuffix(u.Path, "/") + "/" + key
	u.RawPath = ""
	return u.String()
}

// redact drops the query (it may hold endpoints and, for some drivers,
// secrets) for messages.
func redact(u *url.URL) string {
	v := *u
	v.User = nil
	q := v.RawQuery != ""
	v.RawQuery, v.Fragment = "", ""
	if q {
		return v.String() + "?…"
	}
	return v.String()
}

// ObjectInfo describes a listed object.
type ObjectInfo struct {
	URL     string // the object's URL (with the prefix URL's query)
	Key     string
	Size    int64
	ModTime string // RFC 3339, "" if unknown
}

// List returns the objects whose keys start with the prefix named by
// prefixURL (e.g. s3://bucket/models/), sorted by key, at most
// WithMaxObjects of them (more is an error rather than a silent cut).
func List(ctx context.Context, prefixURL string, opts ...Option) ([]ObjectInfo, error) {
	cfg, err := buildConfig(opts)
	if err != nil {
		return nil, err
	}
	bucketURL, prefix, err := SplitURL(prefixURL)
	if err != nil {
		return nil, err
	}
	b, err := openBucket(ctx, bucketURL)
	if err != nil {
		return nil, fmt.Errorf("%s: opening bucket: %w", redactString(prefixURL), err)
	}
	defer b.Close()
	return listBucket(ctx, b, bucketURL, prefix, cfg.maxObjects, redactString(prefixURL))
}

func listBucket(ctx context.Context, b *blob.Bucket, bucketURL, prefix string, limit int, name string) ([]ObjectInfo, error) {
	var out []ObjectInfo
	// Every request is counted (gocloud's ListPage fetches pages until it
	// has pageSize objects), so that a server that answers every page with
	// a new continuation token and no keys cannot keep a listing going.
	const pageSize = 1000
	maxRequests := 1000 + limit/pageSize
	requests := 0
	errEndless := fmt.Errorf("%s: listing: more than %d list requests: the server does not end its listing", name, maxRequests)
	opts := &blob.ListOptions{Prefix: prefix, BeforeList: func(func(any) bool) error {
		requests++
		if requests > maxRequests {
			return errEndless
		}
		return nil
	}}
	token := blob.FirstPageToken
	seen := map[string]bool{}
	for {
		objs, next, err := b.ListPage(ctx, token, pageSize, opts)
		if err != nil {
			if requests > maxRequests {
				return out, errEndless
			}
			return out, fmt.Errorf("%s: listing: %w", name, err)
		}
		for _, o := range objs {
			if o.IsDir {
				continue
			}
			if len(out) >= limit {
				return out, fmt.Errorf("%s: more than %d objects (raise the limit with WithMaxObjects)", name, limit)
			}
			info := ObjectInfo{URL: objectURL(bucketURL, o.Key), Key: o.Key, Size: o.Size}
			if !o.ModTime.IsZero() {
				info.ModTime = o.ModTime.UTC().Format("2006-01-02T15:04:05Z07:00")
			}
			out = append(out, info)
		}
		if len(next) == 0 {
			return out, nil
		}
		if seen[string(next)] {
			return out, fmt.Errorf("%s: listing: the server repeats a continuation token", name)
		}
		seen[string(next)] = true
		token = next
	}
}

func redactString(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return "(invalid URL)"
	}
	return redact(u)
}

var quietChecksums sync.Once

// openBucket opens a bucket URL through gocloud. For S3 it first makes the
// SDK validate response checksums only when the API requires it (unless
// AWS_RESPONSE_CHECKSUM_VALIDATION says otherwise): the reads here are
// byte ranges, which a whole-object checksum cannot cover, and the default
// makes the SDK print a DEBUG line to stderr for every one of them.
func openBucket(ctx context.Context, bucketURL string) (*blob.Bucket, error) {
	if strings.HasPrefix(bucketURL, "s3://") {
		quietChecksums.Do(func() {
			if os.Getenv("AWS_RESPONSE_CHECKSUM_VALIDATION") == "" {
				os.Setenv("AWS_RESPONSE_CHECKSUM_VALIDATION", "when_required")
			}
		})
	}
	return blob.OpenBucket(ctx, bucketURL)
}
