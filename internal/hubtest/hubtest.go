// Package hubtest serves a local directory as a Hugging Face Hub
// repository on loopback, for tests: the one Hub-shaped server the
// module's tests share.
package hubtest

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// Commit is the commit every revision of a served repository resolves to.
const Commit = "0123456789abcdef0123456789abcdef01234567"

// Repo is the repository a Server serves.
const Repo = "org/model"

// Server answers as the Hub does for the repository org/model whose files
// are those of a directory:
//
//   - /api/models/org/model/revision/REV, the model-info API: the commit
//     ("sha") and every file ("siblings");
//   - /org/model/resolve/REV/FILE: the file, with X-Repo-Commit, a strong
//     ETag and ranges (http.FileServer), or 404 with the Hub's X-Error-Code
//     (RepoNotFound, EntryNotFound).
//
// REV is main or Commit. Requests are counted by revision.
type Server struct {
	*httptest.Server
	mu   sync.Mutex
	revs map[string]int
	api  int
}

// Serve serves dir until the test ends.
func Serve(t testing.TB, dir string) *Server {
	t.Helper()
	s := &Server{revs: map[string]int{}}
	files := http.FileServer(http.Dir(dir))
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if rev, ok := strings.CutPrefix(r.URL.Path, "/api/models/"+Repo+"/revision/"); ok {
			s.count(rev, true)
			if rev != "main" && rev != Commit {
				hubError(w, "RevisionNotFound")
				return
			}
			json.NewEncoder(w).Encode(map[string]any{"id": Repo, "sha": Commit, "siblings": siblings(dir)})
			return
		}
		rest, ok := strings.CutPrefix(r.URL.Path, "/"+Repo+"/resolve/")
		rev, file, _ := strings.Cut(rest, "/")
		if !ok || (rev != "main" && rev != Commit) {
			hubError(w, "RepoNotFound")
			return
		}
		s.count(rev, false)
		st, err := os.Stat(filepath.Join(dir, filepath.FromSlash(file)))
		if err != nil || st.IsDir() {
			hubError(w, "EntryNotFound")
			return
		}
		w.Header().Set("X-Repo-Commit", Commit)
		w.Header().Set("ETag", fmt.Sprintf(`"%x-%x"`, st.ModTime().UnixNano(), st.Size()))
		r.URL.Path = "/" + file
		files.ServeHTTP(w, r)
	}))
	t.Cleanup(s.Close)
	return s
}

func hubError(w http.ResponseWriter, code string) {
	w.Header().Set("X-Error-Code", code)
	http.Error(w, code, http.StatusNotFound)
}

func siblings(dir string) []map[string]string {
	var out []map[string]string
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			rel, _ := filepath.Rel(dir, p)
			out = append(out, map[string]string{"rfilename": filepath.ToSlash(rel)})
		}
		return nil
	})
	return out
}

func (s *Server) count(rev string, api bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.revs[rev]++
	if api {
		s.api++
	}
}

// Requests returns how many requests named each revision (the API's
// included).
func (s *Server) Requests() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]int, len(s.revs))
	for k, v := range s.revs {
		out[k] = v
	}
	return out
}

// APIRequests returns how many times the file list was asked for.
func (s *Server) APIRequests() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.api
}
