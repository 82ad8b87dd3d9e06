package serve

import (
	"os"
	"regexp"
	"testing"
)

// patternCases are, for every pattern docs/serve.md and the serve
// command's help show, locations it allows and locations it does not.
var patternCases = []struct {
	pattern string
	allow   []string
	refuse  []string
}{
	{"hf://**",
		[]string{"hf://org/model", "hf://org/model/model.safetensors", "hf://datasets/org/data/x.bin", "hf://org/model@v1/a/b.bin", "hf://models/org/model"},
		[]string{"https://huggingface.co/org/model/resolve/main/x.bin", "s3://org/model"}},
	{"hf://*/**",
		[]string{"hf://org/model", "hf://org/model/x.bin", "hf://datasets/org/data"},
		[]string{"https://huggingface.co/org/model"}},
	{"hf://your-org/**",
		[]string{"hf://your-org/model", "hf://Your-Org/Model/x.bin", "hf://your-org/model@refs/pr/7/x.bin"},
		[]string{"hf://other/model", "hf://your-org-evil/model", "hf://datasets/your-org/data", "hf://other/your-org"}},
	{"hf://my-org/**",
		[]string{"hf://my-org/model"},
		[]string{"hf://other/model"}},
	{"hf://datasets/my-org/**",
		[]string{"hf://datasets/my-org/data/x.bin"},
		[]string{"hf://my-org/model", "hf://datasets/other/data"}},
	{"hf://my-org/model@main/**",
		[]string{"hf://my-org/model", "hf://my-org/model/x.bin", "hf://my-org/model@main/x.bin"},
		[]string{"hf://my-org/model@dev/x.bin", "hf://my-org/other"}},
	{"hf://my-org/model/*.safetensors",
		[]string{"hf://my-org/model/a.safetensors", "hf://my-org/model@v2/a.safetensors"},
		[]string{"hf://my-org/model/sub/a.safetensors", "hf://my-org/model/a.bin", "hf://my-org/model"}},
	{"https://huggingface.co/**",
		[]string{"https://huggingface.co/org/repo/resolve/main/x.bin", "https://huggingface.co/", "https://huggingface.co"},
		[]string{"https://huggingface.co.evil.example/x", "http://huggingface.co/x", "https://cdn.huggingface.co/x", "https://huggingface.co/x?y=1"}},
	{"s3://registry-uploads/incoming/**",
		[]string{"s3://registry-uploads/incoming/a/model.safetensors", "s3://registry-uploads/incoming/"},
		[]string{"s3://registry-uploads/other/x", "s3://registry-uploads/incoming/x?endpoint=http://127.0.0.1", "s3://registry-uploads-2/incoming/x"}},
	{"s3://uploads/incoming/**",
		[]string{"s3://uploads/incoming/x.bin"},
		[]string{"s3://uploads/x.bin"}},
	{"https://*.example.com/models/*",
		[]string{"https://cdn.example.com/models/a.bin"},
		[]string{"https://cdn.example.com/models/a/b.bin", "https://example.com/models/a.bin", "https://evil.com/x.example.com/models/a.bin"}},
	{"https://**",
		[]string{"https://example.com/", "https://a.b.example.com:8443/x/y/z.bin"},
		[]string{"http://example.com/x", "https://example.com/x?q=1"}},
	{"https://*.hf.co/**",
		[]string{"https://cdn-lfs.hf.co/repos/a/b", "https://cas-bridge.xethub.hf.co/xet-bridge-us/x"},
		[]string{"https://hf.co.evil.example/x", "https://evil.example/cdn-lfs.hf.co/x", "http://cdn-lfs.hf.co/x"}},
	{"https://*.huggingface.co/**",
		[]string{"https://cdn-lfs.huggingface.co/repos/a/b"},
		[]string{"https://huggingface.co.evil.example/x"}},
	{"s3://**",
		[]string{"s3://any-bucket/any/key"},
		[]string{"gs://any-bucket/key", "s3://b/k?endpoint=http://127.0.0.1"}},
	{"s3://b/in/**?*",
		[]string{"s3://b/in/x?endpoint=http://x", "s3://b/in/x"},
		[]string{"s3://b/out/x"}},
}

func TestPatternSemantics(t *testing.T) {
	for _, tc := range patternCases {
		p, err := parsePattern(tc.pattern)
		if err != nil {
			t.Errorf("%s: %v", tc.pattern, err)
			continue
		}
		lp := &locationPolicy{patterns: []*pattern{p}}
		for _, loc := range tc.allow {
			if err := lp.check(loc); err != nil {
				t.Errorf("%s should allow %s: %v", tc.pattern, loc, err)
			}
		}
		for _, loc := range tc.refuse {
			if err := lp.check(loc); err == nil {
				t.Errorf("%s should refuse %s", tc.pattern, loc)
			}
		}
	}
	for _, bad := range []string{"hf://org/model?x=1", "hf://org@rev/model", "https://user@host/**"} {
		if _, err := parsePattern(bad); err == nil {
			t.Errorf("pattern %q accepted", bad)
		}
	}
}

// Every pattern docs/serve.md shows is in patternCases.
func TestDocPatternsCovered(t *testing.T) {
	doc, err := os.ReadFile("../docs/serve.md")
	if err != nil {
		t.Fatal(err)
	}
	have := map[string]bool{}
	for _, tc := range patternCases {
		have[tc.pattern] = true
	}
	found := 0
	for _, m := range regexp.MustCompile("[`'\"]([a-z0-9]+://[^`'\" ]*\\*[^`'\" ]*)[`'\"]").FindAllSubmatch(doc, -1) {
		found++
		if !have[string(m[1])] {
			t.Errorf("docs/serve.md shows the pattern %s, which patternCases does not test", m[1])
		}
	}
	if found < 4 {
		t.Fatalf("found only %d patterns in docs/serve.md", found)
	}
}
