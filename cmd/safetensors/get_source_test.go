package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestGetFromCheckpoint extracts strided views straight from a PyTorch
// checkpoint and checks their bytes against the sidecar torch wrote.
func TestGetFromCheckpoint(t *testing.T) {
	raw, err := os.ReadFile(torchDir + "noncontiguous.pt.json")
	if err != nil {
		t.Fatal(err)
	}
	var sc struct {
		Tensors map[string]struct {
			SHA256 string  `json:"sha256"`
			Shape  []int64 `json:"shape"`
		} `json:"tensors"`
	}
	if err := json.Unmarshal(raw, &sc); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, name := range []string{"transposed", "stepped", "permuted4d"} {
		out := filepath.Join(dir, name+".npy")
		if code, _, errOut := runCLI(t, "get", torchDir+"noncontiguous.pt", name, "-o", out); code != 0 {
			t.Fatalf("%s: exit %d: %s", name, code, errOut)
		}
		h, data := readNpy(t, out)
		sum := sha256.Sum256(data)
		if got := hex.EncodeToString(sum[:]); got != sc.Tensors[name].SHA256 {
			t.Errorf("%s: sha256 %s, sidecar %s", name, got, sc.Tensors[name].SHA256)
		}
		if len(h.Shape) != len(sc.Tensors[name].Shape) {
			t.Errorf("%s: shape %v", name, h.Shape)
		}
	}
	code, _, errOut := runCLI(t, "get", torchDir+"noncontiguous.pt", "transposd")
	if code != 2 || !strings.Contains(errOut, "did you mean: transposed") {
		t.Errorf("missing name: exit %d, %q", code, errOut)
	}
	code, _, errOut = runCLI(t, "get", "../../testdata/malicious/torch_zip_os_system_p4.pt", "w")
	if code != 1 || !strings.Contains(errOut, "posix.system") {
		t.Errorf("malicious checkpoint: exit %d, %q", code, errOut)
	}
}
