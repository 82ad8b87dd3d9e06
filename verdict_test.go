package safetensors

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// verdictCase is one entry of testdata/safetensors/expected.json: the
// reference implementation's verdict and ours.
type verdictCase struct {
	Expect     string `json:"expect"`
	Variant    string `json:"variant"`
	Ref        string `json:"ref"`
	RefTensors int    `json:"ref_tensors"`
	Stricter   string `json:"stricter"`
}

func loadVerdicts(t testing.TB) map[string]verdictCase {
	t.Helper()
	b, err := os.ReadFile("testdata/safetensors/expected.json")
	if err != nil {
		t.Fatal(err)
	}
	var cases map[string]verdictCase
	if err := json.Unmarshal(b, &cases); err != nil {
		t.Fatal(err)
	}
	return cases
}

func TestVerdicts(t *testing.T) {
	cases := loadVerdicts(t)
	if len(cases) < 90 {
		t.Fatalf("only %d cases in expected.json", len(cases))
	}
	for name, c := range cases {
		path := filepath.Join("testdata/safetensors/files", name+".safetensors")
		t.Run(name, func(t *testing.T) {
			check := func(how string, ntensors int, err error) {
				t.Helper()
				switch c.Expect {
				case "ok":
					if err != nil {
						t.Fatalf("%s: want ok, got %v", how, err)
					}
					if ntensors != c.RefTensors {
						t.Errorf("%s: %d tensors, reference saw %d", how, ntensors, c.RefTensors)
					}
				case "error":
					if err == nil {
						t.Fatalf("%s: want %s, got ok", how, c.Variant)
					}
					var fe *FormatError
					if !errors.As(err, &fe) {
						t.Fatalf("%s: error %v is not a *FormatError", how, err)
					}
					duplicate := strings.Contains(err.Error(), "duplicate")
					if (fe.Variant() != c.Variant && !duplicate) || !strings.Contains(err.Error(), c.Variant) {
						t.Errorf("%s: got %v, want variant %s", how, err, c.Variant)
					}
					if !strings.Contains(err.Error(), path) {
						t.Errorf("%s: message %q does not name the file", how, err)
					}
					if c.Stricter != "" && !strings.Contains(err.Error(), "duplicate") {
						t.Errorf("%s: stricter-than-reference error %q does not say duplicate", how, err)
					}
				default:
					t.Fatalf("unknown expectation %q", c.Expect)
				}
			}
			f, err := Open(path)
			n := 0
			if err == nil {
				n = f.Len()
				f.Close()
			}
			check("Open", n, err)

			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			r, err := NewReader(strings.NewReader(string(b)), int64(len(b)), WithName(path))
			n = 0
			if err == nil {
				n = r.Len()
			}
			check("NewReader", n, err)
		})
	}
}
