//go:build !natsserver

package main

import (
	"strings"
	"testing"
)

// Without -tags natsserver, --queue embedded says how to get it.
func TestServeQueueEmbeddedNeedsTag(t *testing.T) {
	code, _, errOut := runCLI(t, "serve", "--queue", "embedded", "--queue-store", t.TempDir(), "--results", "file://"+t.TempDir())
	if code != 2 || !strings.Contains(errOut, "-tags natsserver") {
		t.Fatalf("exit %d: %s", code, errOut)
	}
}
