package remote

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// object is what a test server serves; tests may replace it mid-run.
type object struct {
	mu      sync.Mutex
	data    []byte
	etag    string
	modTime time.Time
}

func (o *object) get() ([]byte, string, time.Time) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.data, o.etag, o.modTime
}

func (o *object) set(data []byte, etag string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.data, o.etag = data, etag
	o.modTime = o.modTime.Add(time.Hour)
}

// rangeServer serves one object with http.ServeContent (which implements
// single and multi-range requests, If-Match and 416) on 127.0.0.1, counting
// requests and body bytes. fault, if set, may answer instead (return true).
type rangeServer struct {
	*httptest.Server
	obj      *object
	requests atomic.Int64
	bytes    atomic.Int64
	fault    atomic.Pointer[func(w http.ResponseWriter, r *http.Request, n int64) bool]
	lastReq  atomic.Pointer[http.Request]
}

func newRangeServer(t testing.TB, data []byte) *rangeServer {
	t.Helper()
	s := &rangeServer{obj: &object{data: data, etag: `"v1"`, modTime: time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)}}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.Close)
	return s
}

func (s *rangeServer) setFault(f func(w http.ResponseWriter, r *http.Request, n int64) bool) {
	s.fault.Store(&f)
}

func (s *rangeServer) serve(w http.ResponseWriter, r *http.Request) {
	n := s.requests.Add(1)
	s.lastReq.Store(r)
	if f := s.fault.Load(); f != nil && (*f)(w, r, n) {
		return
	}
	data, etag, mod := s.obj.get()
	if etag != "" {
		w.Header().Set("ETag", etag)
	}
	cw := &countingWriter{ResponseWriter: w, n: &s.bytes}
	http.ServeContent(cw, r, "", mod, bytes.NewReader(data))
}

type countingWriter struct {
	http.ResponseWriter
	n *atomic.Int64
}

func (c *countingWriter) Write(b []byte) (int, error) {
	c.n.Add(int64(len(b)))
	return c.ResponseWriter.Write(b)
}

// fastRetries keeps retry tests quick.
var fastRetries = []Option{WithBackoff(time.Millisecond, 5*time.Millisecond), WithRetries(4, 10*time.Second)}
