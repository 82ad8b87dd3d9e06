//go:build natsserver

package main

// The embedded NATS server (--queue embedded) is compiled in with
// -tags natsserver: nats-server is the largest compile of the queue (see
// docs/queue.md for the measurements), and a worker pointed at a NATS
// cluster does not need it.
//
//	go install -tags natsserver ./cmd/safetensors

import (
	"github.com/nats-io/nats.go"

	"github.com/gosafetensors/safetensors/queue/embedded"
)

// startEmbedded starts a NATS server with JetStream in the process and
// connects to it in-process.
func startEmbedded(store, listen, token string, insecure bool) (nc *nats.Conn, addr string, shutdown func(), err error) {
	opts := []embedded.Option{embedded.WithStoreDir(store), embedded.WithAddr(listen), embedded.WithInsecure(insecure)}
	if token != "" {
		opts = append(opts, embedded.WithToken(token))
	}
	srv, err := embedded.Start(opts...)
	if err != nil {
		return nil, "", nil, err
	}
	nc, err = srv.Connect()
	if err != nil {
		srv.Shutdown()
		return nil, "", nil, err
	}
	return nc, srv.Addr().String(), func() { nc.Close(); srv.Shutdown() }, nil
}
