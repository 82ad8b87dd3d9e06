package remote

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/textproto"
	"strings"
	"testing"
)

// columnRuns returns the runs of a column slice [c0, c1) of a rows x cols
// byte matrix stored at base.
func columnRuns(base int64, rows, cols, c0, c1 int) ([][]byte, []int64) {
	bufs := make([][]byte, rows)
	offs := make([]int64, rows)
	for i := range rows {
		bufs[i] = make([]byte, c1-c0)
		offs[i] = base + int64(i*cols+c0)
	}
	return bufs, offs
}

func checkRuns(t *testing.T, data []byte, bufs [][]byte, offs []int64) {
	t.Helper()
	for i, b := range bufs {
		if !bytes.Equal(b, data[offs[i]:offs[i]+int64(len(b))]) {
			t.Fatalf("run %d at %d: wrong bytes", i, offs[i])
		}
	}
}

// TestReadRunsColumn: a column slice of a 256-row matrix costs a handful
// of multi-range requests and moves about the slice's bytes.
func TestReadRunsColumn(t *testing.T) {
	const rows, cols = 256, 1024
	data := randomBytes(64+rows*cols, 8)
	srv := newRangeServer(t, data)
	f, err := Open(context.Background(), srv.URL+"/m", WithPrefetch(64))
	if err != nil {
		t.Fatal(err)
	}
	bufs, offs := columnRuns(64, rows, cols, 128, 256)
	if err := f.ReadRuns(bufs, offs); err != nil {
		t.Fatal(err)
	}
	checkRuns(t, data, bufs, offs)
	// the open, a first multi-range request of DefaultMaxRanges, then,
	// the server having answered it well, one for the rest
	want := int64(3)
	if got := srv.requests.Load(); got != want {
		t.Errorf("%d requests, want %d", got, want)
	}
	slice := int64(rows * 128)
	if got := srv.bytes.Load(); got > 64+slice+rows*200 { // multipart framing: ~150 bytes a part
		t.Errorf("moved %d bytes for a %d-byte slice", got, slice)
	}
	t.Logf("requests %d, bytes %d for a %d-byte slice", srv.requests.Load(), srv.bytes.Load(), slice)
	if f.conn.noMulti.Load() {
		t.Error("multi-range marked unsupported")
	}
}

// TestReadRunsFallback: servers that refuse multi-range requests with a 200,
// serve only the first range, or coalesce ranges into one.
func TestReadRunsFallback(t *testing.T) {
	const rows, cols = 64, 512
	data := randomBytes(rows*cols, 9)
	cases := map[string]func(w http.ResponseWriter, r *http.Request, n int64) bool{
		"200": func(w http.ResponseWriter, r *http.Request, n int64) bool {
			if !strings.Contains(r.Header.Get("Range"), ",") {
				return false
			}
			w.Header().Set("ETag", `"v1"`)
			w.WriteHeader(200)
			w.Write(data)
			return true
		},
		"first range only": func(w http.ResponseWriter, r *http.Request, n int64) bool {
			if first, _, ok := strings.Cut(r.Header.Get("Range"), ","); ok {
				r.Header.Set("Range", first)
			}
			return false
		},
		"coalesced": func(w http.ResponseWriter, r *http.Request, n int64) bool {
			rng := strings.TrimPrefix(r.Header.Get("Range"), "bytes=")
			parts := strings.Split(rng, ",")
			if len(parts) > 1 {
				first, _, _ := strings.Cut(parts[0], "-")
				_, last, _ := strings.Cut(parts[len(parts)-1], "-")
				r.Header.Set("Range", "bytes="+first+"-"+last)
			}
			return false
		},
	}
	for name, fault := range cases {
		for _, c1 := range []int{8, 500} { // sparse runs, and runs with small gaps
			t.Run(fmt.Sprintf("%s/%d", name, c1), func(t *testing.T) {
				srv := newRangeServer(t, data)
				srv.setFault(fault)
				f, err := Open(context.Background(), srv.URL+"/m", WithPrefetch(10), WithConcurrency(2))
				if err != nil {
					t.Fatal(err)
				}
				bufs, offs := columnRuns(0, rows, cols, 0, c1)
				if err := f.ReadRuns(bufs, offs); err != nil {
					t.Fatal(err)
				}
				checkRuns(t, data, bufs, offs)
				// Runs 12 bytes apart are one span (a gap under a
				// multipart part's framing): no multi-range request.
				if c1 == 8 && !f.conn.noMulti.Load() {
					t.Error("multi-range not marked unsupported")
				}
				t.Logf("requests %d, bytes %d", srv.requests.Load(), srv.bytes.Load())
				// Later calls go straight to single ranges, runs within
				// 64 KiB of each other read as one.
				before := srv.requests.Load()
				if err := f.ReadRuns(bufs[1:4], offs[1:4]); err != nil {
					t.Fatal(err)
				}
				checkRuns(t, data, bufs[1:4], offs[1:4])
				if got := srv.requests.Load() - before; got != 1 {
					t.Errorf("%d requests for 3 nearby runs after fallback", got)
				}
			})
		}
	}
}

