//go:build !natsserver

package main

import (
	"errors"

	"github.com/nats-io/nats.go"
)

// startEmbedded: this build has no NATS server (see queue_embedded.go).
func startEmbedded(_, _, _ string, _ bool) (*nats.Conn, string, func(), error) {
	return nil, "", nil, errors.New("--queue embedded: this safetensors is built without the embedded NATS server; " +
		"rebuild with -tags natsserver (go install -tags natsserver github.com/gosafetensors/safetensors/cmd/safetensors@latest), " +
		"or point --queue at a NATS server: nats://HOST:PORT/SUBJECT")
}
