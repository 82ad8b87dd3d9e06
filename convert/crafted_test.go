package convert

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gosafetensors/safetensors"
	"github.com/gosafetensors/safetensors/torch"
)

// craftedEntry is the part of testdata/crafted/INDEX.json convert checks.
type craftedEntry struct {
	Name        string   `json:"name"`
	Class       string   `json:"class"`
	ScanVerdict string   `json:"scan_verdict"`
	Globals     []string `json:"globals"`
	Convert     string   `json:"convert"`
	ConvertErr  string   `json:"convert_error"`
}

// TestCraftedConvert converts every crafted attack file: the ones to
// refuse are refused with the expected kind of error naming a listed
// global, nothing is left in the output directory, and the ones to
// convert produce a valid file; either way the conversion agrees with
// torch.Scan's verdict.
func TestCraftedConvert(t *testing.T) {
	b, err := os.ReadFile("../testdata/crafted/INDEX.json")
	if err != nil {
		t.Fatal(err)
	}
	var idx []craftedEntry
	if err := json.Unmarshal(b, &idx); err != nil {
		t.Fatal(err)
	}
	if len(idx) < 30 {
		t.Fatalf("only %d crafted files", len(idx))
	}
	kinds := map[string]error{"not allowed": torch.ErrNotAllowed, "unsupported": torch.ErrUnsupported, "corrupt": torch.ErrCorrupt}
	for _, e := range idx {
		t.Run(e.Name, func(t *testing.T) {
			in := filepath.Join("../testdata/crafted", e.Name)
			dir := t.TempDir()
			out := filepath.Join(dir, "out.safetensors")
			_, err := File(context.Background(), in, out)
			rep, serr := torch.ScanFile(in)
			if serr != nil {
				t.Fatal(serr)
			}
			if (err == nil) != (rep.Verdict() == torch.VerdictClean) {
				t.Errorf("convert: %v, scan verdict %s", err, rep.Verdict())
			}
			switch e.Convert {
			case "convert":
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				f, err := safetensors.Open(out)
				if err != nil {
					t.Fatalf("output: %v", err)
				}
				f.Close()
			case "refuse":
				if err == nil {
					t.Fatal("converted")
				}
				if !errors.Is(err, kinds[e.ConvertErr]) {
					t.Errorf("got %v, want %s", err, e.ConvertErr)
				}
				named := len(e.Globals) == 0
				for _, g := range e.Globals {
					named = named || strings.Contains(err.Error(), g)
				}
				if !named {
					t.Errorf("error names none of %v: %v", e.Globals, err)
				}
				if ents, _ := os.ReadDir(dir); len(ents) != 0 {
					t.Errorf("refused conversion left %d files", len(ents))
				}
			default:
				t.Fatalf("bad INDEX.json convert %q", e.Convert)
			}
		})
	}
}
