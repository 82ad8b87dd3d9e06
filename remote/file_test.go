package remote

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	safetensors "github.com/gosafetensors/safetensors"
)

func randomBytes(n int, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, 1))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// TestHeaderOneRequest reads a real safetensors file over HTTP: the header
// costs exactly one request and every tensor matches the local file.
func TestHeaderOneRequest(t *testing.T) {
	for _, name := range []string{"tiny_transformer.safetensors", "large_dims.safetensors", "many_tensors.safetensors"} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join("..", "testdata", "torch", name)
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			srv := newRangeServer(t, data)
			f, err := Open(context.Background(), srv.URL+"/"+name)
			if err != nil {
				t.Fatal(err)
			}
			r, err := safetensors.NewReader(f, f.Size(), safetensors.WithName(f.Name()))
			if err != nil {
				t.Fatal(err)
			}
			if got := srv.requests.Load(); got != 1 {
				t.Errorf("header read cost %d requests, want 1", got)
			}
			if st := f.Stats(); st.Requests != 1 || st.Bytes > DefaultPrefetch {
				t.Errorf("stats %+v", st)
			}
			local, err := safetensors.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer local.Close()
			for _, n := range local.Names() {
				lt, _ := local.Tensor(n)
				rt, err := r.Tensor(n)
				if err != nil {
					t.Fatal(err)
				}
				want, _ := lt.Copy()
				got, err := rt.Copy()
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got, want) {
					t.Fatalf("tensor %s differs", n)
				}
			}
		})
	}
}

// TestReadAt compares random reads with the served bytes, across the
// prefetched prefix and the end of the object.
func TestReadAt(t *testing.T) {
	data := randomBytes(300_000, 1)
	srv := newRangeServer(t, data)
	f, err := Open(context.Background(), srv.URL+"/x", WithPrefetch(1000))
	if err != nil {
		t.Fatal(err)
	}
	if f.Size() != int64(len(data)) || f.ETag() != `"v1"` {
		t.Fatalf("size %d etag %s", f.Size(), f.ETag())
	}
	r := rand.New(rand.NewPCG(2, 2))
	for range 50 {
		off := r.Int64N(int64(len(data)))
		n := r.IntN(5000)
		buf := make([]byte, n)
		m, err := f.ReadAt(buf, off)
		want := data[off:min(off+int64(n), int64(len(data)))]
		if m != len(want) || !bytes.Equal(buf[:m], want) {
			t.Fatalf("ReadAt(%d, %d) = %d bytes, differs", n, off, m)
		}
		if (len(want) < n) != errors.Is(err, io.EOF) || (err != nil && !errors.Is(err, io.EOF)) {
			t.Fatalf("ReadAt(%d, %d): err %v", n, off, err)
		}
	}
	if n, err := f.ReadAt(make([]byte, 10), int64(len(data))); n != 0 || err != io.EOF {
		t.Errorf("read at end: %d, %v", n, err)
	}
	if _, err := f.ReadAt(make([]byte, 10), -1); err == nil {
		t.Error("negative offset accepted")
	}
	before := srv.requests.Load()
	buf := make([]byte, 1000)
	if _, err := f.ReadAt(buf, 0); err != nil || !bytes.Equal(buf, data[:1000]) || srv.requests.Load() != before {
		t.Errorf("prefix read: err %v, requests %d -> %d", err, before, srv.requests.Load())
	}
	f.Close()
	if _, err := f.ReadAt(buf, 5000); !errors.Is(err, ErrClosed) {
		t.Errorf("read after close: %v", err)
	}
}

// TestSmallAndEmpty: objects shorter than the prefetch (206 clipped) and
// empty (416 bytes */0).
func TestSmallAndEmpty(t *testing.T) {
	for _, n := range []int{0, 1, 7, 100} {
		data := randomBytes(n, uint64(n))
		srv := newRangeServer(t, data)
		f, err := Open(context.Background(), srv.URL+"/small")
		if err != nil {
			t.Fatalf("%d bytes: %v", n, err)
		}
		got, err := io.ReadAll(io.NewSectionReader(f, 0, f.Size()))
		if f.Size() != int64(n) || err != nil || !bytes.Equal(got, data) {
			t.Fatalf("%d bytes: size %d, err %v", n, f.Size(), err)
		}
		if srv.requests.Load() != 1 {
			t.Errorf("%d bytes: %d requests", n, srv.requests.Load())
		}
	}
	// Servers that answer 416 bytes */0 for an empty object.
	srv := newRangeServer(t, nil)
	srv.setFault(func(w http.ResponseWriter, r *http.Request, n int64) bool {
		w.Header().Set("Content-Range", "bytes */0")
		w.WriteHeader(416)
		return true
	})
	f, err := Open(context.Background(), srv.URL+"/empty")
	if err != nil || f.Size() != 0 {
		t.Fatalf("416 */0: %v", err)
	}
	if n, err := f.ReadAt(make([]byte, 1), 0); n != 0 || err != io.EOF {
		t.Errorf("read of empty: %d %v", n, err)
	}
}

