package audit_test

import (
	"bytes"
	"fmt"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"

	"github.com/gosafetensors/safetensors/audit"
	"github.com/gosafetensors/safetensors/remote/blobstore"
	_ "github.com/gosafetensors/safetensors/remote/blobstore/s3store"
)

// An audit of a bucket prefix streams the listing and reads every object
// through one client (the real AWS SDK against gofakes3 on loopback): every
// object gets the verdict its content deserves, an object whose key the
// driver cannot read is reported as not checked (never skipped), and a
// pool the caller passes is used for the listing and the objects.
func TestScanBucketPrefix(t *testing.T) {
	for k, v := range map[string]string{
		"AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test", "AWS_SESSION_TOKEN": "",
		"AWS_REGION": "us-east-1", "AWS_PROFILE": "", "AWS_EC2_METADATA_DISABLED": "true",
		"AWS_CONFIG_FILE": filepath.Join(t.TempDir(), "none"), "AWS_SHARED_CREDENTIALS_FILE": filepath.Join(t.TempDir(), "none"),
	} {
		t.Setenv(k, v)
	}
	be := s3mem.New()
	var requests atomic.Int64
	h := gofakes3.New(be).Server()
	srv := httptest.NewServer(countHandler(h, &requests))
	defer srv.Close()
	be.CreateBucket("uploads")
	clean, _ := os.ReadFile(torchDir + "tiny_transformer.bin")
	evil, _ := os.ReadFile(evilDir + "reduce_posix_system_p2.pkl")
	const n = 200
	for i := range n {
		b := clean
		if i%10 == 3 {
			b = evil
		}
		be.PutObject("uploads", fmt.Sprintf("in/%03d.bin", i), map[string]string{}, bytes.NewReader(b), int64(len(b)), nil)
	}
	be.PutObject("uploads", "in/x/../hidden.bin", map[string]string{}, bytes.NewReader(evil), int64(len(evil)), nil)
	prefix := "s3://uploads/in/?endpoint=" + url.QueryEscape(srv.URL) + "&use_path_style=true&region=us-east-1"
	pool, err := blobstore.NewPool()
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	counts := map[audit.Verdict]int{}
	var hidden *audit.ScanReport
	for r := range audit.Scan(t.Context(), prefix, audit.WithPool(pool), audit.WithConcurrency(8)) {
		counts[r.Verdict]++
		if strings.Contains(r.Path, "hidden") {
			hidden = r
		}
	}
	if counts[audit.Clean] != n-n/10 || counts[audit.Dangerous]+counts[audit.Error] != n/10+1 || counts[audit.Error] > 1 {
		t.Fatalf("verdicts %v", counts)
	}
	if hidden == nil || (hidden.Verdict != audit.Dangerous && hidden.Verdict != audit.Error) {
		t.Fatalf("the object under an unreadable key: %+v", hidden)
	}
	t.Logf("%d objects audited in %d requests", n+1, requests.Load())
}
