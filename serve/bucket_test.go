package serve_test

import (
	"os"
	"strings"
	"testing"

	"github.com/gosafetensors/safetensors/internal/s3test"
	_ "github.com/gosafetensors/safetensors/remote/blobstore/s3store"
	"github.com/gosafetensors/safetensors/serve"
)

// A bucket prefix the operator allowed (with its exact endpoint query) is
// audited object by object, as one array; the same prefix with another
// endpoint is refused before anything is read.
func TestScanBucketPrefix(t *testing.T) {
	srv := s3test.Start(t, "uploads")
	for key, file := range map[string]string{"in/a.bin": "torch/tiny_transformer.bin", "in/b.pkl": "malicious/reduce_posix_system_p2.pkl"} {
		b, _ := os.ReadFile("../testdata/" + file)
		srv.Put(t, "uploads", key, b)
	}
	query := srv.Query()
	ts := start(t, serve.WithAllowLocations("s3://uploads/in/**?"+query))
	code, body := scanVerdicts(t, ts, "s3://uploads/in/?"+query)
	if code != 200 || strings.Count(body, `"path"`) != 2 || !contains(body, `"verdict": "clean"`, `"verdict": "dangerous"`) {
		t.Fatalf("%d\n%s", code, body)
	}
	if code, _ := scanVerdicts(t, ts, "s3://uploads/in/?endpoint=http://169.254.169.254&use_path_style=true&region=us-east-1"); code != 403 {
		t.Fatalf("another endpoint: %d", code)
	}
}
