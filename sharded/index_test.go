package sharded

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gosafetensors/safetensors"
)

// testdata/python_index.json was written by Python's
// json.dumps(index, indent=2, sort_keys=True) + "\n", as transformers
// writes indexes, with names that need escaping and code-point ordering.
func TestMarshalMatchesPython(t *testing.T) {
	want, err := os.ReadFile("testdata/python_index.json")
	if err != nil {
		t.Fatal(err)
	}
	idx, err := ParseIndex(want, "python_index.json")
	if err != nil {
		t.Fatal(err)
	}
	if idx.TotalSize != 1234 || idx.TotalParameters != 300 || len(idx.WeightMap) != 7 {
		t.Fatalf("parsed %+v", idx)
	}
	if idx.WeightMap["emoji.\U0001F600"] != "model-00002-of-00002.safetensors" {
		t.Errorf("weight map: %q", idx.WeightMap)
	}
	got, err := idx.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("Marshal differs from Python's output:\n%s\nwant:\n%s", got, want)
	}
}

func TestIndexAddAndWrite(t *testing.T) {
	idx := NewIndex()
	add := func(shard, name string, dt safetensors.DType, shape ...int64) error {
		return idx.Add(shard, safetensors.TensorInfo{Name: name, DType: dt, Shape: shape})
	}
	if err := add("model-00001-of-00002.safetensors", "b", safetensors.F32, 2, 3); err != nil {
		t.Fatal(err)
	}
	if err := add("model-00002-of-00002.safetensors", "a", safetensors.BF16, 4); err != nil {
		t.Fatal(err)
	}
	if err := add("model-00002-of-00002.safetensors", "a", safetensors.BF16, 4); err == nil {
		t.Error("a tensor added twice was accepted")
	}
	if err := add("../evil.safetensors", "c", safetensors.U8, 1); !errors.Is(err, ErrUnsafeName) {
		t.Errorf("unsafe shard name: %v", err)
	}
	if idx.TotalSize != 24+8 || idx.TotalParameters != 6+4 {
		t.Errorf("totals %d bytes %d params", idx.TotalSize, idx.TotalParameters)
	}
	path := filepath.Join(t.TempDir(), IndexName)
	if err := idx.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(path)
	const want = `{
  "metadata": {
    "total_parameters": 10,
    "total_size": 32
  },
  "weight_map": {
    "a": "model-00002-of-00002.safetensors",
    "b": "model-00001-of-00002.safetensors"
  }
}
`
	if string(b) != want {
		t.Errorf("got\n%s", b)
	}
	back, err := ReadIndex(path)
	if err != nil || back.TotalSize != 32 || len(back.WeightMap) != 2 {
		t.Errorf("read back: %+v, %v", back, err)
	}
}

