// Package blobstore reads objects in cloud storage — S3 and S3-compatible
// stores, Google Cloud Storage, Azure Blob Storage, local directories — as
// io.ReaderAt with the rules of package remote: the object's size,
// modification time and version (ETag, generation) are pinned when it is
// opened and checked on every read (reads also send If-Match), a short or
// long read is an error, and errors are I/O errors wrapped with %w. Retries
// are the SDKs' own.
//
// Locations are URLs: s3://BUCKET/KEY?region=..&endpoint=..&use_path_style=true,
// gs://BUCKET/KEY, azblob://CONTAINER/KEY, file:///DIR/FILE (the directory
// is the bucket). A key is the URL's path, percent-decoded, byte for byte:
// object URLs made by a listing escape every byte a URL cannot carry, so
// that any key the store holds opens under its real name.
//
// # Drivers
//
// This package imports no cloud SDK. As with gocloud.dev/blob, the
// application chooses the stores it reads by importing drivers for their
// side effect:
//
//	import _ "github.com/gosafetensors/safetensors/remote/blobstore/s3store"    // s3://
//	import _ "github.com/gosafetensors/safetensors/remote/blobstore/gcsstore"   // gs://
//	import _ "github.com/gosafetensors/safetensors/remote/blobstore/azurestore" // azblob://
//
// file:// is built in. A URL whose driver is not linked in fails with
// [ErrNoDriver]. Credentials come from each SDK's standard chain (AWS_*
// variables and ~/.aws, Application Default Credentials, AZURE_STORAGE_*
// variables).
//
// # Many objects
//
// [Open] opens one bucket client for one object (and its siblings). To read
// many objects of a bucket — an audit of a prefix — use a [Pool]: one
// client, one bounded connection pool per bucket URL, shared by every
// object and listing, closed with the pool. [Objects] streams a listing
// without holding it in memory.
package blobstore

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"path"
	"strings"

	redactpkg "github.com/gosafetensors/safetensors/internal/redact"
	"github.com/gosafetensors/safetensors/remote"
	"github.com/gosafetensors/safetensors/remote/blobstore/internal/driver"
)

// ErrNoDriver reports a bucket URL whose scheme no linked-in driver serves.
var ErrNoDriver = errors.New("no driver for this bucket URL scheme is linked into the program")

// wellKnown are the schemes [IsURL] recognises even when their driver is
// not linked in, so that such a URL fails with [ErrNoDriver] rather than
// being taken for a local path.
var wellKnown = map[string]string{
	"s3":     "github.com/gosafetensors/safetensors/remote/blobstore/s3store",
	"gs":     "github.com/gosafetensors/safetensors/remote/blobstore/gcsstore",
	"azblob": "github.com/gosafetensors/safetensors/remote/blobstore/azurestore",
	"file":   "",
}

// Schemes returns the URL schemes that drivers linked into the program
// serve, sorted.
func Schemes() []string { return driver.Schemes() }

// IsURL reports whether s is a bucket URL: scheme:// with a scheme a
// linked-in driver serves, or one of s3, gs, azblob and file.
func IsURL(s string) bool {
	scheme, _, ok := strings.Cut(s, "://")
	if !ok || scheme == "" {
		return false
	}
	if _, ok := wellKnown[scheme]; ok {
		return true
	}
	if scheme == "http" || scheme == "https" || scheme == "hf" {
		return false
	}
	_, ok = driver.Lookup(scheme)
	return ok
}

