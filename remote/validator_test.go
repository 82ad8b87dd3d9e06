package remote

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	safetensors "github.com/gosafetensors/safetensors"
)

// swapServer serves one object whose bytes are replaced by other bytes of
// the same size after the first request: what a server that does not pin
// its objects does when a file is overwritten while it is read. headers
// sets the validators of each response (n counts requests from 1).
type swapServer struct {
	*httptest.Server
	mu       sync.Mutex
	n        int
	a, b     []byte
	headers  func(h http.Header, n int)
	modTime  func(n int) time.Time
	requests []http.Header
}

func newSwapServer(t *testing.T, a, b []byte, headers func(h http.Header, n int), modTime func(n int) time.Time) *swapServer {
	s := &swapServer{a: a, b: b, headers: headers, modTime: modTime}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.n++
		n := s.n
		s.requests = append(s.requests, r.Header.Clone())
		s.mu.Unlock()
		data := s.a
		if n > 1 {
			data = s.b
		}
		if headers != nil {
			headers(w.Header(), n)
		}
		var mod time.Time
		if modTime != nil {
			mod = modTime(n)
		}
		http.ServeContent(w, r, "", mod, bytes.NewReader(data))
	}))
	t.Cleanup(s.Close)
	return s
}

// twoModels returns two safetensors files of the same size and layout
// whose tensor bytes differ: one's header read with the other's data is a
// plausible, wrong model.
func twoModels(t *testing.T) ([]byte, []byte) {
	t.Helper()
	make1 := func(v byte) []byte {
		data := bytes.Repeat([]byte{v}, 4000)
		b, err := safetensors.Marshal([]safetensors.TensorData{{Name: "w", DType: safetensors.U8, Shape: []int64{4000}, Data: data}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	a, b := make1(1), make1(2)
	if len(a) != len(b) || bytes.Equal(a, b) {
		t.Fatal("want two files of one size")
	}
	return a, b
}

// readTensor opens url, reads tensor "w" and returns its bytes.
func readTensor(url string, opts ...Option) ([]byte, error) {
	f, err := Open(context.Background(), url, append([]Option{WithPrefetch(200)}, opts...)...)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	r, err := safetensors.NewReader(f, f.Size())
	if err != nil {
		return nil, err
	}
	tn, err := r.Tensor("w")
	if err != nil {
		return nil, err
	}
	return tn.Copy()
}

// TestNoValidatorRefused: an object replaced by same-size bytes between the
// header request and the data request, on servers that send nothing that
// pins it, is refused with ErrNoValidator (before, the header of one file
// was read with the data of the other, exit 0). Trusting the server reads
// it (the caller's decision); a validator the server did send still counts.
func TestNoValidatorRefused(t *testing.T) {
	a, b := twoModels(t)
	// One instant for both objects: "replaced within the same second"
	// (time.Now() per request once crossed a second under load, and the
	// trusted read's If-Unmodified-Since then failed).
	now := time.Now()
	recent := func(int) time.Time { return now }
	old := func(int) time.Time { return time.Date(2024, 5, 1, 0, 0, 0, 0, time.UTC) }
	weak := func(h http.Header, n int) { h.Set("ETag", `W/"same"`) }
	for _, c := range []struct {
		name    string
		headers func(http.Header, int)
		mod     func(int) time.Time
		says    string
	}{
		{"nothing", nil, nil, "no ETag and no Last-Modified"},
		{"weak etag", weak, nil, `only a weak ETag (W/"same")`},
		{"recent last-modified", nil, recent, "before its Date"},
		{"weak etag, recent last-modified", weak, recent, "weak ETag"},
		{"last-modified without date", func(h http.Header, n int) { h["Date"] = nil }, old, "no Date"},
		{"malformed etag", func(h http.Header, n int) { h.Set("ETag", "v1") }, nil, "malformed ETag"},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv := newSwapServer(t, a, b, c.headers, c.mod)
			_, err := readTensor(srv.URL + "/m.safetensors")
			if !errors.Is(err, ErrNoValidator) || !strings.Contains(err.Error(), c.says) || !strings.Contains(err.Error(), "strong ETag") {
				t.Fatalf("got %v", err)
			}
			if srv.n != 1 {
				t.Errorf("%d requests; the refusal must come before a second one", srv.n)
			}
			var re *Error
			if !errors.As(err, &re) || re.Op != "read" {
				t.Errorf("not a *remote.Error: %#v", err)
			}
			// Trusted: read with two requests (here the mix the user
			// accepted the risk of).
			srv2 := newSwapServer(t, a, b, c.headers, c.mod)
			got, err := readTensor(srv2.URL+"/m.safetensors", WithTrustUnvalidated(true))
			start := len(a) - 4000
			mixed := append(append([]byte(nil), a[start:200]...), b[200:]...)
			if err != nil || !bytes.Equal(got, mixed) {
				t.Fatalf("trusted: %v", err)
			}
		})
	}
}

// TestSingleRequestNeedsNoValidator: what one response holds cannot mix
// objects, so a file read whole by the first request needs no validator.
func TestSingleRequestNeedsNoValidator(t *testing.T) {
	a, b := twoModels(t)
	srv := newSwapServer(t, a, b, nil, nil)
	f, err := Open(context.Background(), srv.URL+"/m.safetensors")
	if err != nil {
		t.Fatal(err)
	}
	r, err := safetensors.NewReader(f, f.Size())
	if err != nil {
		t.Fatal(err)
	}
	tn, _ := r.Tensor("w")
	got, err := tn.Copy()
	if err != nil || !bytes.Equal(got, a[len(a)-4000:]) || srv.n != 1 {
		t.Fatalf("%v after %d requests", err, srv.n)
	}
	// Runs inside the first response are served without a request too.
	bufs := [][]byte{make([]byte, 10), make([]byte, 10)}
	if err := f.ReadRuns(bufs, []int64{0, 100}); err != nil || srv.n != 1 {
		t.Fatalf("ReadRuns: %v after %d requests", err, srv.n)
	}
	// A header that fits the first request is read without a validator;
	// its data, which needs a second request, is refused.
	srv = newSwapServer(t, a, b, nil, nil)
	f, err = Open(context.Background(), srv.URL+"/m.safetensors", WithPrefetch(200))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := safetensors.NewReader(f, f.Size()); err != nil || srv.n != 1 {
		t.Fatalf("header: %v after %d requests", err, srv.n)
	}
	bufs = [][]byte{make([]byte, 10), make([]byte, 10)}
	if err := f.ReadRuns(bufs, []int64{0, 3000}); !errors.Is(err, ErrNoValidator) || srv.n != 1 {
		t.Fatalf("ReadRuns beyond the first response: %v after %d requests", err, srv.n)
	}
}

// TestValidatorsPin: with a strong ETag, or a Last-Modified old enough,
// the replaced object is ErrObjectChanged, and the validator is sent back
// as a precondition to the host that gave it. A server that ignores the
// precondition is caught by comparing what it sends; one that stops
// sending the pinning validator is refused too.
func TestValidatorsPin(t *testing.T) {
	a, b := twoModels(t)
	old := func(n int) time.Time {
		return time.Date(2024, 5, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(n-1) * time.Second)
	}
	oldSame := func(int) time.Time { return time.Date(2024, 5, 1, 0, 0, 0, 0, time.UTC) }
	for _, c := range []struct {
		name    string
		headers func(http.Header, int)
		mod     func(int) time.Time
		precond string // header sent back on the second request
		value   string
	}{
		// http.ServeContent honours If-Match with the ETag set before it.
		{"strong etag", func(h http.Header, n int) { h.Set("ETag", []string{"", `"a"`, `"b"`}[min(n, 2)]) }, nil, "If-Match", `"a"`},
		{"etag dropped", func(h http.Header, n int) {
			if n == 1 {
				h.Set("ETag", `"a"`)
			}
		}, oldSame, "If-Match", `"a"`},
		{"old last-modified", nil, old, "If-Unmodified-Since", "Wed, 01 May 2024 00:00:00 GMT"},
		{"weak etag, old last-modified", func(h http.Header, n int) { h.Set("ETag", `W/"same"`) }, old, "If-Unmodified-Since", "Wed, 01 May 2024 00:00:00 GMT"},
		{"last-modified dropped", nil, func(n int) time.Time {
			if n > 1 {
				return time.Time{}
			}
			return oldSame(n)
		}, "If-Unmodified-Since", "Wed, 01 May 2024 00:00:00 GMT"},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv := newSwapServer(t, a, b, c.headers, c.mod)
			for _, trust := range []bool{false, true} {
				srv.n, srv.requests = 0, nil
				_, err := readTensor(srv.URL+"/m.safetensors", WithTrustUnvalidated(trust))
				if !errors.Is(err, ErrObjectChanged) {
					t.Fatalf("trust=%v: got %v", trust, err)
				}
				if len(srv.requests) < 2 || srv.requests[1].Get(c.precond) != c.value {
					t.Errorf("second request: %s = %q", c.precond, srv.requests[min(1, len(srv.requests)-1)].Get(c.precond))
				}
			}
		})
	}
}