// TestFaults: every misbehaviour is an error, never wrong bytes.
func TestFaults(t *testing.T) {
	data := randomBytes(50_000, 3)
	type fault = func(w http.ResponseWriter, r *http.Request, n int64) bool
	cases := []struct {
		name     string
		fault    fault
		atOpen   bool
		wantIs   error
		requests int64 // expected requests for the failing call, 0 = don't care
	}{
		{"range ignored", func(w http.ResponseWriter, r *http.Request, n int64) bool {
			w.Header().Set("ETag", `"v1"`)
			w.WriteHeader(200)
			w.Write(data)
			return true
		}, true, ErrProtocol, 1},
		{"range ignored later", func(w http.ResponseWriter, r *http.Request, n int64) bool {
			if n == 1 {
				return false
			}
			w.Header().Set("ETag", `"v1"`)
			w.WriteHeader(200)
			w.Write(data)
			return true
		}, false, ErrProtocol, 2},
		{"wrong content-range", func(w http.ResponseWriter, r *http.Request, n int64) bool {
			if n == 1 {
				return false
			}
			w.Header().Set("ETag", `"v1"`)
			w.Header().Set("Content-Range", fmt.Sprintf("bytes 0-99/%d", len(data)))
			w.WriteHeader(206)
			w.Write(data[:100])
			return true
		}, false, ErrProtocol, 2},
		{"content-range without size", func(w http.ResponseWriter, r *http.Request, n int64) bool {
			w.Header().Set("Content-Range", "bytes 0-99/*")
			w.WriteHeader(206)
			w.Write(data[:100])
			return true
		}, true, ErrProtocol, 1},
		{"long body", func(w http.ResponseWriter, r *http.Request, n int64) bool {
			if n == 1 {
				return false
			}
			w.Header().Set("ETag", `"v1"`)
			w.Header().Set("Content-Range", fmt.Sprintf("bytes 40000-40099/%d", len(data)))
			w.WriteHeader(206)
			w.Write(data[40000:40200])
			return true
		}, false, ErrProtocol, 2},
		{"gzip", func(w http.ResponseWriter, r *http.Request, n int64) bool {
			w.Header().Set("Content-Encoding", "gzip")
			return false
		}, true, ErrProtocol, 1},
		{"truncated body", func(w http.ResponseWriter, r *http.Request, n int64) bool {
			if n == 1 {
				return false
			}
			w.Header().Set("ETag", `"v1"`)
			w.Header().Set("Content-Range", fmt.Sprintf("bytes 40000-40099/%d", len(data)))
			w.Header().Set("Content-Length", "100")
			w.WriteHeader(206)
			w.Write(data[40000:40050])
			return true
		}, false, io.ErrUnexpectedEOF, 1 + 4},
		{"416 on a non-empty object", func(w http.ResponseWriter, r *http.Request, n int64) bool {
			w.Header().Set("Content-Range", "bytes */50000")
			w.WriteHeader(416)
			return true
		}, true, ErrProtocol, 1},
		{"416 later", func(w http.ResponseWriter, r *http.Request, n int64) bool {
			if n == 1 {
				return false
			}
			w.Header().Set("Content-Range", "bytes */100")
			w.WriteHeader(416)
			return true
		}, false, ErrObjectChanged, 2},
		{"404", func(w http.ResponseWriter, r *http.Request, n int64) bool {
			http.NotFound(w, r)
			return true
		}, true, nil, 1},
		{"500 forever", func(w http.ResponseWriter, r *http.Request, n int64) bool {
			w.WriteHeader(500)
			return true
		}, true, nil, 4},
		{"429 Retry-After too long", func(w http.ResponseWriter, r *http.Request, n int64) bool {
			w.Header().Set("Retry-After", "3600")
			w.WriteHeader(429)
			return true
		}, true, nil, 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			srv := newRangeServer(t, data)
			srv.setFault(c.fault)
			f, err := Open(context.Background(), srv.URL+"/f", append([]Option{WithPrefetch(1000), WithReadAhead(0)}, fastRetries...)...)
			if !c.atOpen {
				if err != nil {
					t.Fatal(err)
				}
				buf := make([]byte, 100)
				_, err = f.ReadAt(buf, 40000)
			}
			if err == nil {
				t.Fatal("no error")
			}
			if c.wantIs != nil && !errors.Is(err, c.wantIs) {
				t.Errorf("error %v is not %v", err, c.wantIs)
			}
			var re *Error
			if !errors.As(err, &re) {
				t.Errorf("error %T is not *remote.Error", err)
			}
			if c.requests != 0 && srv.requests.Load() != c.requests {
				t.Errorf("%d requests, want %d", srv.requests.Load(), c.requests)
			}
			t.Log(err)
		})
	}
}

