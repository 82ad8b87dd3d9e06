package audit_test

import (
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/gosafetensors/safetensors/audit"
	"github.com/gosafetensors/safetensors/internal/s3test"
	"github.com/gosafetensors/safetensors/remote/blobstore"
	_ "github.com/gosafetensors/safetensors/remote/blobstore/s3store"
)

// An audit of a bucket prefix streams the listing and reads every object
// through one client (the real AWS SDK against gofakes3 on loopback): every
// object gets the verdict its content deserves, an object whose key the
// driver cannot read is reported as not checked (never skipped), and a
// pool the caller passes is used for the listing and the objects.
func TestScanBucketPrefix(t *testing.T) {
	srv := s3test.Start(t, "uploads")
	var requests atomic.Int64
	srv.Config.Handler = countHandler(srv.S3, &requests)
	clean, _ := os.ReadFile(torchDir + "tiny_transformer.bin")
	evil, _ := os.ReadFile(evilDir + "reduce_posix_system_p2.pkl")
	const n = 200
	for i := range n {
		b := clean
		if i%10 == 3 {
			b = evil
		}
		srv.Put(t, "uploads", fmt.Sprintf("in/%03d.bin", i), b)
	}
	srv.Put(t, "uploads", "in/x/../hidden.bin", evil)
	prefix := "s3://uploads/in/?" + srv.Query()
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
