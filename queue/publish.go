package queue

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"
)

// Publish is the relay's side of the queue: it publishes one notification
// body (an S3 event notification as SQS, SNS or Lambda hand it over, a GCS
// object resource) to subject unchanged, and returns once JetStream has
// stored it (the stream's publish acknowledgement): only then may a relay
// let go of its own copy (delete the SQS message, return from the
// Lambda).
//
// The message carries its SHA-256 as its Nats-Msg-Id, so a relay that
// publishes the same body again — a retry after a lost acknowledgement,
// an SQS message delivered twice — within the stream's duplicate window
// (two minutes by default) adds nothing: the acknowledgement says
// Duplicate. Two notifications are never the same bytes (S3's sequencer
// and eventTime, GCS's generation differ), so no event is lost to this.
//
// A body longer than the 1 MiB a worker decodes is refused, nothing
// published; other bodies are not inspected (a worker writes an "error"
// result for a message that is not an event, so it is seen, not dropped).
func Publish(ctx context.Context, js jetstream.JetStream, subject string, body []byte) (*jetstream.PubAck, error) {
	if len(body) > maxEventBytes {
		return nil, fmt.Errorf("queue: publish to %s: %w: a message of %d bytes (at most %d)", subject, ErrEvent, len(body), maxEventBytes)
	}
	sum := sha256.Sum256(body)
	ack, err := js.Publish(ctx, subject, body, jetstream.WithMsgID("sha256:"+hex.EncodeToString(sum[:])))
	if err != nil {
		return nil, fmt.Errorf("queue: publish to %s: %w", subject, err)
	}
	return ack, nil
}
