package serve_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/gosafetensors/safetensors/serve"
)

// A compressed file that every read of its data refuses (frames swapped,
// duplicated, sizes shifted; a grouped chunk's byte flipped) is not clean
// on /v1/scan, uploaded or by location: invalid, naming the frame and the
// byte offset.
func TestScanCorruptContainer(t *testing.T) {
	root := t.TempDir()
	names := []string{
		"zstd_frames_swapped.safetensors.zst", "zstd_frame_duplicated.safetensors.zst", "zstd_sizes_shifted.safetensors.zst",
		"lz4_frames_swapped.safetensors.lz4", "lz4_frame_duplicated.safetensors.lz4", "lz4_sizes_shifted.safetensors.lz4",
		"grouped_chunk_byte_flipped.grouped.safetensors",
	}
	for _, n := range names {
		b, err := os.ReadFile(filepath.Join("../testdata/compressed", n))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, n), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ts := start(t, serve.WithRoot(root))
	frameAt := regexp.MustCompile(`frame \d+: .*\(at byte \d+\)`)
	check := func(how, n string, code int, body string) {
		t.Helper()
		var reps []struct {
			Verdict  string   `json:"verdict"`
			Problems []string `json:"problems"`
		}
		if err := json.Unmarshal([]byte(body), &reps); err != nil {
			var one struct {
				Verdict  string   `json:"verdict"`
				Problems []string `json:"problems"`
			}
			if err := json.Unmarshal([]byte(body), &one); err != nil {
				t.Fatalf("%s %s: %d %s", how, n, code, body)
			}
			reps = append(reps, one)
		}
		if code != http.StatusOK || len(reps) != 1 || reps[0].Verdict != "invalid" || !frameAt.MatchString(strings.Join(reps[0].Problems, "\n")) {
			t.Errorf("%s %s: %d %s", how, n, code, body)
		}
	}
	for _, n := range names {
		b, _ := os.ReadFile(filepath.Join(root, n))
		code, body, _ := do(t, "POST", ts.URL+"/v1/scan?name="+n, "", bytes.NewReader(b))
		check("upload", n, code, body)
		code, body, _ = do(t, "POST", ts.URL+"/v1/scan?location="+n, "", nil)
		check("location", n, code, body)
	}
}
