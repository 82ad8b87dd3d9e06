package source

import (
	"encoding/json"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

const hubCommit = "0123456789abcdef0123456789abcdef01234567"

// hubStub is a loopback server shaped like the Hub for one repository,
// org/model, whose files are those of a local directory:
// /org/model/resolve/REV/FILE answers with X-Repo-Commit (and the Hub's
// X-Error-Code on errors), /api/models/org/model/revision/REV lists the
// files as the Hub's model-info API does (sha, siblings).
type hubStub struct {
	*httptest.Server
	mu   sync.Mutex
	revs map[string]int // requests by revision
	api  int            // requests of the API
}

func serveHub(t testing.TB, dir string) *hubStub {
	h := &hubStub{revs: map[string]int{}}
	files := withETag(dir)
	h.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if rest, ok := strings.CutPrefix(r.URL.Path, "/api/models/org/model/revision/"); ok {
			h.count(rest, true)
			if rest != "main" && rest != hubCommit {
				w.Header().Set("X-Error-Code", "RevisionNotFound")
				http.Error(w, "no such revision", http.StatusNotFound)
				return
			}
			type sibling struct {
				Name string `json:"rfilename"`
			}
			var sibs []sibling
			filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
				if err == nil && !d.IsDir() {
					rel, _ := filepath.Rel(dir, p)
					sibs = append(sibs, sibling{filepath.ToSlash(rel)})
				}
				return nil
			})
			json.NewEncoder(w).Encode(map[string]any{"id": "org/model", "sha": hubCommit, "siblings": sibs})
			return
		}
		rest, ok := strings.CutPrefix(r.URL.Path, "/org/model/resolve/")
		rev, file, _ := strings.Cut(rest, "/")
		if !ok || (rev != "main" && rev != hubCommit) {
			w.Header().Set("X-Error-Code", "RepoNotFound")
			http.Error(w, "not found", http.StatusNotFound)
			return
		}
		h.count(rev, false)
		if _, err := os.Stat(filepath.Join(dir, file)); err != nil {
			w.Header().Set("X-Error-Code", "EntryNotFound")
			http.Error(w, "no such file", http.StatusNotFound)
			return
		}
		w.Header().Set("X-Repo-Commit", hubCommit)
		r.URL.Path = "/" + file
		files.ServeHTTP(w, r)
	}))
	t.Cleanup(h.Close)
	return h
}

func (h *hubStub) count(rev string, api bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.revs[rev]++
	if api {
		h.api++
	}
}
