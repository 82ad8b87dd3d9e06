package download

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gosafetensors/safetensors/internal/pacedserver"
)

// unsafeNames are names a server may list that no download writes: into
// a .git folder (git status would run the server's core.fsmonitor), into
// huggingface_hub's metadata, out of the folder.
var unsafeNames = []string{
	".git/config",
	".GIT/hooks/pre-commit",
	"git~1/config",
	"sub/.git/config",
	".cache/huggingface/download/model.safetensors.metadata",
	".cache/safetensors/download/x.partial",
	"../../escaped.json",
}

const gitConfig = "[core]\n\tbare = false\n"

// gitDir makes dir look like a git working tree and returns its config.
func gitDir(t *testing.T, dir string) string {
	t.Helper()
	cfg := filepath.Join(dir, ".git", "config")
	if err := os.MkdirAll(filepath.Dir(cfg), 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cfg, []byte(gitConfig), 0o666); err != nil {
		t.Fatal(err)
	}
	return cfg
}

// checkRefused checks that err refuses name, and that dir holds only what
// it held before (the git config, unchanged).
func checkRefused(t *testing.T, err error, name, dir, cfg string) {
	t.Helper()
	if !errors.Is(err, ErrUnsafeName) || !strings.Contains(err.Error(), `"`+name+`"`) {
		t.Fatalf("%s: err = %v, want ErrUnsafeName naming it", name, err)
	}
	if strings.Contains(err.Error(), "\n") {
		t.Fatalf("%s: a message of several lines: %q", name, err)
	}
	if b, _ := os.ReadFile(cfg); string(b) != gitConfig {
		t.Fatalf("%s: the git config was changed: %q", name, b)
	}
	if got := ls(t, dir); len(got) != 1 {
		t.Fatalf("%s: the download wrote %q", name, got)
	}
}

// TestUnsafeHubNames: a Hub listing that names an unsafe file fails the
// download (into a local directory and into the cache) before a byte is
// written, naming it; excluding it downloads the rest.
func TestUnsafeHubNames(t *testing.T) {
	for _, name := range unsafeNames {
		files := map[string]pacedserver.File{
			"/model.safetensors": {Content: strings.NewReader(strings.Repeat("m", 1000)), Size: 1000},
			"/" + name:           {Content: strings.NewReader("[core]\n\tfsmonitor = \"touch pwned\"\n"), Size: 33},
		}
		h := startHub(t, files, pacedserver.Config{})
		dir := t.TempDir()
		cfg := gitDir(t, dir)
		_, err := Download(context.Background(), "hf://"+testRepo, WithHub(h.hub(t, 2)), WithLocalDir(dir))
		checkRefused(t, err, name, dir, cfg)
		cache := t.TempDir()
		_, err = Download(context.Background(), "hf://"+testRepo, WithHub(h.hub(t, 2)), WithCacheDir(cache))
		if !errors.Is(err, ErrUnsafeName) {
			t.Fatalf("%s into the cache: %v", name, err)
		}
		if got := ls(t, cache); len(got) != 0 {
			t.Fatalf("%s into the cache wrote %q", name, got)
		}
		if h.dataRead() != 0 {
			t.Fatalf("%s: %d bytes read before refusing", name, h.dataRead())
		}
		res, err := Download(context.Background(), "hf://"+testRepo, WithHub(h.hub(t, 2)), WithLocalDir(dir), WithInclude("*.safetensors"))
		if err != nil || len(res.Files) != 1 {
			t.Fatalf("%s excluded: %v %+v", name, err, res)
		}
		if b, _ := os.ReadFile(cfg); string(b) != gitConfig {
			t.Fatalf("%s excluded: the git config was changed", name)
		}
	}
}

// TestUnsafeBucketNames: the same rule for a bucket prefix.
func TestUnsafeBucketNames(t *testing.T) {
	for _, name := range unsafeNames {
		if strings.HasPrefix(name, "..") || strings.Contains(name, "~") {
			continue // a file:// store cannot hold it
		}
		src := t.TempDir()
		for rel, data := range map[string]string{"model.safetensors": "m", name: "[core]\n"} {
			p := filepath.Join(src, filepath.FromSlash(rel))
			os.MkdirAll(filepath.Dir(p), 0o777)
			os.WriteFile(p, []byte(data), 0o666)
		}
		dir := t.TempDir()
		cfg := gitDir(t, dir)
		_, err := Download(context.Background(), "file://"+src+"/", WithLocalDir(dir))
		checkRefused(t, err, name, dir, cfg)
		if _, err := Download(context.Background(), "file://"+src+"/", WithLocalDir(dir), WithInclude("*.safetensors")); err != nil {
			t.Fatalf("%s excluded: %v", name, err)
		}
	}
}

// TestNameCollisions: names that one download cannot write side by side
// (a file and a folder of one name; names equal but for case) fail it,
// naming both.
func TestNameCollisions(t *testing.T) {
	for _, pair := range [][2]string{{"a", "a/b.json"}, {"Model.safetensors", "model.safetensors"}} {
		files := map[string]pacedserver.File{}
		for _, n := range pair {
			files["/"+n] = pacedserver.File{Content: strings.NewReader("x"), Size: 1}
		}
		h := startHub(t, files, pacedserver.Config{})
		_, err := Download(context.Background(), "hf://"+testRepo, WithHub(h.hub(t, 2)), WithLocalDir(t.TempDir()))
		if !errors.Is(err, ErrUnsafeName) || !strings.Contains(err.Error(), pair[0]) || !strings.Contains(err.Error(), pair[1]) {
			t.Fatalf("%q: %v", pair, err)
		}
	}
}

// TestUnsafeHTTPShardNames: the shards an HTTP directory's index names
// are names the server chose: the same rule.
func TestUnsafeHTTPShardNames(t *testing.T) {
	for _, shard := range []string{".git", "GIT~1", ".cache"} {
		idx := `{"weight_map": {"a": "` + shard + `"}}`
		s, err := pacedserver.Start(pacedserver.Config{}, map[string]pacedserver.File{
			"/m/model.safetensors.index.json": {Content: strings.NewReader(idx), Size: int64(len(idx)), ETag: `"i"`},
			"/m/" + shard:                     {Content: strings.NewReader("gitdir: /elsewhere\n"), Size: 19, ETag: `"g"`},
		})
		if err != nil {
			t.Fatal(err)
		}
		dir := t.TempDir()
		cfg := gitDir(t, dir)
		_, err = Download(context.Background(), s.URL+"/m/", WithLocalDir(dir))
		s.Close()
		checkRefused(t, err, shard, dir, cfg)
	}
}
