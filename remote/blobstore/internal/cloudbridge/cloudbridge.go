// Package cloudbridge serves a bucket URL scheme for package blobstore
// through a gocloud.dev/blob driver, with hooks that adapt gocloud to the
// store's SDK: the version a read saw, a read pinned to a version, and the
// store's real key where gocloud rewrites keys.
//
// gocloud's drivers escape some keys before sending them ("../" and
// control characters everywhere, more on Azure) and unescape listed keys,
// so a stored key such as "a/../b" is listed but a read asks for
// "a/..__0x2f__b", and a stored "x__0x2f__y" is listed as "x/y" and a read
// returns the object "x/y". The bridge lists the real key (RawKey), and
// reads it either by rewriting the driver's request (Address) or only when
// gocloud provably sends it unchanged (Safe); any other key is reported as
// unreadable, never read in place of another.
package cloudbridge

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"strings"
	"unicode/utf8"

	"gocloud.dev/blob"
	"gocloud.dev/gcerrors"

	"github.com/gosafetensors/safetensors/remote"
	"github.com/gosafetensors/safetensors/remote/blobstore/internal/driver"
)

// Hooks adapt gocloud to one store.
type Hooks struct {
	// Open opens the gocloud bucket of u (its own HTTP client bounded by cfg).
	Open func(ctx context.Context, u *url.URL, cfg driver.Config) (*blob.Bucket, error)
	// Version returns the version a read saw ("" if none).
	Version func(r *blob.Reader) string
	// Pin makes the request refuse another version than v.
	Pin func(v string, as func(any) bool) error
	// RawKey returns the stored key of a listed object.
	RawKey func(o *blob.ListObject) (string, bool)
	// Address rewrites the read request to ask for raw; nil if the driver's
	// request cannot be rewritten.
	Address func(b *blob.Bucket, raw string, as func(any) bool) error
	// Safe reports whether gocloud sends key unchanged.
	Safe func(key string) bool
}

// Opener returns the driver opener of a store.
func Opener(h Hooks) driver.Opener {
	return func(ctx context.Context, u *url.URL, cfg driver.Config) (driver.Bucket, error) {
		b, err := h.Open(ctx, u, cfg)
		if err != nil {
			return nil, err
		}
		return &bucket{b: b, h: h}, nil
	}
}

type bucket struct {
	b *blob.Bucket
	h Hooks
}

func (b *bucket) Close() error { return b.b.Close() }

// readable reports whether key can be read under its real name.
func (b *bucket) readable(key string) bool {
	return b.h.Address != nil || (utf8.ValidString(key) && b.h.Safe(key))
}

func (b *bucket) NewRangeReader(ctx context.Context, key string, off, n int64, version string) (*driver.Reader, error) {
	if !b.readable(key) {
		return nil, fmt.Errorf("%w: %q", driver.ErrUnreadableKey, key)
	}
	gkey := key
	if !utf8.ValidString(gkey) {
		gkey = "placeholder" // gocloud refuses invalid UTF-8; Address sends the real key
	}
	opts := &blob.ReaderOptions{BeforeRead: func(as func(any) bool) error {
		if b.h.Address != nil {
			if err := b.h.Address(b.b, key, as); err != nil {
				return err
			}
		}
		if version != "" {
			return b.h.Pin(version, as)
		}
		return nil
	}}
	if n < 0 {
		n = -1
	}
	r, err := b.b.NewRangeReader(ctx, gkey, off, n, opts)
	if err != nil {
		switch gcerrors.Code(err) {
		case gcerrors.NotFound:
			return nil, fmt.Errorf("%w: %w", fs.ErrNotExist, err)
		case gcerrors.FailedPrecondition:
			return nil, fmt.Errorf("%w: %w", remote.ErrObjectChanged, err)
		}
		// An empty object cannot be read at range 0-n on some stores; its
		// attributes say what it is (asked only where gocloud sends the key
		// unchanged).
		if off == 0 && utf8.ValidString(key) && b.h.Safe(key) {
			if a, aerr := b.b.Attributes(ctx, key); aerr == nil && a.Size == 0 {
				return &driver.Reader{Body: io.NopCloser(strings.NewReader("")), ModTime: a.ModTime, Version: a.ETag}, nil
			}
		}
		return nil, err
	}
	return &driver.Reader{Body: r, Size: r.Size(), ModTime: r.ModTime(), Version: b.h.Version(r)}, nil
}

// WriteObject stores data with gocloud's WriteAll (one upload, visible
// whole once stored), only under a key gocloud sends unchanged.
func (b *bucket) WriteObject(ctx context.Context, key string, data []byte) error {
	if !utf8.ValidString(key) || !b.h.Safe(key) {
		return fmt.Errorf("%w: %q would be written under another name", driver.ErrUnreadableKey, key)
	}
	return b.b.WriteAll(ctx, key, data, nil)
}

// maxRequestsPerPage bounds the list requests gocloud makes for one page
// (it fetches until it has pageSize objects), so that a server answering
// every request with a new token and no keys cannot keep one call going.
const maxRequestsPerPage = 1000

func (b *bucket) ListPage(ctx context.Context, prefix, token string, pageSize int) (driver.Page, error) {
	if prefix != "" && (!utf8.ValidString(prefix) || !b.h.Safe(prefix)) {
		return driver.Page{}, fmt.Errorf("%w: the prefix %q would be listed under another name", driver.ErrUnreadableKey, prefix)
	}
	requests := 0
	errEndless := errors.New("more than 1000 list requests for one page: the server does not end its listing")
	opts := &blob.ListOptions{Prefix: prefix, BeforeList: func(func(any) bool) error {
		if requests++; requests > maxRequestsPerPage {
			return errEndless
		}
		return nil
	}}
	tok := blob.FirstPageToken
	if token != "" {
		tok = []byte(token)
	}
	objs, next, err := b.b.ListPage(ctx, tok, pageSize, opts)
	if err != nil {
		if requests > maxRequestsPerPage {
			return driver.Page{}, errEndless
		}
		return driver.Page{}, err
	}
	page := driver.Page{Next: string(next)}
	for _, o := range objs {
		if o.IsDir {
			continue
		}
		obj := driver.Object{Key: o.Key, Size: o.Size, ModTime: o.ModTime}
		raw, ok := b.h.RawKey(o)
		switch {
		case !ok:
			obj.Err = fmt.Errorf("%w: the driver does not say which key it listed", driver.ErrUnreadableKey)
		case raw != o.Key:
			obj.Key = raw
			if b.h.Address == nil {
				obj.Err = fmt.Errorf("%w: gocloud lists it as %q and would read that key instead", driver.ErrUnreadableKey, o.Key)
			}
		case !b.readable(raw):
			obj.Err = fmt.Errorf("%w: gocloud would read another key", driver.ErrUnreadableKey)
		}
		page.Objects = append(page.Objects, obj)
	}
	return page, nil
}
