package remote

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
)

// TestReadRangeFunc: a range streamed in pieces of the buffer's size, in
// order; a body cut short is resumed by a request for the bytes not yet
// handed over, so the bytes moved are the range and no more.
func TestReadRangeFunc(t *testing.T) {
	data := randomBytes(300_000, 7)
	s := newRangeServer(t, data)
	f, err := Open(context.Background(), s.URL, append(fastRetries, WithPrefetch(1))...)
	if err != nil {
		t.Fatal(err)
	}
	var ranges []string
	s.setFault(func(w http.ResponseWriter, r *http.Request, n int64) bool {
		ranges = append(ranges, r.Header.Get("Range"))
		if n == 2 { // the first read: cut its body after 10,000 bytes
			var first, last int64
			fmt.Sscanf(r.Header.Get("Range"), "bytes=%d-%d", &first, &last)
			w.Header().Set("ETag", `"v1"`)
			w.Header().Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", first, last, len(data)))
			w.Header().Set("Content-Length", fmt.Sprint(last-first+1))
			w.WriteHeader(http.StatusPartialContent)
			w.Write(data[first : first+10_000])
			panic(http.ErrAbortHandler)
		}
		return false
	})
	var got bytes.Buffer
	next := int64(1000)
	pieces := 0
	s.bytes.Store(0)
	err = f.ReadRangeFunc(context.Background(), 1000, 250_000, make([]byte, 4096), func(p []byte, pos int64) error {
		if pos != next {
			t.Fatalf("piece at %d, want %d", pos, next)
		}
		if len(p) > 4096 {
			t.Fatalf("piece of %d bytes, more than the buffer", len(p))
		}
		next += int64(len(p))
		pieces++
		got.Write(p)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.Bytes(), data[1000:251_000]) {
		t.Fatal("wrong bytes")
	}
	if len(ranges) != 2 || ranges[0] != "bytes=1000-250999" || ranges[1] != "bytes=11000-250999" {
		t.Fatalf("requests %q, want the range, then the rest after the cut", ranges)
	}
	if pieces < 250_000/4096 {
		t.Fatalf("%d pieces", pieces)
	}
}

// TestReadRangeFuncChanged: a response of another object hands nothing
// over; an error from the callback stops the read and is returned.
func TestReadRangeFuncChanged(t *testing.T) {
	data := randomBytes(50_000, 8)
	s := newRangeServer(t, data)
	f, err := Open(context.Background(), s.URL, append(fastRetries, WithPrefetch(1))...)
	if err != nil {
		t.Fatal(err)
	}
	s.obj.set(randomBytes(50_000, 9), `"v2"`)
	called := false
	err = f.ReadRangeFunc(context.Background(), 0, 50_000, make([]byte, 1024), func(p []byte, pos int64) error {
		called = true
		return nil
	})
	if !errors.Is(err, ErrObjectChanged) || called {
		t.Fatalf("err %v, callback called %v; want ErrObjectChanged before any byte", err, called)
	}

	if f, err = Open(context.Background(), s.URL, append(fastRetries, WithPrefetch(1))...); err != nil {
		t.Fatal(err)
	}
	stop := errors.New("disk full")
	err = f.ReadRangeFunc(context.Background(), 0, 50_000, make([]byte, 1024), func(p []byte, pos int64) error {
		return stop
	})
	if !errors.Is(err, stop) || !strings.Contains(err.Error(), s.URL) {
		t.Fatalf("err %v, want the callback's error naming the object", err)
	}
	if err := f.ReadRangeFunc(context.Background(), 40_000, 20_000, make([]byte, 1024), func([]byte, int64) error { return nil }); err == nil {
		t.Fatal("a range past the end was read")
	}
}

// TestFileInfos: sizes, blob ids and LFS digests from ?blobs=true; a
// malformed digest is a protocol error.
func TestFileInfos(t *testing.T) {
	h := newHubServer(t)
	h.put(commitA, "config.json", []byte("{}"))
	h.put(commitA, "model.safetensors", randomBytes(5000, 3))
	hub := newTestHub(t, h)
	ref, _ := ParseHubURL("hf://org/model")
	repo, err := hub.Repo(ref)
	if err != nil {
		t.Fatal(err)
	}
	files, err := repo.FileInfos(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 2 || files[0].Path != "config.json" || files[1].Path != "model.safetensors" {
		t.Fatalf("files %+v", files)
	}
	if files[0].LFS != nil || files[0].Size != 2 || files[0].Digest() != gitBlobID([]byte("{}")) {
		t.Fatalf("config.json: %+v", files[0])
	}
	if l := files[1].LFS; l == nil || l.Size != 5000 || files[1].Digest() != l.SHA256 || len(l.SHA256) != 64 {
		t.Fatalf("model.safetensors: %+v", files[1])
	}
	if repo.Commit() != commitA {
		t.Fatalf("commit %q not pinned", repo.Commit())
	}
	h.badDigest.Store(true)
	repo2, _ := hub.Repo(ref)
	if _, err := repo2.FileInfos(context.Background()); !errors.Is(err, ErrProtocol) {
		t.Fatalf("malformed digest: %v", err)
	}
}
