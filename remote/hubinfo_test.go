package remote

import (
	"context"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
)

// serveAPI answers /api/models/ORG/REPO/revision/REV as the Hub does: the
// commit the revision names ("sha") and every file ("siblings").
func (h *hubServer) serveAPI(w http.ResponseWriter, r *http.Request) {
	rest, ok := strings.CutPrefix(r.URL.EscapedPath(), "/api/models/")
	repo, rev, ok2 := strings.Cut(rest, "/revision/")
	if !ok || !ok2 {
		http.NotFound(w, r)
		return
	}
	switch repo {
	case "org/model":
	case "org/gated":
		hubError(w, 403, "GatedRepo", "Access to model org/gated is restricted.")
		return
	case "org/private":
		if r.Header.Get("Authorization") != "Bearer "+token {
			hubError(w, 401, "RepoNotFound", "Repository Not Found")
			return
		}
	default:
		hubError(w, 401, "RepoNotFound", "Repository Not Found")
		return
	}
	if r.Header.Get("Range") != "" {
		http.Error(w, "a Range on an API request", 400)
		return
	}
	rev = strings.ReplaceAll(rev, "%2F", "/")
	h.mu.Lock()
	commit, ok := h.branches[rev]
	if !ok {
		commit = rev
	}
	files, ok := h.files[commit]
	var sibs []map[string]any
	for name, data := range files {
		sib := map[string]any{"rfilename": name}
		if r.URL.Query().Get("blobs") == "true" {
			sib["size"], sib["blobId"] = len(data), gitBlobID(data)
			if len(data) > 1000 {
				sum := fmt.Sprintf("%x", sha256.Sum256(data))
				if h.badDigest.Load() {
					sum = sum[:60]
				}
				sib["lfs"] = map[string]any{"sha256": sum, "size": len(data), "pointerSize": 134}
				sib["blobId"] = gitBlobID([]byte("version https://git-lfs.github.com/spec/v1\noid sha256:" + sum + "\n"))
			}
		}
		sibs = append(sibs, sib)
	}
	h.mu.Unlock()
	if !ok {
		hubError(w, 404, "RevisionNotFound", "Invalid rev id: "+rev)
		return
	}
	json.NewEncoder(w).Encode(map[string]any{"id": repo, "sha": commit, "siblings": sibs, "private": repo == "org/private"})
}

// TestRepoFiles: one API request lists the repository at its revision and
// pins the commit the API names, so the files opened next are those of the
// listed commit although the branch moves meanwhile.
func TestRepoFiles(t *testing.T) {
	h := newHubServer(t)
	h.put(commitA, "pytorch_model.bin", []byte("a"))
	h.put(commitA, "sub/config.json", []byte("{}"))
	h.put(commitB, "pytorch_model.bin", []byte("bb"))
	hub := newTestHub(t, h)
	ref, _ := ParseHubURL("hf://org/private")
	repo, err := hub.Repo(ref)
	if err != nil {
		t.Fatal(err)
	}
	files, err := repo.Files(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"pytorch_model.bin", "sub/config.json"}; !slices.Equal(files, want) {
		t.Fatalf("Files = %q, want %q", files, want)
	}
	if repo.Commit() != commitA || h.hubReqs.Load() != 1 {
		t.Fatalf("commit %q after %d requests", repo.Commit(), h.hubReqs.Load())
	}
	h.setBranch("main", commitB)
	f, err := repo.Open(context.Background(), "pytorch_model.bin")
	if err != nil {
		t.Fatal(err)
	}
	if f.Size() != 1 {
		t.Fatalf("opened the file of the moved branch (%d bytes), not of the listed commit", f.Size())
	}
	f.Close()

	// A repository that is not there is the Hub's error, as for a file.
	ref, _ = ParseHubURL("hf://org/nope")
	repo, _ = hub.Repo(ref)
	var se *StatusError
	if _, err := repo.Files(context.Background()); !errors.As(err, &se) || se.Code != "RepoNotFound" {
		t.Fatalf("missing repository: %v", err)
	}
	// Offline, nothing is asked.
	off := newTestHub(t, h, WithOffline(true))
	repo, _ = off.Repo(ref)
	if _, err := repo.Files(context.Background()); !errors.Is(err, ErrOffline) {
		t.Fatalf("offline: %v", err)
	}
}

// An API answer larger than MaxInfoBytes, or one that names no commit, is
// refused rather than trusted.
func TestRepoFilesRefusesBadAnswers(t *testing.T) {
	for name, body := range map[string]string{
		"no sha":   `{"siblings":[{"rfilename":"model.safetensors"}]}`,
		"bad sha":  `{"sha":"main","siblings":[]}`,
		"not json": `<html>`,
	} {
		srv := newAPIStub(t, body)
		hub, err := NewHub(WithEndpoint(srv), WithToken(""), WithOffline(false))
		if err != nil {
			t.Fatal(err)
		}
		ref, _ := ParseHubURL("hf://org/model")
		repo, _ := hub.Repo(ref)
		if _, err := repo.Files(context.Background()); !errors.Is(err, ErrProtocol) {
			t.Errorf("%s: %v, want ErrProtocol", name, err)
		}
	}
}

func newAPIStub(t *testing.T, body string) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(body))
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// gitBlobID is git's object id of a blob holding data.
func gitBlobID(data []byte) string {
	h := sha1.New()
	fmt.Fprintf(h, "blob %d\x00", len(data))
	h.Write(data)
	return fmt.Sprintf("%x", h.Sum(nil))
}
