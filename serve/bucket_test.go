package serve_test

import (
	"bytes"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"

	_ "github.com/gosafetensors/safetensors/remote/blobstore/s3store"
	"github.com/gosafetensors/safetensors/serve"
)

// A bucket prefix the operator allowed (with its exact endpoint query) is
// audited object by object, as one array; the same prefix with another
// endpoint is refused before anything is read.
func TestScanBucketPrefix(t *testing.T) {
	for k, v := range map[string]string{
		"AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test", "AWS_SESSION_TOKEN": "",
		"AWS_REGION": "us-east-1", "AWS_PROFILE": "", "AWS_EC2_METADATA_DISABLED": "true",
		"AWS_CONFIG_FILE": filepath.Join(t.TempDir(), "none"), "AWS_SHARED_CREDENTIALS_FILE": filepath.Join(t.TempDir(), "none"),
	} {
		t.Setenv(k, v)
	}
	be := s3mem.New()
	srv := httptest.NewServer(gofakes3.New(be).Server())
	defer srv.Close()
	be.CreateBucket("uploads")
	for key, file := range map[string]string{"in/a.bin": "torch/tiny_transformer.bin", "in/b.pkl": "malicious/reduce_posix_system_p2.pkl"} {
		b, _ := os.ReadFile("../testdata/" + file)
		be.PutObject("uploads", key, map[string]string{}, bytes.NewReader(b), int64(len(b)), nil)
	}
	query := "endpoint=" + url.QueryEscape(srv.URL) + "&use_path_style=true&region=us-east-1"
	ts := start(t, serve.WithAllowLocations("s3://uploads/in/**?"+query))
	code, body := scanVerdicts(t, ts, "s3://uploads/in/?"+query)
	if code != 200 || strings.Count(body, `"path"`) != 2 || !contains(body, `"verdict": "clean"`, `"verdict": "dangerous"`) {
		t.Fatalf("%d\n%s", code, body)
	}
	if code, _ := scanVerdicts(t, ts, "s3://uploads/in/?endpoint=http://169.254.169.254&use_path_style=true&region=us-east-1"); code != 403 {
		t.Fatalf("another endpoint: %d", code)
	}
}
