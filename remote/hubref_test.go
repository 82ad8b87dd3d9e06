package remote

import (
	"errors"
	"testing"
)

func TestParseHubURL(t *testing.T) {
	for in, want := range map[string]Ref{
		"hf://org/repo":  {Type: "model", Repo: "org/repo", Revision: "main"},
		"hf://org/repo/": {Type: "model", Repo: "org/repo", Revision: "main"},
		"hf://org/repo@v1.0/sub/model.safetensors": {Type: "model", Repo: "org/repo", Revision: "v1.0", Path: "sub/model.safetensors"},
		"hf://org/repo@refs/pr/7/a.json":           {Type: "model", Repo: "org/repo", Revision: "refs/pr/7", Path: "a.json"},
		"hf://org/repo@feat%2Fx":                   {Type: "model", Repo: "org/repo", Revision: "feat/x"},
		"hf://datasets/org/data@" + commitA:        {Type: "dataset", Repo: "org/data", Revision: commitA},
		"hf://models/org/repo":                     {Type: "model", Repo: "org/repo", Revision: "main"},
		"https://huggingface.co/org/repo/resolve/main/model.safetensors?download=true": {
			Type: "model", Repo: "org/repo", Revision: "main", Path: "model.safetensors", Endpoint: "https://huggingface.co"},
		"https://mirror.example/hf/datasets/org/d/resolve/refs%2Fpr%2F1/x/y.safetensors": {
			Type: "dataset", Repo: "org/d", Revision: "refs/pr/1", Path: "x/y.safetensors", Endpoint: "https://mirror.example/hf"},
	} {
		got, err := ParseHubURL(in)
		if err != nil || got != want {
			t.Errorf("%s:\n got %+v, %v\nwant %+v", in, got, err, want)
		}
	}
	for _, in := range []string{
		"hf://", "hf://org", "hf://org/", "hf:///repo", "hf://org/re po", "hf://org/repo@", "hf://org/repo@a..b",
		"hf://org/repo/../x", "hf://org/repo/a//b", "hf://org/repo/x?y", "hf://-org/repo", "hf://org/repo./x",
		"hf://org/repo/a%2F..%2Fb", "https://huggingface.co/org/repo/blob/main/x", "https://huggingface.co/org/repo/resolve/main",
		"https://huggingface.co/org/repo/resolve/main/..%2F..%2Fetc", "https://u:p@huggingface.co/o/r/resolve/main/x",
	} {
		if _, err := ParseHubURL(in); err == nil {
			t.Errorf("%s: accepted", in)
		}
	}
}

func TestRefString(t *testing.T) {
	for _, s := range []string{"hf://org/repo", "hf://datasets/org/d@v2/a/b.json", "hf://org/repo@feat%2Fx/m.safetensors"} {
		r, err := ParseHubURL(s)
		if err != nil || r.String() != s {
			t.Errorf("%s -> %+v -> %s (%v)", s, r, r.String(), err)
		}
	}
}

func TestValidRepoPath(t *testing.T) {
	for _, p := range []string{"model.safetensors", "sub/model-00001-of-00002.safetensors", "a b/c.json", "é.bin"} {
		if err := ValidRepoPath(p); err != nil {
			t.Errorf("%q: %v", p, err)
		}
	}
	for _, p := range []string{"", "..", "../x", "a/../../x", "/etc/passwd", "a//b", "./a", "a/.", "a/",
		"https://evil/x", "s3://b/k", `a\b`, "C:x", "a%2F..", "a\x00b", "a\nb", string(make([]byte, 2000))} {
		if err := ValidRepoPath(p); !errors.Is(err, ErrInvalidPath) {
			t.Errorf("%q: %v", p, err)
		}
	}
}

func TestParseContentRange(t *testing.T) {
	for in, want := range map[string]contentRange{
		"bytes 0-0/1": {0, 0, 1}, "bytes 5-9/10": {5, 9, 10}, "bytes */0": {-1, -1, 0},
		"bytes 0-9223372036854775806/9223372036854775807": {0, 1<<63 - 2, 1<<63 - 1},
	} {
		if got, err := parseContentRange(in); err != nil || got != want {
			t.Errorf("%q: %+v %v", in, got, err)
		}
	}
	for _, in := range []string{"", "bytes 0-9/*", "bytes 5-4/10", "bytes 0-10/10", "bytes -1-2/10", "bytes +1-2/10",
		"items 0-1/2", "bytes 0-1/2 ", "bytes  0-1/2", "bytes 0-1/99999999999999999999", "bytes 1/2", "bytes 0 -1/2"} {
		if _, err := parseContentRange(in); err == nil {
			t.Errorf("%q accepted", in)
		}
	}
}

func FuzzParseHubURL(f *testing.F) {
	for _, s := range []string{"hf://org/repo@refs/pr/7/a.json", "hf://datasets/o/r/x", "https://h/o/r/resolve/m/f", "hf://o/r/../x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, err := ParseHubURL(s)
		if err != nil {
			return
		}
		if r.Path != "" && ValidRepoPath(r.Path) != nil {
			t.Fatalf("%q: accepted invalid path %q", s, r.Path)
		}
		if validRepoID(r.Repo) != nil || validRevision(r.Revision) != nil {
			t.Fatalf("%q: accepted %+v", s, r)
		}
		if r.Endpoint == "" {
			r2, err := ParseHubURL(r.String())
			if err != nil || r2 != r {
				t.Fatalf("%q -> %s -> %+v %v", s, r.String(), r2, err)
			}
		}
	})
}

func FuzzParseContentRange(f *testing.F) {
	for _, s := range []string{"bytes 0-9/10", "bytes */0", "bytes 1-0/2"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		c, err := parseContentRange(s)
		if err != nil {
			return
		}
		c2, err := parseContentRange(c.String())
		if c.size < 0 || (c.first >= 0 && (c.first > c.last || c.last >= c.size)) || err != nil || c2 != c {
			t.Fatalf("%q -> %+v", s, c)
		}
	})
}

func TestIsHubURL(t *testing.T) {
	for loc, want := range map[string]bool{
		"hf://org/repo": true,
		"https://hf-mirror.com/org/repo/resolve/main/model.safetensors": true,
		"https://example.com/model.safetensors":                         false,
		"s3://b/org/repo/resolve/main/x":                                false,
	} {
		if IsHubURL(loc) != want {
			t.Errorf("%s: %v", loc, !want)
		}
	}
}

func TestHandles(t *testing.T) {
	hub, err := NewHub(WithEndpoint("https://huggingface.co"), WithToken(""), WithOffline(false))
	if err != nil {
		t.Fatal(err)
	}
	for loc, want := range map[string]bool{
		"hf://org/repo": true,
		"https://huggingface.co/org/repo/resolve/main/model.safetensors": true,
		"https://hf-mirror.com/org/repo/resolve/main/model.safetensors":  false,
		"http://huggingface.co/org/repo/resolve/main/model.safetensors":  false,
		"https://huggingface.co/org/repo/blob/main/model.safetensors":    false,
		"s3://bucket/key": false,
	} {
		if got := hub.Handles(loc); got != want {
			t.Errorf("%s: %v", loc, got)
		}
	}
}