// TestCDNValidator: a file redirected to a CDN is pinned by the CDN's
// validator, sent back only to the CDN; the redirecting host's weak or
// missing validators do not matter.
func TestCDNValidator(t *testing.T) {
	a, b := twoModels(t)
	cdn := newSwapServer(t, a, b, func(h http.Header, n int) { h.Set("ETag", []string{"", `"a"`, `"b"`}[min(n, 2)]) }, nil)
	var originIfMatch []string
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		originIfMatch = append(originIfMatch, r.Header.Get("If-Match"))
		w.Header().Set("ETag", `W/"origin"`)
		http.Redirect(w, r, cdn.URL+"/blob", http.StatusFound)
	}))
	defer origin.Close()
	_, err := readTensor(origin.URL + "/m.safetensors")
	if !errors.Is(err, ErrObjectChanged) {
		t.Fatalf("got %v", err)
	}
	if cdn.requests[1].Get("If-Match") != `"a"` || len(originIfMatch) != 1 || originIfMatch[0] != "" {
		t.Errorf("If-Match to the CDN %q, to the origin %q", cdn.requests[1].Get("If-Match"), originIfMatch)
	}
}

// TestHubCommitPins: a Hub file is read at a commit, whose bytes never
// change, so a CDN that sends no validator is no reason to refuse it; the
// first file, opened at a branch, is re-resolved at the commit, not at the
// branch, which may have moved.
func TestHubCommitPins(t *testing.T) {
	h := newHubServer(t)
	h.cdnBare.Store(true)
	big := randomBytes(5000, 80)
	h.put(commitA, "model.safetensors", big)
	h.put(commitB, "model.safetensors", randomBytes(5000, 81))
	hub := newTestHub(t, h, WithPrefetch(100))
	repo, err := hub.Repo(Ref{Repo: "org/model"})
	if err != nil {
		t.Fatal(err)
	}
	f, err := repo.Open(context.Background(), "model.safetensors")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(f.url.Path, "/resolve/"+commitA+"/") || f.pinned != pinCommit {
		t.Fatalf("first file: URL %s, pin %d", f.url, f.pinned)
	}
	h.setBranch("main", commitB)
	f.final.Store(nil) // as if the CDN URL expired: resolve again
	got := make([]byte, 4000)
	if _, err := f.ReadAt(got, 1000); err != nil || !bytes.Equal(got, big[1000:]) {
		t.Fatalf("read after the branch moved: %v", err)
	}
	// A mirror that names no commit and whose CDN sends no validator is a
	// server like any other.
	mirror := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(big))
	}))
	defer mirror.Close()
	_, mf, err := openLocation(hub, mirror.URL+"/org/model/resolve/main/model.safetensors")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := mf.ReadAt(got, 1000); !errors.Is(err, ErrNoValidator) {
		t.Fatalf("mirror without validators: %v", err)
	}
}

// TestLinkedETagChanged: a Hub answer that names another LFS object
// (X-Linked-Etag) than the one opened is refused, whatever the CDN says.
func TestLinkedETagChanged(t *testing.T) {
	data := randomBytes(5000, 82)
	cdn := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("ETag", `"blob"`)
		http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(data))
	}))
	defer cdn.Close()
	var resolves int
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		resolves++
		w.Header().Set("X-Linked-Etag", []string{"", `"sha-1"`, `"sha-2"`}[min(resolves, 2)])
		http.Redirect(w, r, cdn.URL+"/blob?sig=x", http.StatusFound)
	}))
	defer origin.Close()
	f, err := Open(context.Background(), origin.URL+"/m", WithPrefetch(100))
	if err != nil {
		t.Fatal(err)
	}
	f.final.Store(nil) // as if the CDN URL expired: resolve again
	if _, err := f.ReadAt(make([]byte, 100), 1000); !errors.Is(err, ErrObjectChanged) || !strings.Contains(err.Error(), "X-Linked-Etag") {
		t.Fatalf("got %v", err)
	}
}