// TestStatusError: X-Error-Code and X-Error-Message reach the caller.
func TestStatusError(t *testing.T) {
	srv := newRangeServer(t, nil)
	srv.setFault(func(w http.ResponseWriter, r *http.Request, n int64) bool {
		w.Header().Set("X-Error-Code", "GatedRepo")
		w.Header().Set("X-Error-Message", "Access to model x/y is restricted.")
		w.WriteHeader(401)
		return true
	})
	_, err := Open(context.Background(), srv.URL+"/f")
	var se *StatusError
	if !errors.As(err, &se) || se.StatusCode != 401 || se.Code != "GatedRepo" || se.Message != "Access to model x/y is restricted." {
		t.Fatalf("got %v", err)
	}
}

// TestRetries: a 500 and a 429 with Retry-After are retried, and the bytes
// are right.
func TestRetries(t *testing.T) {
	data := randomBytes(5000, 4)
	for _, c := range []struct {
		name    string
		status  int
		after   string
		minWait time.Duration
	}{
		{"500", 500, "", 0},
		{"503", 503, "", 0},
		{"429 seconds", 429, "1", time.Second},
		{"429 date", 429, "DATE", 500 * time.Millisecond},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv := newRangeServer(t, data)
			srv.setFault(func(w http.ResponseWriter, r *http.Request, n int64) bool {
				if n > 1 {
					return false
				}
				switch c.after {
				case "DATE":
					// HTTP dates have whole seconds: at least ~0.5 s ahead.
					w.Header().Set("Retry-After", time.Now().Add(1500*time.Millisecond).UTC().Format(http.TimeFormat))
				case "":
				default:
					w.Header().Set("Retry-After", c.after)
				}
				w.WriteHeader(c.status)
				return true
			})
			start := time.Now()
			f, err := Open(context.Background(), srv.URL+"/f", fastRetries...)
			if err != nil {
				t.Fatal(err)
			}
			if el := time.Since(start); el < c.minWait {
				t.Errorf("retried after %v, Retry-After asked for %v", el, c.minWait)
			}
			got := make([]byte, len(data))
			if _, err := f.ReadAt(got, 0); err != nil || !bytes.Equal(got, data) {
				t.Fatalf("err %v", err)
			}
			if st := f.Stats(); st.Retries != 1 || st.Requests != 2 {
				t.Errorf("stats %+v", st)
			}
		})
	}
}

// TestStall: a server that stops sending is a timeout (errors.Is
// context.DeadlineExceeded and ErrStalled), retried, then given up.
func TestStall(t *testing.T) {
	data := randomBytes(5000, 5)
	srv := newRangeServer(t, data)
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	srv.setFault(func(w http.ResponseWriter, r *http.Request, n int64) bool {
		if r.Header.Get("Range") != "bytes=3000-3999" {
			return false
		}
		w.Header().Set("ETag", `"v1"`)
		w.Header().Set("Content-Range", "bytes 3000-3999/5000")
		w.Header().Set("Content-Length", "1000")
		w.WriteHeader(206)
		w.Write(data[3000:3100])
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
		}
		return true
	})
	f, err := Open(context.Background(), srv.URL+"/f", append([]Option{WithPrefetch(100), WithReadAhead(0), WithStallTimeout(100 * time.Millisecond)}, fastRetries...)...)
	if err != nil {
		t.Fatal(err)
	}
	_, err = f.ReadAt(make([]byte, 1000), 3000)
	if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, ErrStalled) {
		t.Fatalf("got %v", err)
	}
	if st := f.Stats(); st.Retries != 3 {
		t.Errorf("stats %+v", st)
	}
	// A per-request timeout is a deadline too; the caller's own deadline is
	// not retried.
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Millisecond)
	defer cancel()
	g, err := Open(context.Background(), srv.URL+"/f", WithPrefetch(100), WithReadAhead(0), WithStallTimeout(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	before := srv.requests.Load()
	_, err = g.ReadAtContext(ctx, make([]byte, 1000), 3000)
	if !errors.Is(err, context.DeadlineExceeded) || srv.requests.Load() != before+1 {
		t.Fatalf("got %v after %d requests", err, srv.requests.Load()-before)
	}
}

// TestObjectReplaced: the object changes between two requests; with an
// ETag (If-Match: 412), with only Last-Modified, and with only the size.
func TestObjectReplaced(t *testing.T) {
	data := randomBytes(50_000, 6)
	other := randomBytes(50_000, 7)
	for _, c := range []struct {
		name string
		etag string
		data []byte
	}{
		{"etag", `"v2"`, other},
		{"modtime only", "", other},
		{"size only", "", other[:40_100]},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv := newRangeServer(t, data)
			if c.etag == "" {
				srv.obj.etag = ""
			}
			f, err := Open(context.Background(), srv.URL+"/f", append([]Option{WithPrefetch(1000)}, fastRetries...)...)
			if err != nil {
				t.Fatal(err)
			}
			srv.obj.set(c.data, c.etag)
			if c.name == "size only" {
				srv.obj.modTime = time.Time{} // no Last-Modified
			}
			buf := make([]byte, 100)
			_, err = f.ReadAt(buf, 40000)
			if !errors.Is(err, ErrObjectChanged) {
				t.Fatalf("got %v", err)
			}
			if c.etag != "" && srv.lastReq.Load().Header.Get("If-Match") != `"v1"` {
				t.Errorf("If-Match %q", srv.lastReq.Load().Header.Get("If-Match"))
			}
		})
	}
}

