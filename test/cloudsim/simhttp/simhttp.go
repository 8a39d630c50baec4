// Package simhttp serves a cloud simulator's handler on loopback: the
// start, URL and stop that every simulator of test/cloudsim shares
// (ec2sim, gcesim), Sockets, the per-instance metadata services on unix
// sockets, and Write, which answers gzip-compressed where the client
// accepts it.
//
// It imports only the standard library.
package simhttp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"
)

// shutdownTimeout bounds how long Stop waits for requests in flight.
const shutdownTimeout = 5 * time.Second

// Endpoint is one simulator's HTTP server. The zero value is ready to
// Start; it is safe for concurrent use.
type Endpoint struct {
	mu  sync.Mutex
	srv *http.Server
	url string
}

// Start serves h on a free port of 127.0.0.1 and returns its URL
// (http://127.0.0.1:<port>); once started, it returns the same URL. name
// says whose server it is ("EC2 simulator") in the error and the logs.
func (e *Endpoint) Start(h http.Handler, name string, log *slog.Logger) (string, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.srv != nil {
		return e.url, nil
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("starting %s: %w", name, err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	e.srv, e.url = srv, "http://"+ln.Addr().String()
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("serving "+name, "error", err)
		}
	}()
	log.Info(name+" started", "url", e.url)
	return e.url, nil
}

// URL is the URL Start returned, or "" before Start.
func (e *Endpoint) URL() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.url
}

// Stop stops serving, waiting a few seconds for requests in flight. It
// is idempotent, and a no-op before Start; URL still returns the URL
// served last.
func (e *Endpoint) Stop() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.srv == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	err := e.srv.Shutdown(ctx)
	e.srv = nil
	if err != nil {
		return fmt.Errorf("stopping the server at %s: %w", e.url, err)
	}
	return nil
}