// SplitURL splits an object (or prefix) URL into the bucket URL and the
// key (or prefix) inside it. For file:// the directory of the path is the
// bucket; a URL ending in '/' names the directory itself with an empty key.
func SplitURL(raw string) (bucketURL, key string, err error) {
	u, err := url.Parse(raw)
	if err != nil {
		return "", "", fmt.Errorf("%w: %v", remote.ErrInvalidURL, redactText(err.Error()))
	}
	if !IsURL(raw) {
		return "", "", fmt.Errorf("%w: %q: want a bucket URL (%s://)", remote.ErrInvalidURL, redact(u), strings.Join(Schemes(), "://, "))
	}
	if u.User != nil || u.Fragment != "" {
		return "", "", fmt.Errorf("%w: %q: credentials and fragments are not allowed in the URL", remote.ErrInvalidURL, redact(u))
	}
	b := *u
	if u.Scheme == "file" {
		if u.Host != "" && u.Host != "localhost" {
			return "", "", fmt.Errorf("%w: %q: file URLs must be file:///absolute/path", remote.ErrInvalidURL, redact(u))
		}
		dir, file := path.Split(u.Path)
		if dir == "" || !path.IsAbs(dir) {
			return "", "", fmt.Errorf("%w: %q: file URLs must be file:///absolute/path", remote.ErrInvalidURL, redact(u))
		}
		b.Host, b.Path, b.RawPath = "", strings.TrimSuffix(dir, "/"), ""
		if b.Path == "" {
			b.Path = "/"
		}
		return b.String(), file, nil
	}
	if u.Host == "" {
		return "", "", fmt.Errorf("%w: %q: no bucket", remote.ErrInvalidURL, redact(u))
	}
	b.Path, b.RawPath = "", ""
	return b.String(), strings.TrimPrefix(u.Path, "/"), nil
}

// ErrReadOnly reports a bucket URL whose driver cannot write objects.
var ErrReadOnly = errors.New("this bucket URL scheme's driver cannot write objects")

// JoinURL returns the URL of the object key under a bucket or prefix URL
// (s3://bucket/results/?region=eu-west-1, file:///srv/results/): the key
// is appended to the path, percent-encoded so that [SplitURL] gives back
// the prefix's path joined with exactly key, and the query is kept.
func JoinURL(prefixURL, key string) string { return objectURL(prefixURL, key) }

// objectURL joins a bucket URL and a key back into an object URL that
// SplitURL splits into the same key, whatever bytes it holds: the path is
// percent-encoded, and a trailing '/' is written %2F so that the URL of an
// object is never taken for a prefix.
func objectURL(bucketURL, key string) string {
	u, err := url.Parse(bucketURL)
	if err != nil {
		return bucketURL + "/" + url.PathEscape(key)
	}
	u.Path = strings.TrimSuffix(u.Path, "/") + "/" + key
	u.RawPath = escapePath(u.Path)
	return u.String()
}

// escapePath percent-encodes p for a URL path: '/' stays a separator except
// at the end, every byte outside the unreserved set and a few sub-delims is
// encoded (so control bytes, '?', '#', '%' and invalid UTF-8 survive).
func escapePath(p string) string {
	var b strings.Builder
	for i := 0; i < len(p); i++ {
		c := p[i]
		switch {
		case c == '/' && i < len(p)-1:
			b.WriteByte(c)
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9',
			c == '-', c == '.', c == '_', c == '~', c == '!', c == '$', c == '&',
			c == '\'', c == '(', c == ')', c == '*', c == '+', c == ',', c == ';',
			c == '=', c == ':', c == '@':
			b.WriteByte(c)
		default:
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}

// redact, redactString and redactText name URLs in messages as every
// message of the module does (internal/redact): no userinfo, no secret
// query values; URLs quoted in an SDK's error lose any query with a
// secret.
func redact(u *url.URL) string { return redactpkg.URL(u) }

func redactString(s string) string { return redactpkg.Location(s) }

func redactText(s string) string { return redactpkg.Text(s) }

// sanitize wraps a driver's error so that its message carries no secret of
// a URL; errors.Is and errors.As still see the original.
func sanitize(err error) error { return redactpkg.Error(err, "") }

// openDriver opens the bucket at bucketURL with the driver of its scheme.
func openDriver(ctx context.Context, bucketURL string, cfg config) (driver.Bucket, error) {
	u, err := url.Parse(bucketURL)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", remote.ErrInvalidURL, redactText(err.Error()))
	}
	open, ok := driver.Lookup(u.Scheme)
	if !ok {
		hint := ""
		if pkg := wellKnown[u.Scheme]; pkg != "" {
			hint = "; import " + pkg
		}
		return nil, fmt.Errorf("%w: %s:// (linked in: %s%s)", ErrNoDriver, u.Scheme, strings.Join(Schemes(), ", "), hint)
	}
	b, err := open(ctx, u, driver.Config{MaxConns: cfg.maxConns})
	return b, sanitize(err)
}
