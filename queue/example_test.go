package queue_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"os/signal"
	"syscall"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/gosafetensors/safetensors/queue"
	"github.com/gosafetensors/safetensors/queue/embedded"
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

// A relay's side: each S3 event notification is published unchanged, and
// the relay lets go of its copy (an SQS message, a Lambda invocation) only
// once Publish returns. A retry of the same body is a duplicate, not a
// second message.
func ExamplePublish() {
	dir, err := os.MkdirTemp("", "queue-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	srv, err := embedded.Start(embedded.WithStoreDir(dir), embedded.WithAddr("127.0.0.1:0"))
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Shutdown()
	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		log.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	// What the first worker of a pool would create.
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "UPLOADS", Subjects: []string{"uploads.events"},
		Storage: jetstream.FileStorage, Retention: jetstream.WorkQueuePolicy}); err != nil {
		log.Fatal(err)
	}
	body := []byte(`{"Records":[{"eventSource":"aws:s3","eventName":"ObjectCreated:Put","s3":{"bucket":{"name":"registry-uploads"},"object":{"key":"org-a/model.bin","size":93,"eTag":"5d41402abc4b2a76b9719d911017c592","sequencer":"0055AED6DCD90281E5"}}}]}`)
	for range 2 { // the relay retries: its first acknowledgement was lost
		ack, err := queue.Publish(ctx, js, "uploads.events", body)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println("stored, duplicate:", ack.Duplicate)
	}
	st, err := js.Stream(ctx, "UPLOADS")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("messages:", st.CachedInfo().State.Msgs)
	// Output:
	// stored, duplicate: false
	// stored, duplicate: true
	// messages: 1
}
