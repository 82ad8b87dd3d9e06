package remote

import (
	"bytes"
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// The names of a Hub model's files (choosing among them is package
// source's business).
const (
	indexFile  = "model.safetensors.index.json"
	singleFile = "model.safetensors"
)

const (
	commitA = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	commitB = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
	token   = "hf_test_token"
)

// hubServer is shaped like the Hub: /ORG/REPO/resolve/REV/FILE answers with
// X-Repo-Commit; large files redirect (302) to a CDN on another loopback
// host; private repos need the token; errors carry X-Error-Code.
type hubServer struct {
	hub, cdn *httptest.Server
	cdnHost  string // host:port as written in redirects

	mu        sync.Mutex
	branches  map[string]string            // branch -> commit
	files     map[string]map[string][]byte // commit -> path -> bytes
	hubReqs   atomic.Int64
	cdnReqs   atomic.Int64
	cdnAuth   atomic.Int64 // CDN requests that carried Authorization
	hubNoTok  atomic.Int64 // Hub requests without the token
	cdnBare   atomic.Bool  // the CDN sends no validator
	badDigest atomic.Bool  // the API lists a malformed LFS digest
	paths     []string     // every Hub path requested
}

func newHubServer(t *testing.T) *hubServer {
	t.Helper()
	h := &hubServer{
		branches: map[string]string{"main": commitA},
		files:    map[string]map[string][]byte{commitA: {}, commitB: {}},
	}
	h.hub = httptest.NewServer(http.HandlerFunc(h.serveHub))
	t.Cleanup(h.hub.Close)
	var l net.Listener
	if l2, err := net.Listen("tcp", "127.0.0.2:0"); err == nil {
		l = l2
		h.cdnHost = l.Addr().String()
	} else {
		l, err = net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		_, port, _ := net.SplitHostPort(l.Addr().String())
		h.cdnHost = "localhost:" + port
	}
	h.cdn = &httptest.Server{Listener: l, Config: &http.Server{Handler: http.HandlerFunc(h.serveCDN)}}
	h.cdn.Start()
	t.Cleanup(h.cdn.Close)
	return h
}

func (h *hubServer) put(commit, path string, data []byte) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.files[commit][path] = data
}

func (h *hubServer) setBranch(name, commit string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.branches[name] = commit
}

func hubError(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("X-Error-Code", code)
	w.Header().Set("X-Error-Message", msg)
	http.Error(w, msg, status)
}

func (h *hubServer) serveHub(w http.ResponseWriter, r *http.Request) {
	h.hubReqs.Add(1)
	h.mu.Lock()
	h.paths = append(h.paths, r.URL.EscapedPath())
	h.mu.Unlock()
	if r.Header.Get("Authorization") != "Bearer "+token {
		h.hubNoTok.Add(1)
	}
	if strings.HasPrefix(r.URL.Path, "/api/") {
		h.serveAPI(w, r) // hubinfo_test.go
		return
	}
	segs := strings.SplitN(strings.TrimPrefix(r.URL.EscapedPath(), "/"), "/", 5)
	if len(segs) < 5 || segs[2] != "resolve" {
		http.NotFound(w, r)
		return
	}
	repo := segs[0] + "/" + segs[1]
	switch repo {
	case "org/model":
	case "org/private":
		if r.Header.Get("Authorization") != "Bearer "+token {
			hubError(w, 401, "RepoNotFound", "Repository Not Found for url: "+r.URL.String())
			return
		}
	case "org/gated":
		hubError(w, 403, "GatedRepo", "Access to model org/gated is restricted.")
		return
	default:
		hubError(w, 401, "RepoNotFound", "Repository Not Found")
		return
	}
	rev := strings.ReplaceAll(segs[3], "%2F", "/")
	h.mu.Lock()
	commit, ok := h.branches[rev]
	if !ok {
		commit = rev
	}
	files, ok := h.files[commit]
	var data []byte
	var found bool
	if ok {
		data, found = files[segs[4]]
	}
	h.mu.Unlock()
	if !ok {
		hubError(w, 404, "RevisionNotFound", "Invalid rev id: "+rev)
		return
	}
	w.Header().Set("X-Repo-Commit", commit)
	if !found {
		hubError(w, 404, "EntryNotFound", segs[4]+" does not exist on \""+rev+"\"")
		return
	}
	if len(data) > 1000 { // "LFS": redirect to the CDN, content addressed
		w.Header().Set("Location", "http://"+h.cdnHost+"/blobs/"+commit+"/"+segs[4])
		w.WriteHeader(http.StatusFound)
		return
	}
	w.Header().Set("ETag", `"`+commit[:8]+segs[4]+`"`)
	http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(data))
}

