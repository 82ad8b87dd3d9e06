package remote

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"

	"github.com/gosafetensors/safetensors/internal/rangeread"
)

// File is a remote object read with HTTP Range requests. It implements
// io.ReaderAt and is safe for concurrent use. The object's size, ETag and
// Last-Modified are pinned when it is opened; a later response that
// disagrees is [ErrObjectChanged], never data, and an object the server
// does not pin is read no further than its first response
// ([ErrNoValidator]).
type File struct {
	conn    *conn
	ctx     context.Context
	name    string   // for messages: the URL without credentials or query
	url     *url.URL // as opened
	final   atomic.Pointer[url.URL]
	size    int64
	etag    string
	lastMod string
	pinHost string            // host whose validators are sent back (If-Match, If-Unmodified-Since)
	pinned  validator         // what proves later responses are of the object opened
	pinWhy  string            // for pinNone: what the server sent instead
	linked  string            // X-Linked-Etag the Hub reported at open (an LFS file's sha256)
	prefix  []byte            // bytes [0, len(prefix)) of the object, from the first request
	core    *rangeread.Reader // the read path: prefix, cache, read-ahead, runs
	stats   counters
	closed  atomic.Bool
	onHop   func(u *url.URL, h http.Header) // sees every response, redirects included
}

// Open opens the object at an http or https URL with one Range request for
// its first bytes (see [WithPrefetch]), which also learns its size. ctx
// bounds the open and every later ReadAt; use [File.ReadAtContext] for a
// per-read context.
func Open(ctx context.Context, rawURL string, opts ...Option) (*File, error) {
	cfg, err := buildConfig(opts)
	if err != nil {
		return nil, err
	}
	if cfg.endpoint != "" || cfg.offline != nil {
		return nil, fmt.Errorf("remote: %w: WithEndpoint and WithOffline configure a Hub (NewHub); Open reads the URL it is given", ErrOption)
	}
	u, err := parseHTTPURL(rawURL)
	if err != nil {
		return nil, err
	}
	c := newConn(cfg)
	if cfg.token != nil && *cfg.token != "" {
		c.token, c.authHost, c.authScheme = *cfg.token, u.Host, u.Scheme
	}
	return c.open(ctx, u, nil)
}

func parseHTTPURL(rawURL string) (*url.URL, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidURL, err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("%w: %s: want http:// or https://", ErrInvalidURL, redact(u))
	}
	if u.User != nil {
		return nil, fmt.Errorf("%w: %s: credentials in URLs are not supported (use a token)", ErrInvalidURL, redact(u))
	}
	u.Fragment, u.RawFragment = "", ""
	return u, nil
}

// open makes the first request. onHop, if set, sees the headers of every
// response (the Hub reads X-Repo-Commit there).
func (c *conn) open(ctx context.Context, u *url.URL, onHop func(*url.URL, http.Header)) (*File, error) {
	f := &File{conn: c, ctx: ctx, name: redact(u), url: u, size: -1, onHop: onHop}
	n := c.cfg.prefetch
	if h := c.hint.Load(); h > n {
		n = h
	}
	r := &request{f: f, op: "open", off: 0, n: n, rng: fmt.Sprintf("bytes=0-%d", n-1)}
	r.consume = func(resp *http.Response, body io.Reader) error {
		if onHop != nil {
			onHop(resp.Request.URL, resp.Header)
		}
		switch resp.StatusCode {
		case http.StatusPartialContent:
		case http.StatusRequestedRangeNotSatisfiable:
			cr, err := parseContentRange(resp.Header.Get("Content-Range"))
			if err != nil || cr.first >= 0 || cr.size != 0 {
				return protocolf("416 to %s of an object that is not empty (Content-Range %q)", r.rng, resp.Header.Get("Content-Range"))
			}
			f.prefix = []byte{}
			return f.pin(resp, 0)
		case http.StatusOK:
			// Only an empty object may answer a range request with a 200
			// (net/http does so): an empty body cannot be wrong bytes.
			if resp.ContentLength == 0 {
				if m, _ := body.Read(make([]byte, 1)); m == 0 {
					f.prefix = []byte{}
					return f.pin(resp, 0)
				}
			}
			return protocolf("server ignored Range %s and sent the whole object (200); refusing to read it", r.rng)
		default:
			return statusError(resp)
		}
		if err := checkEncoding(resp); err != nil {
			return err
		}
		cr, err := parseContentRange(resp.Header.Get("Content-Range"))
		if err != nil {
			return protocolf("%v", err)
		}
		if cr.first != 0 || cr.last != min(n, cr.size)-1 {
			return protocolf("asked for %s, got Content-Range %s", r.rng, cr)
		}
		if err := f.pin(resp, cr.size); err != nil {
			return err
		}
		buf := make([]byte, cr.last+1) // at most the prefetch length
		if err := readBody(resp, body, buf); err != nil {
			return err
		}
		f.prefix = buf
		return nil
	}
	if err := c.do(ctx, r); err != nil {
		return nil, err
	}
	f.core = rangeread.New(backend{f}, c.cfg.coreConfig(f.size, f.prefix))
	return f, nil
}

// pin records the identity of the object from its first response.
func (f *File) pin(resp *http.Response, size int64) error {
	f.size = size
	f.etag = resp.Header.Get("ETag")
	f.pinHost = resp.Request.URL.Host
	f.lastMod = resp.Header.Get("Last-Modified")
	f.pinned, f.pinWhy = choosePin(resp.Header)
	return nil
}

// guard refuses a request after the first when nothing pins the object:
// its bytes could belong to another object than the ones already read.
func (f *File) guard() error {
	if f.pinned == pinNone && !f.conn.cfg.trust {
		return permanent{unvalidatedf(f.pinWhy)}
	}
	return nil
}

