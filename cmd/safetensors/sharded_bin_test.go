package main

import (
	"encoding/json"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// serveHubDir serves dir as the Hub repository org/model on loopback: the
// model-info API lists its files, /resolve/ serves them with the commit.
func serveHubDir(t *testing.T, dir string) *httptest.Server {
	t.Helper()
	const commit = "0123456789abcdef0123456789abcdef01234567"
	files := withETag(dir)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/api/models/org/model/revision/") {
			var sibs []map[string]string
			filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
				if err == nil && !d.IsDir() {
					rel, _ := filepath.Rel(dir, p)
					sibs = append(sibs, map[string]string{"rfilename": filepath.ToSlash(rel)})
				}
				return nil
			})
			json.NewEncoder(w).Encode(map[string]any{"sha": commit, "siblings": sibs})
			return
		}
		rest, ok := strings.CutPrefix(r.URL.Path, "/org/model/resolve/")
		_, file, _ := strings.Cut(rest, "/")
		if _, err := os.Stat(filepath.Join(dir, file)); !ok || err != nil {
			w.Header().Set("X-Error-Code", "EntryNotFound")
			http.Error(w, "no such file", http.StatusNotFound)
			return
		}
		w.Header().Set("X-Repo-Commit", commit)
		r.URL.Path = "/" + file
		files.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// The most common layout of older Hub models, a sharded PyTorch checkpoint
// (pytorch_model-0000N-of-0000M.bin and pytorch_model.bin.index.json, as
// transformers writes it), works with every command that reads a model,
// from its directory, its index and hf://, read as converting it would
// write it; so does a repository with only pytorch_model.bin.
func TestShardedCheckpointEverywhere(t *testing.T) {
	dir := t.TempDir()
	ents, _ := os.ReadDir(torchDir + "sharded_bin")
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), "pytorch_model") {
			copyTestFile(t, torchDir+"sharded_bin/"+e.Name(), filepath.Join(dir, e.Name()))
		}
	}
	srv := serveHubDir(t, dir)
	t.Setenv("HF_ENDPOINT", srv.URL)
	t.Setenv("HF_TOKEN", "")
	t.Setenv("HF_HOME", t.TempDir())
	const name = "transformer.h.10.attn.c_attn.weight"
	for _, loc := range []string{dir, filepath.Join(dir, "pytorch_model.bin.index.json"), "hf://org/model", srv.URL + "/org/model/resolve/main/pytorch_model.bin.index.json"} {
		for _, c := range []struct {
			args []string
			want string
		}{
			{[]string{"inspect", loc}, "5 shards"},
			{[]string{"inspect", "--tree", loc}, "[0-11] x12"},
			{[]string{"get", loc, name, "--slice", "0, :3"}, "["},
			{[]string{"stats", loc, name}, name},
			{[]string{"estimate", loc}, "26 tensors"},
			{[]string{"diff", loc, dir}, "26 identical"},
			{[]string{"scan", loc}, "clean (zip)"},
		} {
			code, out, errOut := runCLI(t, c.args...)
			if code != 0 || !strings.Contains(out, c.want) {
				t.Errorf("%s: exit %d, want %q in:\n%s%s", strings.Join(c.args, " "), code, c.want, out, errOut)
			}
		}
	}
	for _, loc := range []string{filepath.Join(dir, "pytorch_model.bin.index.json"), "hf://org/model/pytorch_model.bin.index.json"} {
		if code, out, errOut := runCLI(t, "validate", loc); code != 0 || !strings.Contains(out, "26 tensors") {
			t.Errorf("validate %s: exit %d\n%s%s", loc, code, out, errOut)
		}
	}

	// a repository with only pytorch_model.bin
	one := t.TempDir()
	copyTestFile(t, torchDir+"tiny_transformer.bin", filepath.Join(one, "pytorch_model.bin"))
	srv1 := serveHubDir(t, one)
	t.Setenv("HF_ENDPOINT", srv1.URL)
	for _, loc := range []string{one, "hf://org/model"} {
		if code, out, errOut := runCLI(t, "inspect", loc); code != 0 || !strings.Contains(out, "PyTorch checkpoint (zip)") {
			t.Errorf("inspect %s: exit %d\n%s%s", loc, code, out, errOut)
		}
	}
}
