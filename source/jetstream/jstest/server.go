package jstest

import (
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// Server is an in-process nats-server with JetStream on. Its methods are safe
// for concurrent use.
type Server struct {
	srv   *server.Server
	dir   string
	owned bool // dir was made by Start and is removed by Shutdown
	once  sync.Once
}

// Option configures Start.
type Option func(*config)

type config struct {
	dir     string
	timeout time.Duration
}

// WithStoreDir keeps the JetStream store in dir, which Shutdown leaves in
// place (default: a fresh temporary directory, removed by Shutdown). A
// server started again on the same dir finds its streams and consumers.
func WithStoreDir(dir string) Option { return func(c *config) { c.dir = dir } }

// WithStartTimeout bounds how long Start waits for the server to accept
// connections (default 10 s).
func WithStartTimeout(d time.Duration) Option { return func(c *config) { c.timeout = d } }

// Start runs a server on 127.0.0.1 at a free port, JetStream on, and returns
// once it accepts connections. Errors wrap ErrStore, ErrConfig or
// ErrNotReady; on error nothing is left running or on disk.
func Start(opts ...Option) (*Server, error) {
	c := config{timeout: 10 * time.Second}
	for _, o := range opts {
		if o != nil {
			o(&c)
		}
	}
	s := &Server{dir: c.dir}
	if s.dir == "" {
		dir, err := os.MkdirTemp("", "aggflow-jetstream-")
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrStore, err)
		}
		s.dir, s.owned = dir, true
	}
	srv, err := server.NewServer(&server.Options{
		Host:      "127.0.0.1",
		Port:      server.RANDOM_PORT,
		JetStream: true,
		StoreDir:  s.dir,
		NoLog:     true,
		NoSigs:    true,
	})
	if err != nil {
		s.removeDir()
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	s.srv = srv
	srv.Start()
	if !srv.ReadyForConnections(c.timeout) {
		s.Shutdown()
		return nil, fmt.Errorf("%w within %v", ErrNotReady, c.timeout)
	}
	return s, nil
}

// URL returns the client URL, nats://127.0.0.1:PORT.
func (s *Server) URL() string { return s.srv.ClientURL() }

// StoreDir returns the directory of the JetStream store.
func (s *Server) StoreDir() string { return s.dir }

// Shutdown stops the server, waits until every goroutine of it exited and
// removes the store directory Start made. Idempotent.
func (s *Server) Shutdown() {
	s.once.Do(func() {
		s.srv.Shutdown()
		s.srv.WaitForShutdown()
		s.removeDir()
	})
}

func (s *Server) removeDir() {
	if s.owned {
		_ = os.RemoveAll(s.dir)
	}
}
