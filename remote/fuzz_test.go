package remote

import (
	"bytes"
	"context"
	"fmt"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"net/textproto"
	"sync/atomic"
	"testing"
	"time"
)

// FuzzMultipartAnswer serves hostile multipart/byteranges bodies to a
// two-run ReadRuns: it must return an error or fill the runs, never panic
// or hang.
func FuzzMultipartAnswer(f *testing.F) {
	data := randomBytes(10_000, 40)
	var body atomic.Pointer[[]byte]
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Range") == "bytes=0-9" {
			w.Header().Set("Content-Range", "bytes 0-9/10000")
			w.WriteHeader(http.StatusPartialContent)
			w.Write(data[:10])
			return
		}
		w.Header().Set("Content-Type", "multipart/byteranges; boundary=B")
		w.WriteHeader(http.StatusPartialContent)
		w.Write(*body.Load())
	}))
	defer srv.Close()
	file, err := Open(context.Background(), srv.URL+"/f", WithPrefetch(10), WithRetries(1, time.Second), WithStallTimeout(time.Second))
	if err != nil {
		f.Fatal(err)
	}
	var seed bytes.Buffer
	mw := multipart.NewWriter(&seed)
	mw.SetBoundary("B")
	for _, r := range [][2]int{{1000, 1099}, {5000, 5099}} {
		pw, _ := mw.CreatePart(textproto.MIMEHeader{"Content-Range": {fmt.Sprintf("bytes %d-%d/10000", r[0], r[1])}})
		pw.Write(data[r[0] : r[1]+1])
	}
	mw.Close()
	f.Add(seed.Bytes())
	f.Add([]byte("--B\r\nContent-Range: bytes 1000-1099/10000\r\n\r\n--B--"))
	f.Fuzz(func(t *testing.T, b []byte) {
		body.Store(&b)
		bufs := [][]byte{make([]byte, 100), make([]byte, 100)}
		file.conn.noMulti.Store(false)
		_ = file.ReadRuns(bufs, []int64{1000, 5000})
	})
}
