// Package pacedserver is an HTTP file server on the loopback interface
// whose connections are each capped in bandwidth and whose requests each
// wait a fixed latency before their answer: a stand-in, in benchmarks and
// tests, for an object store or a CDN that limits every connection, so
// that parallel readers can be measured against the aggregate cap.
//
// Files are served with http.ServeContent: single and multiple ranges
// (multipart/byteranges), a strong ETag per file, If-Match. Their content
// is any io.ReaderAt (a generated, computed model needs no disk). The
// server listens only on 127.0.0.1 and shuts itself down after its
// lifetime, so a benchmark that forgets it leaves nothing running.
package pacedserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Config sets the server's limits.
type Config struct {
	// Rate caps each connection's bytes per second (headers included);
	// 0 means no cap. It is kept over each response: by any time t after
	// a response starts (after the latency), at most Rate × t of it has
	// been written. A write that wakes up late (a busy machine) may catch
	// up within its response, never beyond; idle time between responses
	// earns nothing.
	Rate float64
	// Latency is added before every response, after the request is read.
	Latency time.Duration
	// Lifetime bounds how long the server runs (default 10 minutes).
	Lifetime time.Duration
	// OnRead, if set, sees every read of a file's content (the bytes a
	// response carries, multipart framing excluded), from the serving
	// goroutines.
	OnRead func(name string, off, n int64)
	// Repo, if set ("org/model"), also serves the files as a Hugging Face
	// Hub repository at Commit (40 hex digits; default all 'c') and at
	// "main": /api/models/REPO/revision/REV lists them, and
	// /REPO/resolve/REV/FILE serves them with X-Repo-Commit, so that
	// hf://REPO reads them through a Hub whose endpoint is the server.
	Repo, Commit string
	// Fault, if set, sees every file request first; a non-zero status it
	// returns is the answer instead of the file (a 503 to be retried, a
	// 404), sent after the latency.
	Fault func(r *http.Request) int
}

// DefaultLifetime is Config.Lifetime's default.
const DefaultLifetime = 10 * time.Minute

// File is a file to serve.
type File struct {
	Content io.ReaderAt
	Size    int64
	ETag    string    // strong ETag, quoted (default: derived from name and size)
	ModTime time.Time // Last-Modified (default: the zero time, none sent)
	// Header holds more headers for every response about the file (a
	// Hub-shaped server's X-Repo-Commit, X-Linked-Etag).
	Header http.Header
	// Redirect, if set, answers every request with a 302 to this URL or
	// path (and Header); Content is then not needed. A path is sent as an
	// absolute URL on the server's host, as the Hub's redirects to its CDN
	// are absolute (huggingface_hub follows only relative ones).
	Redirect string
}

// Stats counts the server's work.
type Stats struct {
	Requests    int64 // requests answered
	Connections int64 // connections accepted
	Bytes       int64 // bytes written to connections (headers and framing included)
	Content     int64 // content bytes read for responses
	// Open counts the connections open now (not reset by ResetStats):
	// once a client is gone and Open is 0, the server has stopped
	// serving it and counts nothing more on its behalf.
	Open int64
}

// Server is a running paced server.
type Server struct {
	URL string // http://127.0.0.1:PORT

	cfg   Config
	files map[string]File
	srv   *http.Server
	ln    net.Listener
	timer *time.Timer
	stats struct{ requests, conns, bytes, content, open atomic.Int64 }
	mu    sync.Mutex
	done  bool
}

// Start serves files (keyed by URL path, e.g. "/model.safetensors") on a
// free loopback port.
func Start(cfg Config, files map[string]File) (*Server, error) {
	if cfg.Rate < 0 || cfg.Latency < 0 || cfg.Lifetime < 0 {
		return nil, errors.New("pacedserver: negative rate, latency or lifetime")
	}
	if cfg.Lifetime == 0 {
		cfg.Lifetime = DefaultLifetime
	}
	if cfg.Repo != "" && cfg.Commit == "" {
		cfg.Commit = strings.Repeat("c", 40)
	}
	fs := make(map[string]File, len(files))
	for name, f := range files {
		if !strings.HasPrefix(name, "/") || (f.Content == nil && f.Redirect == "") || f.Size < 0 {
			return nil, fmt.Errorf("pacedserver: file %q: want a path starting with / and content", name)
		}
		if f.ETag == "" {
			f.ETag = etag(name, f.Size)
		}
		fs[name] = f
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &Server{URL: "http://" + ln.Addr().String(), cfg: cfg, files: fs}
	s.ln = &pacedListener{Listener: ln, s: s}
	s.srv = &http.Server{
		Handler:           s,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       time.Minute,
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			return context.WithValue(ctx, connKey{}, c)
		},
	}
	s.timer = time.AfterFunc(cfg.Lifetime, func() { s.Close() })
	go s.srv.Serve(s.ln)
	return s, nil
}