// checkIdentity refuses a response from a different object than the one
// opened (a 412 to the pinned If-Match or If-Unmodified-Since is refused by
// the caller's status check). Every validator sent at open must come back
// unchanged; the one that pins the object must come back.
func (f *File) checkIdentity(resp *http.Response) error {
	if f.size < 0 || resp.StatusCode != http.StatusPartialContent {
		return nil
	}
	if e := resp.Header.Get("ETag"); f.etag != "" && e != f.etag {
		if e == "" {
			return changedf("ETag was %s, now none", f.etag)
		}
		return changedf("ETag was %s, now %s", f.etag, e)
	}
	m := resp.Header.Get("Last-Modified")
	if f.pinned == pinLastModified && m == "" {
		return changedf("Last-Modified was %s, now none", f.lastMod)
	}
	if f.lastMod != "" && m != "" && m != f.lastMod {
		return changedf("Last-Modified was %s, now %s", f.lastMod, m)
	}
	return nil
}

// checkLinked compares the X-Linked-Etag of a hop (the Hub's answer before
// it redirects to its CDN) with the one seen at open.
func (f *File) checkLinked(h http.Header) error {
	le := h.Get("X-Linked-Etag")
	switch {
	case le == "":
	case f.size < 0:
		f.linked = le
	case f.linked != "" && le != f.linked:
		return changedf("X-Linked-Etag was %s, now %s", f.linked, le)
	}
	return nil
}

// checkEncoding refuses a body that is not the object's bytes as stored.
func checkEncoding(resp *http.Response) error {
	if ce := resp.Header.Get("Content-Encoding"); ce != "" && !strings.EqualFold(ce, "identity") {
		return protocolf("range response with Content-Encoding %q", ce)
	}
	return nil
}

// readBody fills buf from body and requires the body to end there.
func readBody(resp *http.Response, body io.Reader, buf []byte) error {
	if resp.ContentLength >= 0 && resp.ContentLength != int64(len(buf)) {
		return protocolf("Content-Length %d for a %d-byte range", resp.ContentLength, len(buf))
	}
	if n, err := io.ReadFull(body, buf); err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return fmt.Errorf("body ended after %d of %d bytes: %w", n, len(buf), io.ErrUnexpectedEOF)
		}
		return err
	}
	var one [1]byte
	if m, _ := body.Read(one[:]); m > 0 {
		return protocolf("body longer than the %d-byte range", len(buf))
	}
	return nil
}

// Size returns the size of the object in bytes.
func (f *File) Size() int64 { return f.size }

// Name returns the URL without credentials or query, for messages.
func (f *File) Name() string { return f.name }

// ETag returns the ETag pinned at open ("" if the server sent none).
func (f *File) ETag() string { return f.etag }

// Stats returns the traffic of this file so far.
func (f *File) Stats() Stats { return f.stats.snapshot() }

// Close releases the file; later reads fail with [ErrClosed].
func (f *File) Close() error {
	f.closed.Store(true)
	return nil
}

// ReadAt reads len(p) bytes at off with the context given to Open; it
// returns io.EOF with fewer bytes only at the end of the object.
func (f *File) ReadAt(p []byte, off int64) (int, error) {
	return f.ReadAtContext(f.ctx, p, off)
}

// ReadAtContext is ReadAt with its own context. Bytes already fetched (by
// the first request, read ahead or kept from earlier small reads) are
// served from memory; the rest costs one range request (see
// [WithReadAhead]).
func (f *File) ReadAtContext(ctx context.Context, p []byte, off int64) (int, error) {
	if f.closed.Load() {
		return 0, &Error{Name: f.name, Op: "read", Off: off, Len: int64(len(p)), Err: ErrClosed}
	}
	if off < 0 {
		return 0, &Error{Name: f.name, Op: "read", Off: off, Len: int64(len(p)), Err: errors.New("negative offset")}
	}
	if off < int64(len(f.prefix)) && off+int64(len(p)) > int64(len(f.prefix)) {
		f.learn(p, off)
	}
	return f.core.ReadAt(ctx, p, off)
}

// learn remembers, for files opened later through the same Hub, how large a
// safetensors header was when reading it needed more than the prefix.
func (f *File) learn(p []byte, off int64) {
	if off != 8 || len(f.prefix) < 8 {
		return
	}
	if hlen := binary.LittleEndian.Uint64(f.prefix); hlen == uint64(len(p)) && hlen <= maxPrefetch-8 {
		want := int64(hlen) + 8
		want += want / 8 // shards of one model have headers of similar size
		for {
			old := f.conn.hint.Load()
			if want <= old || f.conn.hint.CompareAndSwap(old, min(want, maxPrefetch)) {
				return
			}
		}
	}
}

// checkRangeStatus accepts only a 206 with the object's bytes as stored.
func (f *File) checkRangeStatus(resp *http.Response, rng string) error {
	switch resp.StatusCode {
	case http.StatusPartialContent:
		return checkEncoding(resp)
	case http.StatusOK:
		return protocolf("server ignored Range %s and sent the whole object (200); refusing to read it", rng)
	case http.StatusRequestedRangeNotSatisfiable:
		cr, err := parseContentRange(resp.Header.Get("Content-Range"))
		if err == nil && cr.size != f.size {
			return changedf("size was %d, server now reports %d (416)", f.size, cr.size)
		}
		return changedf("server refuses %s of a %d-byte object (416)", rng, f.size)
	}
	return statusError(resp)
}

// isMultipart reports a multipart/byteranges response and its boundary.
func isMultipart(resp *http.Response) (string, bool) {
	mt, params, err := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if err != nil || mt != "multipart/byteranges" || params["boundary"] == "" {
		return "", false
	}
	return params["boundary"], true
}
