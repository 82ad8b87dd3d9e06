package remote

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// safetensorsLike returns bytes that start with a safetensors prefix
// announcing a header of hlen bytes.
func safetensorsLike(hlen, total int, seed uint64) []byte {
	b := randomBytes(total, seed)
	binary.LittleEndian.PutUint64(b, uint64(hlen))
	return b
}

// TestAdaptivePrefetch: a header larger than the prefetch costs a second
// request once; files opened later through the same Hub prefetch enough.
func TestAdaptivePrefetch(t *testing.T) {
	h := newHubServer(t)
	for i, name := range []string{"a.safetensors", "b.safetensors", "c.safetensors"} {
		h.put(commitA, name, safetensorsLike(3000+i*10, 8000, uint64(i)))
	}
	hub := newTestHub(t, h, WithPrefetch(1000))
	repo, _ := hub.Repo(Ref{Repo: "org/model"})
	for i, name := range []string{"a.safetensors", "b.safetensors", "c.safetensors"} {
		f, err := repo.Open(context.Background(), name)
		if err != nil {
			t.Fatal(err)
		}
		var prefix [8]byte
		f.ReadAt(prefix[:], 0)
		hdr := make([]byte, binary.LittleEndian.Uint64(prefix[:]))
		if _, err := f.ReadAt(hdr, 8); err != nil {
			t.Fatal(err)
		}
		want := int64(2) // first file: prefix, then the rest of the header
		if i > 0 {
			want = 1
		}
		// Requests to the data host only (the Hub's redirect is not a read).
		if got := h.cdnReqs.Load(); i == 0 && got != want {
			t.Errorf("%s: %d reads", name, got)
		}
		if i > 0 && f.Stats().Requests != 2 { // 302 + CDN
			t.Errorf("%s: %+v", name, f.Stats())
		}
	}
}

// TestExpiredRedirect: a remembered redirect target (a signed CDN URL)
// that starts failing with 403 sends the next read back to the original URL.
func TestExpiredRedirect(t *testing.T) {
	data := randomBytes(5000, 30)
	var expired atomic.Bool
	var cdnReqs, origReqs atomic.Int64
	cdn := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		cdnReqs.Add(1)
		if r.URL.Query().Get("sig") == "old" && expired.Load() {
			http.Error(w, "expired", http.StatusForbidden)
			return
		}
		w.Header().Set("ETag", `"e"`)
		http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(data))
	}))
	defer cdn.Close()
	orig := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		origReqs.Add(1)
		sig := "old"
		if expired.Load() {
			sig = "new"
		}
		http.Redirect(w, r, cdn.URL+"/blob?sig="+sig, http.StatusFound)
	}))
	defer orig.Close()
	f, err := Open(context.Background(), orig.URL+"/f", WithPrefetch(100), WithReadAhead(0))
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 100)
	if _, err := f.ReadAt(buf, 1000); err != nil || origReqs.Load() != 1 {
		t.Fatalf("err %v, %d requests to the origin (want the CDN URL reused)", err, origReqs.Load())
	}
	expired.Store(true)
	if _, err := f.ReadAt(buf, 2000); err != nil || !bytes.Equal(buf, data[2000:2100]) {
		t.Fatal(err)
	}
	if origReqs.Load() != 2 {
		t.Errorf("%d requests to the origin", origReqs.Load())
	}
}

// TestConcurrencyBound: no more requests in flight than WithConcurrency.
func TestConcurrencyBound(t *testing.T) {
	data := randomBytes(100_000, 31)
	var inFlight, peak atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := inFlight.Add(1)
		defer inFlight.Add(-1)
		for {
			p := peak.Load()
			if n <= p || peak.CompareAndSwap(p, n) {
				break
			}
		}
		time.Sleep(2 * time.Millisecond)
		w.Header().Set("ETag", `"x"`)
		http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(data))
	}))
	defer srv.Close()
	f, err := Open(context.Background(), srv.URL+"/f", WithPrefetch(10), WithConcurrency(3), WithMultiRange(1, 100))
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Go(func() {
			buf := make([]byte, 100)
			if _, err := f.ReadAt(buf, int64(1000*i)); err != nil || !bytes.Equal(buf, data[1000*i:1000*i+100]) {
				t.Error(err)
			}
		})
	}
	bufs, offs := columnRuns(0, 50, 1000, 10, 20)
	if err := f.ReadRuns(bufs, offs); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	checkRuns(t, data, bufs, offs)
	if peak.Load() > 3 {
		t.Errorf("%d requests in flight, bound 3", peak.Load())
	}
}

// openLocation opens the file an hf:// or resolve URL names.
func openLocation(h *Hub, loc string) (*Repo, *File, error) {
	ref, err := ParseHubURL(loc)
	if err != nil {
		return nil, nil, err
	}
	repo, err := h.Repo(ref)
	if err != nil {
		return nil, nil, err
	}
	f, err := repo.Open(context.Background(), ref.Path)
	return repo, f, err
}

func TestOpenResolveURL(t *testing.T) {
	h := newHubServer(t)
	h.put(commitA, "sub/"+indexFile, []byte("{}"))
	h.put(commitA, "pytorch_model.bin", []byte("PK"))
	hub := newTestHub(t, h)
	for loc, want := range map[string]int64{
		"hf://org/model/pytorch_model.bin":                     2,
		h.hub.URL + "/org/model/resolve/main/sub/" + indexFile: 2,
	} {
		repo, f, err := openLocation(hub, loc)
		if err != nil || f.Size() != want || repo.Commit() != commitA {
			t.Errorf("%s: %v", loc, err)
		}
	}
}

// TestMirrorWithoutCommit: a resolve URL on a host other than the Hub's
// endpoint that reports no X-Repo-Commit opens at the revision's name; the
// endpoint itself must report it.
func TestMirrorWithoutCommit(t *testing.T) {
	data := randomBytes(500, 70)
	srv := newRangeServer(t, data)
	hub, err := NewHub(WithEndpoint("https://huggingface.co"), WithToken("tok"), WithOffline(false))
	if err != nil {
		t.Fatal(err)
	}
	repo, f, err := openLocation(hub, srv.URL+"/org/model/resolve/main/model.safetensors")
	if err != nil {
		t.Fatal(err)
	}
	if repo.Commit() != "" || f.Size() != 500 {
		t.Errorf("commit %q size %d", repo.Commit(), f.Size())
	}
	if srv.lastReq.Load().Header.Get("Authorization") != "" {
		t.Error("token sent to a mirror")
	}
	own, err := NewHub(WithEndpoint(srv.URL), WithOffline(false))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := openLocation(own, "hf://org/model/model.safetensors"); !errors.Is(err, ErrProtocol) {
		t.Errorf("endpoint without X-Repo-Commit: %v", err)
	}
}
