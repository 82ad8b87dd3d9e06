// Package embedded runs a NATS server with JetStream inside the process,
// for `safetensors serve --queue embedded`: one machine gets the queue's
// durability (messages on disk, explicit acks, redelivery) with no broker
// to install, and the worker code is the same that points at a NATS
// cluster. The server listens on loopback by default, so that a bucket's
// notifications (MinIO's NATS target, a relay) can publish to it; the
// worker connects in-process.
//
// It imports github.com/nats-io/nats-server/v2, the whole server (about
// 4 MB of module download and the largest compile of the queue): a
// program that only consumes from a NATS cluster needs package queue
// alone.
package embedded

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/gosafetensors/safetensors"
)

// ErrOption is wrapped by the error Start returns for an invalid option.
var ErrOption = safetensors.ErrOption

// DefaultAddr is where the embedded server listens by default.
const DefaultAddr = "127.0.0.1:4222"

// Server is a running embedded NATS server.
type Server struct {
	ns    *server.Server
	token string
}

// An Option configures [Start].
type Option func(*config) error

type config struct {
	storeDir  string
	host      string
	port      int
	token     string
	insecure  bool
	syncEvery bool
}

// WithStoreDir sets where JetStream keeps its files (required; created if
// missing). Messages not yet acknowledged survive a restart there.
func WithStoreDir(dir string) Option {
	return func(c *config) error {
		if dir == "" {
			return errors.New("empty store directory")
		}
		c.storeDir = dir
		return nil
	}
}

// WithAddr sets where the server listens for publishers and other
// workers: HOST:PORT (port 0: any free port; default [DefaultAddr]). A
// non-loopback host needs [WithToken] or [WithInsecure].
func WithAddr(addr string) Option {
	return func(c *config) error {
		host, port, err := net.SplitHostPort(addr)
		if err != nil {
			return fmt.Errorf("address %q: %v", addr, err)
		}
		var p int
		if _, err := fmt.Sscanf(port, "%d", &p); err != nil || p < 0 || p > 65535 {
			return fmt.Errorf("address %q: bad port", addr)
		}
		c.host, c.port = host, p
		if p == 0 {
			c.port = server.RANDOM_PORT
		}
		return nil
	}
}

// WithToken makes every client but the in-process one authenticate with
// token (nats://TOKEN@HOST:PORT, or the client's token option).
func WithToken(token string) Option {
	return func(c *config) error {
		if len(token) < 16 {
			return errors.New("token shorter than 16 characters")
		}
		c.token = token
		return nil
	}
}

// WithInsecure allows a non-loopback address without a token.
func WithInsecure(ok bool) Option {
	return func(c *config) error { c.insecure = ok; return nil }
}

// WithSyncAlways makes JetStream sync its files to disk on every write
// (default true): a message the server acknowledged survives the machine's
// power loss, not only the process's death. False syncs every two minutes,
// as a NATS server does by default, for more messages per second.
func WithSyncAlways(on bool) Option {
	return func(c *config) error { c.syncEvery = on; return nil }
}

func loopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.Unmap().IsLoopback()
}

// Start starts the server and waits until it accepts connections.
func Start(opts ...Option) (*Server, error) {
	h, p, _ := net.SplitHostPort(DefaultAddr)
	c := config{host: h, syncEvery: true}
	fmt.Sscanf(p, "%d", &c.port)
	var errs []error
	for _, o := range opts {
		if o == nil {
			errs = append(errs, errors.New("nil Option"))
			continue
		}
		if err := o(&c); err != nil {
			errs = append(errs, err)
		}
	}
	if c.storeDir == "" {
		errs = append(errs, errors.New("no store directory (WithStoreDir)"))
	}
	if !loopback(c.host) && c.token == "" && !c.insecure {
		errs = append(errs, fmt.Errorf("address %s is not a loopback address: give a token (or allow it insecure)", c.host))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("embedded: %w: %w", ErrOption, err)
	}
	if err := os.MkdirAll(c.storeDir, 0o700); err != nil {
		return nil, fmt.Errorf("embedded: store directory: %w", err)
	}
	ns, err := server.NewServer(&server.Options{
		ServerName: "safetensors-embedded", Host: c.host, Port: c.port,
		JetStream: true, StoreDir: c.storeDir, SyncAlways: c.syncEvery,
		Authorization: c.token, NoSigs: true, NoLog: true, MaxPayload: 1 << 20,
	})
	if err != nil {
		return nil, fmt.Errorf("embedded: %w", err)
	}
	ns.Start()
	if !ns.ReadyForConnections(30 * time.Second) {
		ns.Shutdown()
		return nil, errors.New("embedded: the NATS server did not start within 30s")
	}
	return &Server{ns: ns, token: c.token}, nil
}

// Addr returns the address the server listens on.
func (s *Server) Addr() net.Addr { return s.ns.Addr() }

// ClientURL returns nats://HOST:PORT for clients outside the process.
func (s *Server) ClientURL() string { return s.ns.ClientURL() }

// Connect connects to the server in-process (no socket; the token, if
// any, is sent).
func (s *Server) Connect(opts ...nats.Option) (*nats.Conn, error) {
	opts = append([]nats.Option{nats.InProcessServer(s.ns), nats.Name("safetensors in-process")}, opts...)
	if s.token != "" {
		opts = append(opts, nats.Token(s.token))
	}
	return nats.Connect("", opts...)
}

// Shutdown stops the server (JetStream's files are synced and closed).
func (s *Server) Shutdown() {
	s.ns.Shutdown()
	s.ns.WaitForShutdown()
}
