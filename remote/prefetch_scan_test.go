package remote

import (
	"bytes"
	"context"
	"os"
	"testing"

	"github.com/gosafetensors/safetensors/torch"
)

// TestScanSmallPrefix scans a remote zip checkpoint opened with first
// requests of many sizes: the zip lister's prefetch of overlapping local
// headers once resliced a merged range past its capacity (a panic, which
// the scan reported as "invalid").
func TestScanSmallPrefix(t *testing.T) {
	data, err := os.ReadFile("../testdata/torch/tiny_transformer.bin")
	if err != nil {
		t.Fatal(err)
	}
	local, err := torch.Scan(bytes.NewReader(data), int64(len(data)), "local")
	if err != nil {
		t.Fatal(err)
	}
	s := newRangeServer(t, data)
	for n := int64(1); n <= 2100; n += 7 {
		f, err := Open(context.Background(), s.URL+"/tiny_transformer.bin", WithPrefetch(n))
		if err != nil {
			t.Fatalf("prefetch %d: %v", n, err)
		}
		rep, err := torch.Scan(f, f.Size(), "remote")
		if err != nil {
			t.Fatalf("prefetch %d: %v", n, err)
		}
		if rep.Verdict() != local.Verdict() || len(rep.Problems) != len(local.Problems) {
			t.Fatalf("prefetch %d: verdict %v (%v), local %v", n, rep.Verdict(), rep.Problems, local.Verdict())
		}
	}
}