func (h *hubServer) serveCDN(w http.ResponseWriter, r *http.Request) {
	h.cdnReqs.Add(1)
	if r.Header.Get("Authorization") != "" {
		h.cdnAuth.Add(1)
	}
	if r.Header.Get("Range") == "" {
		http.Error(w, "Range lost on redirect", 400)
		return
	}
	rest := strings.TrimPrefix(r.URL.Path, "/blobs/")
	commit, path, _ := strings.Cut(rest, "/")
	h.mu.Lock()
	data, ok := h.files[commit][path]
	h.mu.Unlock()
	if !ok {
		http.NotFound(w, r)
		return
	}
	if !h.cdnBare.Load() {
		w.Header().Set("ETag", `"cdn-`+commit[:8]+`"`)
	}
	http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(data))
}

func newTestHub(t *testing.T, h *hubServer, opts ...Option) *Hub {
	t.Helper()
	hub, err := NewHub(append([]Option{WithEndpoint(h.hub.URL), WithToken(token), WithOffline(false)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return hub
}

// TestHubPinsCommit: the first file resolves main to a commit; a later file
// is read at that commit although main moved meanwhile. The token reaches
// the Hub, never the CDN, and Range survives the redirect.
func TestHubPinsCommit(t *testing.T) {
	h := newHubServer(t)
	big := randomBytes(5000, 20)
	h.put(commitA, indexFile, []byte(`{"weight_map":{}}`))
	h.put(commitA, "model-00001-of-00001.safetensors", big)
	h.put(commitB, "model-00001-of-00001.safetensors", randomBytes(5000, 21))
	hub := newTestHub(t, h)
	ref, err := ParseHubURL("hf://org/private")
	if err != nil {
		t.Fatal(err)
	}
	repo, err := hub.Repo(ref)
	if err != nil {
		t.Fatal(err)
	}
	f, err := repo.Open(context.Background(), indexFile)
	if err != nil {
		t.Fatal(err)
	}
	if repo.Commit() != commitA || f.Size() != 17 {
		t.Fatalf("Open: commit=%s size=%d", repo.Commit(), f.Size())
	}
	h.setBranch("main", commitB)
	s, err := repo.Open(context.Background(), "model-00001-of-00001.safetensors")
	if err != nil {
		t.Fatal(err)
	}
	got := make([]byte, len(big))
	if _, err := s.ReadAt(got, 0); err != nil || !bytes.Equal(got, big) {
		t.Fatalf("shard: %v (bytes of the moved branch?)", err)
	}
	if h.cdnAuth.Load() != 0 || h.hubNoTok.Load() != 0 {
		t.Errorf("Authorization: %d CDN requests had it, %d Hub requests lacked it", h.cdnAuth.Load(), h.hubNoTok.Load())
	}
	// index (1) + shard: resolve 302 (1) + CDN (1); the shard's later reads
	// go straight to the CDN.
	if hr, cr := h.hubReqs.Load(), h.cdnReqs.Load(); hr != 2 || cr != 1 {
		t.Errorf("hub requests %d, cdn requests %d", hr, cr)
	}
	if !strings.Contains(h.paths[1], "/resolve/"+commitA+"/") {
		t.Errorf("second file not read at the pinned commit: %s", h.paths[1])
	}
	t.Logf("hub %+v; paths %v", hub.Stats(), h.paths)
}

// TestHubErrors: each Hub error is a *StatusError with its code, and a
// clear message.
func TestHubErrors(t *testing.T) {
	h := newHubServer(t)
	h.put(commitA, singleFile, []byte("x"))
	for _, c := range []struct {
		url, code string
		status    int
		noToken   bool
	}{
		{"hf://org/missing", "RepoNotFound", 401, false},
		{"hf://org/private", "RepoNotFound", 401, true},
		{"hf://org/gated", "GatedRepo", 403, false},
		{"hf://org/model@nope", "RevisionNotFound", 404, false},
		{"hf://org/model/sub/model.safetensors", "EntryNotFound", 404, false},
	} {
		t.Run(c.url, func(t *testing.T) {
			var opts []Option
			if c.noToken {
				opts = append(opts, WithToken(""))
			}
			hub := newTestHub(t, h, opts...)
			ref, err := ParseHubURL(c.url)
			if err != nil {
				t.Fatal(err)
			}
			repo, _ := hub.Repo(ref)
			if ref.Path != "" {
				_, err = repo.Open(context.Background(), ref.Path)
			} else {
				_, err = repo.Files(context.Background())
			}
			var se *StatusError
			if !errors.As(err, &se) || se.Code != c.code || se.StatusCode != c.status {
				t.Fatalf("got %v", err)
			}
			if !strings.Contains(err.Error(), "org/") {
				t.Errorf("error does not name the repo: %v", err)
			}
			t.Log(err)
		})
	}
}

func TestHubOffline(t *testing.T) {
	h := newHubServer(t)
	t.Setenv("HF_HUB_OFFLINE", "1")
	hub, err := NewHub(WithEndpoint(h.hub.URL))
	if err != nil {
		t.Fatal(err)
	}
	repo, _ := hub.Repo(Ref{Repo: "org/model"})
	if _, err := repo.Open(context.Background(), singleFile); !errors.Is(err, ErrOffline) {
		t.Fatalf("got %v", err)
	}
	if h.hubReqs.Load() != 0 {
		t.Error("offline hub made a request")
	}
}

func TestHubTokenFromEnv(t *testing.T) {
	dir := t.TempDir()
	for _, k := range []string{"HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HF_TOKEN_PATH", "HF_ENDPOINT", "HF_HUB_OFFLINE"} {
		t.Setenv(k, "")
	}
	t.Setenv("HF_HOME", dir)
	t.Setenv("HF_ENDPOINT", "http://127.0.0.1:9/")
	check := func(want string) {
		t.Helper()
		hub, err := NewHub()
		if err != nil {
			t.Fatal(err)
		}
		if hub.conn.token != want || hub.Endpoint() != "http://127.0.0.1:9" {
			t.Errorf("token %q endpoint %s, want %q", hub.conn.token, hub.Endpoint(), want)
		}
	}
	check("")
	os.WriteFile(filepath.Join(dir, "token"), []byte("hf_file\n"), 0o600)
	check("hf_file")
	t.Setenv("HUGGING_FACE_HUB_TOKEN", "hf_old")
	check("hf_old")
	t.Setenv("HF_TOKEN", "hf_new")
	check("hf_new")
	t.Setenv("HF_ENDPOINT", "ftp://x")
	if _, err := NewHub(); err == nil {
		t.Error("bad HF_ENDPOINT accepted")
	}
}

// TestGoRedirectDefaults documents what http.Client does on its own, which
// is why this package follows redirects itself: Range is kept and
// Authorization dropped for another host, but another port of the same
// host keeps Authorization.
func TestGoRedirectDefaults(t *testing.T) {
	var gotAuth, gotRange atomic.Value
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotAuth.Store(r.Header.Get("Authorization"))
		gotRange.Store(r.Header.Get("Range"))
	}))
	defer target.Close()
	_, port, _ := net.SplitHostPort(target.Listener.Addr().String())
	for _, c := range []struct {
		host     string
		wantAuth bool
	}{{"127.0.0.1:" + port, true}, {"localhost:" + port, false}} {
		redir := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, "http://"+c.host+"/x", http.StatusFound)
		}))
		req, _ := http.NewRequest("GET", redir.URL, nil)
		req.Header.Set("Authorization", "Bearer t")
		req.Header.Set("Range", "bytes=0-1")
		resp, err := http.DefaultClient.Do(req)
		redir.Close()
		if err != nil {
			t.Skipf("redirect to %s: %v", c.host, err)
		}
		resp.Body.Close()
		if (gotAuth.Load() != "") != c.wantAuth || gotRange.Load() != "bytes=0-1" {
			t.Errorf("to %s: Authorization %q, Range %q", c.host, gotAuth.Load(), gotRange.Load())
		}
	}
}

// TestRedirectSamePortRule: this package sends the token only to the exact
// endpoint host:port, so a redirect to another port of 127.0.0.1 does not
// get it (Go's client would send it).
func TestRedirectSamePortRule(t *testing.T) {
	data := randomBytes(3000, 22)
	var auth atomic.Int64
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "" {
			auth.Add(1)
		}
		w.Header().Set("ETag", `"x"`)
		http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(data))
	}))
	defer target.Close()
	redir := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, target.URL+"/x", http.StatusFound)
	}))
	defer redir.Close()
	f, err := Open(context.Background(), redir.URL+"/x", WithToken("secret"), WithPrefetch(100))
	if err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 2000)
	if _, err := f.ReadAt(got, 500); err != nil || !bytes.Equal(got, data[500:2500]) {
		t.Fatal(err)
	}
	if auth.Load() != 0 {
		t.Error("token sent to another port")
	}
}
