package main

import (
	"bytes"
	"encoding/json"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"

	"github.com/gosafetensors/safetensors/internal/s3test"
)

// A registry audits a bucket prefix from one command: the real AWS SDK
// client against an S3-protocol server on loopback.
func TestScanAndValidateBucketPrefix(t *testing.T) {
	srv := s3test.Start(t, "uploads")
	put := func(key, file string) {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		srv.Put(t, "uploads", key, b)
	}
	put("models/a/model.safetensors", torchDir+"tiny_transformer.safetensors")
	put("models/a/pytorch_model.bin", torchDir+"tiny_transformer.bin")
	put("models/b/model.safetensors", "../../testdata/malicious/torch_zip_os_system.bin") // a name that lies
	put("other/x.bin", "../../testdata/malicious/reduce_posix_system_p2.pkl")
	query := "?" + srv.Query()
	code, out, errOut := runCLI(t, "scan", "--json", "s3://uploads/models/"+query)
	if code != 1 {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
	verdicts := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var r scanResult
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("not one JSON object per line: %v\n%s", err, out)
		}
		key := strings.TrimPrefix(strings.SplitN(r.Path, "?", 2)[0], "s3://uploads/")
		verdicts[key] = r.Verdict
	}
	want := map[string]string{"models/a/model.safetensors": "clean", "models/a/pytorch_model.bin": "clean", "models/b/model.safetensors": "dangerous"}
	if len(verdicts) != len(want) {
		t.Fatalf("verdicts %v, want %v", verdicts, want)
	}
	for k, v := range want {
		if verdicts[k] != v {
			t.Errorf("%s: %s, want %s", k, verdicts[k], v)
		}
	}
	code, out, errOut = runCLI(t, "validate", "s3://uploads/models/a/"+query)
	if code != 0 || !strings.Contains(out, "ok ") {
		t.Fatalf("validate prefix: exit %d\n%s%s", code, out, errOut)
	}
	code, out, _ = runCLI(t, "inspect", "s3://uploads/models/a/model.safetensors"+query)
	if code != 0 || !strings.Contains(out, "1.60K (1,600)") {
		t.Fatalf("inspect s3 object: exit %d\n%s", code, out)
	}
}

// A bucket prefix downloaded into a local directory through the real AWS
// SDK against an S3-protocol server on loopback, then verified; a second
// run reads nothing.
func TestDownloadBucketPrefix(t *testing.T) {
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
	if err := be.CreateBucket("models"); err != nil {
		t.Fatal(err)
	}
	want := map[string][]byte{}
	for key, file := range map[string]string{"llama/model.safetensors": torchDir + "tiny_transformer.safetensors", "llama/pytorch_model.bin": torchDir + "tiny_transformer.bin", "other/x.safetensors": torchDir + "dtypes.safetensors"} {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := be.PutObject("models", key, map[string]string{}, bytes.NewReader(b), int64(len(b)), nil); err != nil {
			t.Fatal(err)
		}
		want[key] = b
	}
	query := "?endpoint=" + url.QueryEscape(srv.URL) + "&use_path_style=true&region=us-east-1"
	dir := t.TempDir()
	code, out, errs := runCLI(t, "download", "s3://models/llama/"+query, "--local-dir", dir, "--json")
	var res downloadJSON
	if code != 0 || json.Unmarshal([]byte(out), &res) != nil || len(res.Files) != 2 {
		t.Fatalf("exit %d\n%s%s", code, out, errs)
	}
	for _, name := range []string{"model.safetensors", "pytorch_model.bin"} {
		got, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil || !bytes.Equal(got, want["llama/"+name]) {
			t.Fatalf("%s differs (%v)", name, err)
		}
	}
	if code, out, _ := runCLI(t, "verify", dir); code != 0 {
		t.Fatalf("verify: exit %d\n%s", code, out)
	}
	code, out, _ = runCLI(t, "download", "s3://models/llama/"+query, "--local-dir", dir, "--json")
	if code != 0 || json.Unmarshal([]byte(out), &res) != nil || res.Moved != 0 {
		t.Fatalf("second run: exit %d\n%s", code, out)
	}
}
