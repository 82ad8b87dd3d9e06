package sharded

import (
	"maps"
	"os"
	"testing"
)

// FuzzParseIndex: any input is parsed without panic, and an accepted
// index survives Marshal and a second parse unchanged.
//
//	go test ./sharded/ -run '^$' -fuzz FuzzParseIndex -fuzztime 60s
func FuzzParseIndex(f *testing.F) {
	if b, err := os.ReadFile("testdata/python_index.json"); err == nil {
		f.Add(b)
	}
	for _, s := range []string{
		`{"metadata": {"total_size": 12}, "weight_map": {"a": "model-00001-of-00001.safetensors"}}`,
		`{"weight_map": {"a": "x.safetensors", "b": "y.safetensors"}, "extra": [1, {"z": null}]}`,
		`{"weight_map": {"a": "../x"}}`,
		`{"weight_map": {"a": "s", "a": "t"}}`,
		`{"metadata": {"total_size": 1e3, "total_parameters": 7, "k": "\u00e9"}, "weight_map": {"\ud83d\ude00": "s"}}`,
		`{"metadata": null, "weight_map": {"": "s"}}`,
		`[]`, `{`, ``,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		idx, err := ParseIndex(b, "fuzz")
		if err != nil {
			return
		}
		out, err := idx.Marshal()
		if err != nil {
			t.Fatalf("accepted index does not marshal: %v", err)
		}
		back, err := ParseIndex(out, "fuzz")
		if err != nil {
			t.Fatalf("marshaled index does not parse: %v\n%s", err, out)
		}
		if !maps.Equal(back.WeightMap, idx.WeightMap) || back.TotalSize != idx.TotalSize || back.TotalParameters != idx.TotalParameters {
			t.Fatalf("round trip changed the index:\n%s", out)
		}
		again, err := back.Marshal()
		if err != nil || string(again) != string(out) {
			t.Fatalf("Marshal is not stable:\n%s\n%s", out, again)
		}
	})
}

// FuzzCheckShardName: an accepted name never leaves the directory.
func FuzzCheckShardName(f *testing.F) {
	for _, s := range []string{"model-00001-of-00002.safetensors", "..", "../x", "a/b", `a\b`, "c:x", "a\x00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		if CheckShardName(name) != nil {
			return
		}
		for _, r := range name {
			if r == '/' || r == '\\' || r == 0 || r == ':' {
				t.Fatalf("accepted %q", name)
			}
		}
		if name == "." || name == ".." || name == "" {
			t.Fatalf("accepted %q", name)
		}
	})
}