// Close stops the server and closes every connection.
func (s *Server) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.done {
		return nil
	}
	s.done = true
	s.timer.Stop()
	return s.srv.Close()
}

// Replace serves f under name from now on (a file that changes on the
// server, for tests of readers that must notice). The ETag is derived
// again unless f sets one.
func (s *Server) Replace(name string, f File) {
	if f.ETag == "" {
		f.ETag = etag(name, f.Size)
	}
	s.mu.Lock()
	s.files[name] = f
	s.mu.Unlock()
}

// Stats returns the counters so far.
func (s *Server) Stats() Stats {
	return Stats{Requests: s.stats.requests.Load(), Connections: s.stats.conns.Load(), Bytes: s.stats.bytes.Load(), Content: s.stats.content.Load(), Open: s.stats.open.Load()}
}

// ResetStats zeroes the counters.
func (s *Server) ResetStats() {
	s.stats.requests.Store(0)
	s.stats.conns.Store(0)
	s.stats.bytes.Store(0)
	s.stats.content.Store(0)
}

func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.stats.requests.Add(1)
	path := r.URL.Path
	if s.cfg.Repo != "" {
		if rev, ok := strings.CutPrefix(path, "/api/models/"+s.cfg.Repo+"/revision/"); ok {
			s.serveInfo(w, rev)
			return
		}
		if rest, ok := strings.CutPrefix(path, "/"+s.cfg.Repo+"/resolve/"); ok {
			rev, file, _ := strings.Cut(rest, "/")
			if rev != "main" && rev != s.cfg.Commit {
				w.Header().Set("X-Error-Code", "RevisionNotFound")
				http.Error(w, "no such revision", http.StatusNotFound)
				return
			}
			w.Header().Set("X-Repo-Commit", s.cfg.Commit)
			path = "/" + file
		}
	}
	s.mu.Lock()
	f, ok := s.files[path]
	s.mu.Unlock()
	if !ok || (r.Method != http.MethodGet && r.Method != http.MethodHead) {
		http.NotFound(w, r)
		return
	}
	if s.cfg.Latency > 0 {
		t := time.NewTimer(s.cfg.Latency)
		select {
		case <-t.C:
		case <-r.Context().Done():
			t.Stop()
			return
		}
	}
	if pc, ok := r.Context().Value(connKey{}).(*pacedConn); ok {
		pc.startResponse()
	}
	if s.cfg.Fault != nil {
		if code := s.cfg.Fault(r); code != 0 {
			http.Error(w, http.StatusText(code), code)
			return
		}
	}
	for k, v := range f.Header {
		w.Header()[k] = v
	}
	if f.Redirect != "" {
		loc := f.Redirect
		if strings.HasPrefix(loc, "/") {
			loc = "http://" + r.Host + loc
		}
		w.Header().Set("Location", loc)
		w.WriteHeader(http.StatusFound)
		return
	}
	w.Header().Set("ETag", f.ETag)
	if w.Header().Get("Content-Type") == "" {
		w.Header().Set("Content-Type", "application/octet-stream")
	}
	content := &countingReader{r: f.Content, s: s, name: path}
	http.ServeContent(w, r, "", f.ModTime, io.NewSectionReader(content, 0, f.Size))
}

// serveInfo answers the Hub's repository API with the file list.
func (s *Server) serveInfo(w http.ResponseWriter, rev string) {
	if rev != "main" && rev != s.cfg.Commit {
		w.Header().Set("X-Error-Code", "RevisionNotFound")
		http.Error(w, "no such revision", http.StatusNotFound)
		return
	}
	type sibling struct {
		Name string `json:"rfilename"`
	}
	s.mu.Lock()
	sibs := make([]sibling, 0, len(s.files))
	for name := range s.files {
		sibs = append(sibs, sibling{strings.TrimPrefix(name, "/")})
	}
	s.mu.Unlock()
	slices.SortFunc(sibs, func(a, b sibling) int { return strings.Compare(a.Name, b.Name) })
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{"id": s.cfg.Repo, "sha": s.cfg.Commit, "siblings": sibs})
}

// countingReader counts the content bytes read for responses.
type countingReader struct {
	r    io.ReaderAt
	s    *Server
	name string
}