func TestParseIndexRefuses(t *testing.T) {
	const shard = `"model-00001-of-00001.safetensors"`
	cases := []struct{ name, json, want string }{
		{"not json", `nope`, "not a JSON object"},
		{"array", `[]`, "not a JSON object"},
		{"no weight_map", `{"metadata": {}}`, "no weight_map"},
		{"weight_map not object", `{"weight_map": []}`, "no weight_map"},
		{"empty weight_map", `{"weight_map": {}}`, "weight_map is empty"},
		{"duplicate tensor", `{"weight_map": {"a": ` + shard + `, "a": "other.safetensors"}}`, "duplicate"},
		{"duplicate top-level", `{"weight_map": {"a": ` + shard + `}, "weight_map": {"a": ` + shard + `}}`, "duplicate"},
		{"duplicate metadata key", `{"metadata": {"total_size": 1, "total_size": 2}, "weight_map": {"a": ` + shard + `}}`, "duplicate"},
		{"number as file", `{"weight_map": {"a": 1}}`, "weight_map must map"},
		{"negative total", `{"metadata": {"total_size": -1}, "weight_map": {"a": ` + shard + `}}`, "not a non-negative integer"},
		{"fractional total", `{"metadata": {"total_size": 1.5}, "weight_map": {"a": ` + shard + `}}`, "not a non-negative integer"},
		{"string total", `{"metadata": {"total_size": "1"}, "weight_map": {"a": ` + shard + `}}`, "not a non-negative integer"},
		{"metadata not object", `{"metadata": 3, "weight_map": {"a": ` + shard + `}}`, "metadata is not an object"},
		{"trailing data", `{"weight_map": {"a": ` + shard + `}} {}`, "not a JSON object"},
		{"invalid utf-8", "{\"weight_map\": {\"a\xff\": " + shard + "}}", "not a JSON object"},
		{"reserved name", `{"weight_map": {"__metadata__": ` + shard + `}}`, "reserved"},
		{"dotdot", `{"weight_map": {"a": "../x.safetensors"}}`, "path separator"},
		{"absolute", `{"weight_map": {"a": "/etc/passwd"}}`, "path separator"},
		{"url", `{"weight_map": {"a": "https://evil.example/x"}}`, "URL"},
		{"parent", `{"weight_map": {"a": ".."}}`, "directory"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := ParseIndex([]byte(c.json), "m/"+IndexName)
			var ie *IndexError
			if !errors.As(err, &ie) {
				t.Fatalf("got %v, want an *IndexError", err)
			}
			if !strings.Contains(err.Error(), c.want) || !strings.HasPrefix(err.Error(), "m/"+IndexName+": ") {
				t.Errorf("error %q does not name the index and say %q", err, c.want)
			}
		})
	}
}

func TestParseIndexKeepsUnknownMembers(t *testing.T) {
	in := `{"metadata": {"total_size": 3.0e2, "format": "pt"}, "weight_map": {"a": "s.safetensors"}, "other": [1]}`
	idx, err := ParseIndex([]byte(in), "x")
	if err != nil {
		t.Fatal(err)
	}
	if idx.TotalSize != 300 || idx.TotalParameters != -1 {
		t.Errorf("totals %d %d", idx.TotalSize, idx.TotalParameters)
	}
	b, err := idx.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"format": "pt"`, `"other": [`, `"total_size": 300`} {
		if !bytes.Contains(b, []byte(want)) {
			t.Errorf("%s lacks %s", b, want)
		}
	}
	if bytes.Contains(b, []byte("total_parameters")) {
		t.Errorf("an absent total_parameters was written: %s", b)
	}
}

func TestParseIndexSizeLimit(t *testing.T) {
	b := make([]byte, DefaultMaxIndexSize+1)
	if _, err := ParseIndex(b, "big"); !errors.Is(err, ErrInvalidIndex) {
		t.Errorf("got %v", err)
	}
}

func TestCheckShardName(t *testing.T) {
	for _, ok := range []string{"model-00001-of-00002.safetensors", "weights.safetensors", "a b.safetensors", "modèle.safetensors", "..x"} {
		if err := CheckShardName(ok); err != nil {
			t.Errorf("%q refused: %v", ok, err)
		}
	}
	for _, bad := range []string{"", ".", "..", "../x", "a/b", `a\b`, "/etc/passwd", `C:\x`, "c:x", "s3://b/k", "http://h/x", "a\x00b", "a\nb", "a\x7f", "\xff"} {
		if err := CheckShardName(bad); !errors.Is(err, ErrUnsafeName) {
			t.Errorf("%q accepted (%v)", bad, err)
		}
	}
}

func TestParseSize(t *testing.T) {
	for in, want := range map[string]int64{
		"5GB": 5_000_000_000, "500MB": 500_000_000, "2GiB": 2 << 30, "1KB": 1000, "1KiB": 1024,
		"3MiB": 3 << 20, "1TB": 1e12, "1TiB": 1 << 40, "1048576": 1 << 20, "5gb": 5e9, " 10 MB ": 10e6,
		"1.5GB": 1_500_000_000, "7": 7,
	} {
		got, err := ParseSize(in)
		if err != nil || got != want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "0", "0GB", "-5GB", "5XB", "GB", "five", "99999999999TB", "1e3"} {
		if n, err := ParseSize(bad); !errors.Is(err, ErrOption) {
			t.Errorf("ParseSize(%q) = %d, %v; want an error", bad, n, err)
		}
	}
}