// TestReadRunsBadMultipart: parts that do not match the ranges asked for are
// errors, never bytes.
func TestReadRunsBadMultipart(t *testing.T) {
	data := randomBytes(10_000, 10)
	type part struct {
		cr   string
		body []byte
	}
	cases := []struct {
		name   string
		parts  func(a, b [2]int64) []part
		wantIs error
	}{
		{"wrong range", func(a, b [2]int64) []part {
			return []part{{fmt.Sprintf("bytes %d-%d/10000", a[0], a[1]), data[a[0] : a[1]+1]}, {fmt.Sprintf("bytes %d-%d/10000", b[0]+1, b[1]+1), data[b[0]+1 : b[1]+2]}}
		}, ErrProtocol},
		{"duplicate", func(a, b [2]int64) []part {
			p := part{fmt.Sprintf("bytes %d-%d/10000", a[0], a[1]), data[a[0] : a[1]+1]}
			return []part{p, p}
		}, ErrProtocol},
		{"long part", func(a, b [2]int64) []part {
			return []part{{fmt.Sprintf("bytes %d-%d/10000", a[0], a[1]), data[a[0] : a[1]+2]}, {fmt.Sprintf("bytes %d-%d/10000", b[0], b[1]), data[b[0] : b[1]+1]}}
		}, ErrProtocol},
		{"other size", func(a, b [2]int64) []part {
			return []part{{fmt.Sprintf("bytes %d-%d/20000", a[0], a[1]), data[a[0] : a[1]+1]}}
		}, ErrObjectChanged},
		{"missing part", func(a, b [2]int64) []part {
			return []part{{fmt.Sprintf("bytes %d-%d/10000", a[0], a[1]), data[a[0] : a[1]+1]}}
		}, io.ErrUnexpectedEOF},
		{"short part", func(a, b [2]int64) []part {
			return []part{{fmt.Sprintf("bytes %d-%d/10000", a[0], a[1]), data[a[0]:a[1]]}, {fmt.Sprintf("bytes %d-%d/10000", b[0], b[1]), data[b[0] : b[1]+1]}}
		}, io.ErrUnexpectedEOF},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			srv := newRangeServer(t, data)
			srv.setFault(func(w http.ResponseWriter, r *http.Request, n int64) bool {
				if !strings.Contains(r.Header.Get("Range"), ",") {
					return false
				}
				var a, b [2]int64
				fmt.Sscanf(r.Header.Get("Range"), "bytes=%d-%d,%d-%d", &a[0], &a[1], &b[0], &b[1])
				var body bytes.Buffer
				mw := multipart.NewWriter(&body)
				for _, p := range c.parts(a, b) {
					pw, _ := mw.CreatePart(textproto.MIMEHeader{"Content-Range": {p.cr}, "Content-Type": {"application/octet-stream"}})
					pw.Write(p.body)
				}
				mw.Close()
				w.Header().Set("ETag", `"v1"`)
				w.Header().Set("Content-Type", "multipart/byteranges; boundary="+mw.Boundary())
				w.WriteHeader(206)
				w.Write(body.Bytes())
				return true
			})
			f, err := Open(context.Background(), srv.URL+"/m", append([]Option{WithPrefetch(10)}, fastRetries...)...)
			if err != nil {
				t.Fatal(err)
			}
			err = f.ReadRuns([][]byte{make([]byte, 100), make([]byte, 100)}, []int64{1000, 5000})
			if !errors.Is(err, c.wantIs) {
				t.Fatalf("got %v, want %v", err, c.wantIs)
			}
			t.Log(err)
		})
	}
}