func (c *countingReader) ReadAt(p []byte, off int64) (int, error) {
	n, err := c.r.ReadAt(p, off)
	if n > 0 {
		c.s.stats.content.Add(int64(n))
		if c.s.cfg.OnRead != nil {
			c.s.cfg.OnRead(c.name, off, int64(n))
		}
	}
	return n, err
}

type connKey struct{}

// pacedListener wraps accepted connections with the rate cap.
type pacedListener struct {
	net.Listener
	s *Server
}

func (l *pacedListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	l.s.stats.conns.Add(1)
	l.s.stats.open.Add(1)
	pc := &pacedConn{Conn: c, s: l.s, rate: l.s.cfg.Rate, now: time.Now, sleep: time.Sleep}
	pc.startResponse()
	return pc, nil
}

// A paced connection writes a piece at a time: what the rate allows in
// pieceTime, between minPiece and maxPiece bytes (160 KB at 40 MB/s;
// maxPiece unpaced). The cap then holds to within a piece, 4 ms, and the
// server costs little CPU — a wake-up and a write(2) per piece — so that
// a benchmark on a shared machine measures its client, not its server.
// Pieces are small enough, at the rates of tests, that what the server
// has sent and the client not yet received stays small (a test that kills
// a client counts what was sent).
const (
	pieceTime          = 4 * time.Millisecond
	minPiece, maxPiece = 32 << 10, 256 << 10
)

func pieceSize(rate float64) int {
	if rate <= 0 {
		return maxPiece
	}
	return int(min(max(rate*pieceTime.Seconds(), minPiece), maxPiece))
}

// pieces are the buffers of ReadFrom.
var pieces = sync.Pool{New: func() any { b := make([]byte, maxPiece); return &b }}

// pacedConn is a connection whose writes are held to the rate, counted
// from the start of the response being written (HTTP/1.1 answers one
// request at a time on a connection).
type pacedConn struct {
	net.Conn
	s     *Server
	rate  float64
	now   func() time.Time
	sleep func(time.Duration)
	mu    sync.Mutex
	start time.Time
	sent  int64 // bytes written since start

	closeOnce sync.Once
}

// Close closes the connection; the first call counts it closed.
func (c *pacedConn) Close() error {
	c.closeOnce.Do(func() { c.s.stats.open.Add(-1) })
	return c.Conn.Close()
}

func (c *pacedConn) startResponse() {
	c.mu.Lock()
	c.start, c.sent = c.now(), 0
	c.mu.Unlock()
}

func (c *pacedConn) Write(p []byte) (int, error) {
	written := 0
	for len(p) > 0 {
		n := min(len(p), pieceSize(c.rate))
		c.pace(n)
		m, err := c.Conn.Write(p[:n])
		written += m
		c.s.stats.bytes.Add(int64(m))
		if err != nil {
			return written, err
		}
		p = p[n:]
	}
	return written, nil
}

// pace waits until n more bytes of the response may be written.
func (c *pacedConn) pace(n int) {
	if c.rate <= 0 {
		return
	}
	c.mu.Lock()
	c.sent += int64(n)
	due := c.start.Add(time.Duration(float64(c.sent) / c.rate * float64(time.Second)))
	c.mu.Unlock()
	if d := due.Sub(c.now()); d > 0 {
		c.sleep(d)
	}
}

// ReadFrom copies a response body from r to the connection a piece at a
// time, paced as Write paces: net/http hands a response's content to the
// connection's ReadFrom once the header is out, where it would otherwise
// come in writes of 32 KiB, each paced (eight times the wake-ups). Each
// piece is read from r when it may be written, not before, so that the
// content read (Config.OnRead) is what has gone out.
func (c *pacedConn) ReadFrom(r io.Reader) (int64, error) {
	bp := pieces.Get().(*[]byte)
	defer pieces.Put(bp)
	var total int64
	for {
		n := pieceSize(c.rate)
		if lr, ok := r.(*io.LimitedReader); ok {
			if lr.N <= 0 {
				return total, nil
			}
			n = int(min(int64(n), lr.N))
		}
		c.pace(n)
		m, rerr := io.ReadFull(r, (*bp)[:n])
		if m > 0 {
			w, err := c.Conn.Write((*bp)[:m])
			total += int64(w)
			c.s.stats.bytes.Add(int64(w))
			if err != nil {
				return total, err
			}
		}
		if rerr == io.EOF || rerr == io.ErrUnexpectedEOF {
			return total, nil
		}
		if rerr != nil {
			return total, rerr
		}
	}
}

func etag(name string, size int64) string {
	h := fnv.New64a()
	h.Write([]byte(name))
	return fmt.Sprintf(`"%x-%x"`, h.Sum64(), size)
}
