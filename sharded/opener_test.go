package sharded

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/gosafetensors/safetensors"
)

// TestOpenByContentNotName: Open decides index or safetensors file by
// content alone, whatever the name says: an index named *.safetensors is
// an index, and a safetensors file named *.json (its metadata mentioning
// "weight_map", to make it look as much like an index as a file can) is a
// safetensors file.
func TestOpenByContentNotName(t *testing.T) {
	ctx := context.Background()
	dir := twoShardDir(t)
	b, err := os.ReadFile(filepath.Join(dir, IndexName))
	if err != nil {
		t.Fatal(err)
	}
	odd := filepath.Join(dir, "model.safetensors")
	if err := os.WriteFile(odd, b, 0o644); err != nil {
		t.Fatal(err)
	}
	m, err := Open(ctx, odd)
	if err != nil {
		t.Fatalf("an index named model.safetensors: %v", err)
	}
	if m.Index() == nil || len(m.Shards()) != 2 {
		t.Errorf("an index named model.safetensors read as %d shards, index %v", len(m.Shards()), m.Index())
	}
	m.Close()

	asJSON := filepath.Join(t.TempDir(), "model.safetensors.index.json")
	meta := map[string]string{"weight_map": `{"a.weight": "model.safetensors"}`}
	if err := safetensors.WriteFile(asJSON, tensorsOf([]string{"a.weight"}, []int{8}), meta); err != nil {
		t.Fatal(err)
	}
	m, err = Open(ctx, asJSON)
	if err != nil {
		t.Fatalf("a safetensors file named .index.json: %v", err)
	}
	if m.Index() != nil || len(m.Names()) != 1 || m.Names()[0] != "a.weight" {
		t.Errorf("a safetensors file named .index.json read as index %v, tensors %v", m.Index(), m.Names())
	}
	m.Close()
}