func TestReadRunsInvalid(t *testing.T) {
	data := randomBytes(1000, 11)
	srv := newRangeServer(t, data)
	f, err := Open(context.Background(), srv.URL+"/m", WithPrefetch(10))
	if err != nil {
		t.Fatal(err)
	}
	b := func(n int) []byte { return make([]byte, n) }
	for name, c := range map[string]struct {
		bufs [][]byte
		offs []int64
	}{
		"lengths":     {[][]byte{b(1)}, nil},
		"negative":    {[][]byte{b(1)}, []int64{-1}},
		"past end":    {[][]byte{b(10)}, []int64{995}},
		"overflow":    {[][]byte{b(10)}, []int64{1<<63 - 5}},
		"overlapping": {[][]byte{b(10), b(10)}, []int64{100, 105}},
		"unsorted":    {[][]byte{b(10), b(10)}, []int64{200, 100}},
	} {
		if err := f.ReadRuns(c.bufs, c.offs); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	// Touching runs, runs in the prefix, empty runs.
	bufs := [][]byte{b(5), b(10), b(0), b(20), b(30)}
	offs := []int64{0, 5, 15, 15, 970}
	if err := f.ReadRuns(bufs, offs); err != nil {
		t.Fatal(err)
	}
	checkRuns(t, data, bufs, offs)
}

// TestReadRunsLargeBatches: once a server answers a multi-range request
// well, thousands of runs go in one request; a server that refuses a long
// Range header (here over 8 KiB, as nginx does) is asked again with
// shorter ones, and remembered.
func TestReadRunsLargeBatches(t *testing.T) {
	data := randomBytes(4<<20, 40)
	for _, limit := range []int{0, 8 << 10} {
		srv := newRangeServer(t, data)
		var refused int
		if limit > 0 {
			srv.setFault(func(w http.ResponseWriter, r *http.Request, n int64) bool {
				if len(r.Header.Get("Range")) > limit {
					refused++
					http.Error(w, "Request Header Or Cookie Too Large", http.StatusBadRequest)
					return true
				}
				return false
			})
		}
		f, err := Open(context.Background(), srv.URL+"/m", WithPrefetch(64))
		if err != nil {
			t.Fatal(err)
		}
		bufs := make([][]byte, 5000)
		offs := make([]int64, 5000)
		for i := range bufs {
			bufs[i], offs[i] = make([]byte, 40), 1000+int64(i)*800
		}
		if err := f.ReadRuns(bufs, offs); err != nil {
			t.Fatalf("limit %d: %v", limit, err)
		}
		checkRuns(t, data, bufs, offs)
		got := srv.requests.Load()
		t.Logf("header limit %d: %d requests (%d refused)", limit, got, refused)
		// 5,000 ranges of ~16 bytes: one request once grown; with 8 KiB
		// headers ~500 ranges a request, after a few refusals.
		if limit == 0 && got != 3 || limit > 0 && (got > 30 || refused > 5) {
			t.Errorf("header limit %d: %d requests, %d refused", limit, got, refused)
		}
		// a second call knows the limit: no more refusals
		before, ref := srv.requests.Load(), refused
		if err := f.ReadRuns(bufs, offs); err != nil || refused != ref {
			t.Fatalf("second call: %v, %d more refusals", err, refused-ref)
		}
		t.Logf("second call: %d requests", srv.requests.Load()-before)
	}
}