func TestOptionsRejectInvalid(t *testing.T) {
	for i, o := range []Option{
		WithPrefetch(0), WithPrefetch(1 << 40), WithRetries(0, time.Second), WithRetries(3, 0),
		WithBackoff(0, time.Second), WithBackoff(time.Second, time.Millisecond), WithMaxRetryAfter(-1),
		WithRequestTimeout(-1), WithStallTimeout(0), WithConcurrency(0), WithMultiRange(0, 100),
		WithMultiRange(2, 10), WithCoalesceGap(-1), WithUserAgent(""), WithToken("a\nb"),
		WithEndpoint("ftp://x"), WithEndpoint("https://u:p@host"), WithClient(nil),
	} {
		if _, err := Open(context.Background(), "http://127.0.0.1:1/x", o); err == nil {
			t.Errorf("option %d accepted", i)
		}
	}
	for _, u := range []string{"ftp://x/y", "http://", "http://u:p@127.0.0.1/x", "::"} {
		if _, err := Open(context.Background(), u); !errors.Is(err, ErrInvalidURL) {
			t.Errorf("Open(%q): %v", u, err)
		}
	}
}

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	for in, want := range map[string]time.Duration{
		"0": 0, "7": 7 * time.Second, now.Add(90 * time.Second).Format(http.TimeFormat): 90 * time.Second,
		now.Add(-time.Hour).Format(http.TimeFormat): 0,
	} {
		if d, ok := parseRetryAfter(in, now); !ok || d != want {
			t.Errorf("%q: %v %v", in, d, ok)
		}
	}
	for _, in := range []string{"", "-1", "1.5", "soon", strconv.Itoa(1 << 40)} {
		if _, ok := parseRetryAfter(in, now); ok {
			t.Errorf("%q accepted", in)
		}
	}
}

// TestSlowloris: a server that trickles a byte at a time, each within the
// stall timeout, is a stall too: progress means 16 KiB per timeout.
func TestSlowloris(t *testing.T) {
	data := randomBytes(100_000, 9)
	srv := newRangeServer(t, data)
	srv.setFault(func(w http.ResponseWriter, r *http.Request, n int64) bool {
		if r.Header.Get("Range") != "bytes=50000-99999" {
			return false
		}
		w.Header().Set("ETag", `"v1"`)
		w.Header().Set("Content-Range", "bytes 50000-99999/100000")
		w.Header().Set("Content-Length", "50000")
		w.WriteHeader(206)
		for i := 50000; i < 100000; i++ {
			if _, err := w.Write(data[i : i+1]); err != nil {
				return true
			}
			w.(http.Flusher).Flush()
			select {
			case <-time.After(20 * time.Millisecond):
			case <-r.Context().Done():
				return true
			}
		}
		return true
	})
	f, err := Open(context.Background(), srv.URL+"/f", append([]Option{WithPrefetch(100), WithReadAhead(0), WithStallTimeout(200 * time.Millisecond)}, fastRetries...)...)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err = f.ReadAt(make([]byte, 50000), 50000)
	if !errors.Is(err, ErrStalled) {
		t.Fatalf("a trickling server: %v", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("took %v to give up", d)
	}
}
