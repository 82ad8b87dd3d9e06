// Package driver is the interface between package blobstore and the
// packages that serve a bucket URL scheme (s3store, gcsstore, azurestore
// and the built-in file driver). A driver registers its scheme
// when its package is imported, as gocloud's drivers and image formats do;
// blobstore itself imports no cloud SDK.
package driver

import (
	"context"
	"errors"
	"io"
	"net/url"
	"slices"
	"sync"
	"time"
)

// Reader is the answer to one range read.
type Reader struct {
	Body    io.ReadCloser
	Size    int64     // the whole object's size, not the range's
	ModTime time.Time // zero if unknown
	Version string    // ETag or generation; "" if the store reports none
}

// Object is one listed object. Key is its real key, byte for byte as the
// store holds it.
type Object struct {
	Key     string
	Size    int64
	ModTime time.Time
	// Err, when not nil, says why the object cannot be read under its real
	// key by this driver; the listing reports it per object.
	Err error
}

// Page is one page of a listing; Next is "" on the last page.
type Page struct {
	Objects []Object
	Next    string
}

// Bucket is one opened bucket: one client and one connection pool shared
// by every object read through it. It is safe for concurrent use.
type Bucket interface {
	// NewRangeReader reads n bytes of key at off (n < 0: to the end; an
	// empty object reads as empty). A non-empty version makes the store
	// refuse another version of the object (the error wraps
	// remote.ErrObjectChanged). A missing object wraps fs.ErrNotExist.
	NewRangeReader(ctx context.Context, key string, off, n int64, version string) (*Reader, error)
	// ListPage lists up to pageSize objects whose keys start with prefix,
	// in key order, from token ("" for the first page).
	ListPage(ctx context.Context, prefix, token string, pageSize int) (Page, error)
	// Close releases the client (idle connections included).
	Close() error
}

// Writer is a Bucket that can store objects.
type Writer interface {
	// WriteObject stores data as the object key, whole: a reader sees the
	// object as it was or as data, never part of it. When it returns nil
	// the store holds the object durably.
	WriteObject(ctx context.Context, key string, data []byte) error
}

// Config is what blobstore asks of every driver's client.
type Config struct {
	// MaxConns bounds the connections open to the store at once.
	MaxConns int
}

// Opener opens the bucket a bucket URL names (its path and fragment are
// empty; its query holds the driver's parameters).
type Opener func(ctx context.Context, u *url.URL, cfg Config) (Bucket, error)

// ErrUnreadableKey reports a key that a driver cannot read under its real
// name (blobstore re-exports it).
var ErrUnreadableKey = errors.New("the store's driver cannot read this key under its real name")

var (
	mu      sync.RWMutex
	openers = map[string]Opener{}
)

// Register makes scheme:// URLs open with open. It panics if the scheme is
// registered twice, as database/sql.Register does.
func Register(scheme string, open Opener) {
	mu.Lock()
	defer mu.Unlock()
	if _, dup := openers[scheme]; dup {
		panic("blobstore: driver registered twice for scheme " + scheme)
	}
	openers[scheme] = open
}

// Lookup returns the opener of scheme.
func Lookup(scheme string) (Opener, bool) {
	mu.RLock()
	defer mu.RUnlock()
	o, ok := openers[scheme]
	return o, ok
}

// Schemes returns the registered schemes, sorted.
func Schemes() []string {
	mu.RLock()
	defer mu.RUnlock()
	var s []string
	for k := range openers {
		s = append(s, k)
	}
	slices.Sort(s)
	return s
}
