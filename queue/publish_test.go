package queue_test

import (
	"bytes"
	"errors"
	"testing"

	"github.com/gosafetensors/safetensors/queue"
)

// Publish stores a body once however often a relay retries it, stores
// distinct notifications each, and refuses a body no worker would decode,
// publishing nothing.
func TestPublish(t *testing.T) {
	srv := startNATS(t)
	_, js := connect(t, srv)
	ensureStream(t, js, queue.DefaultSubject)
	a, b := s3Event("uploads", "in/a.bin", "e1", 10, 1), s3Event("uploads", "in/a.bin", "e1", 10, 2)
	for i, body := range [][]byte{a, a, b, a} {
		ack, err := queue.Publish(t.Context(), js, queue.DefaultSubject, body)
		if err != nil {
			t.Fatal(err)
		}
		if want := i == 1 || i == 3; ack.Duplicate != want {
			t.Errorf("publish %d: duplicate %v, want %v", i, ack.Duplicate, want)
		}
	}
	if _, err := queue.Publish(t.Context(), js, queue.DefaultSubject, bytes.Repeat([]byte(" "), 1<<20+1)); !errors.Is(err, queue.ErrEvent) {
		t.Errorf("a body of 1 MiB + 1: %v, want ErrEvent", err)
	}
	if n := pending(t, js); n != 2 {
		t.Errorf("%d messages in the stream, want 2", n)
	}
}
