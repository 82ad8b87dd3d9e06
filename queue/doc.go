// Package queue runs audit workers fed by bucket event notifications: S3
// event notifications (AWS, MinIO, any S3-protocol store) and Google Cloud
// Storage Pub/Sub notifications, taken from a NATS JetStream durable pull
// consumer with explicit acks, which every worker of a pool shares.
//
// For each object an event names, a [Worker] audits the version the
// event names — the first read is already pinned to its ETag or
// generation, so an object replaced or deleted since is reported as
// changed, never audited in its place — with package audit (the verdicts
// of `safetensors scan --json`), and writes one JSON [Result] per object
// version under a results prefix ([WithResults]; any bucket URL,
// file:///DIR included). Only then is the message acknowledged. A
// result's key depends only on the object version ([ResultKey]), so a
// message delivered twice rewrites the same document, and a version whose
// result is already written is not read again.
//
// Delivery is at least once: a worker killed mid-audit stops sending its
// heartbeats (InProgress), and after the consumer's ack wait the message
// goes to another worker. A message that keeps failing (a read error, an
// audit that times out) is delivered again with a growing delay, and its
// last delivery writes a result whatever happens: the verdict, or "error"
// saying why. A message that is not an event at all gets an "error"
// result at once. So every message ends in a result after a bounded number
// of deliveries, and the stream (work-queue retention) forgets it.
//
// [Publish] is the other end: what a relay (a Lambda fed by SQS, a
// Pub/Sub subscriber) calls to hand a notification to the stream, stored
// once however often the relay retries it.
//
// Package queue/embedded runs a NATS server with JetStream in the
// process, for one machine without a broker. docs/queue.md shows how to
// run a pool against a NATS cluster and a bucket's notifications.
package queue
