package queue_test

import (
	"context"
	"log"
	"os/signal"
	"syscall"

	"github.com/nats-io/nats.go"

	"github.com/gosafetensors/safetensors/queue"
	_ "github.com/gosafetensors/safetensors/remote/blobstore/s3store" // s3://
)

// A worker of a pool: it takes S3 event notifications published to
// uploads.events on a NATS cluster, audits each object version they name
// and writes one result per version under s3://audit-results/v1/, until
// SIGTERM, then drains.
func Example() {
	nc, err := nats.Connect("nats://nats-1:4222", nats.UserCredentials("/etc/nats/audit.creds"))
	if err != nil {
		log.Fatal(err)
	}
	defer nc.Close()
	w, err := queue.New(nc,
		queue.WithSubject("uploads.events"),
		queue.WithEventLocation("s3://{bucket}/{key}?region=eu-west-1"),
		queue.WithResults("s3://audit-results/v1/?region=eu-west-1"),
		queue.WithBuckets("registry-uploads"),
		queue.WithConcurrency(8))
	if err != nil {
		log.Fatal(err)
	}
	defer w.Close()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	if err := w.Run(ctx); err != nil {
		log.Fatal(err)
	}
}
