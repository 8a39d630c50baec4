package simhttp

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// Sockets serves one handler per key on a unix socket of its own: the
// metadata service of each simulated instance, which reaches into a
// cell's network namespace where loopback would not. A socket is at the
// path Serve is given, or else in a temporary directory of the Sockets
// (made at first need, named after prefix). The zero value with a prefix
// is ready; it is safe for concurrent use.
type Sockets struct {
	// Prefix names the temporary directory ("ec2sim-imds-").
	Prefix string

	mu      sync.Mutex
	dir     string
	servers map[string]*unixServer
}

type unixServer struct {
	path string
	srv  *http.Server
}

// Serve serves h for key at path, or at <dir>/<key>.sock when path is
// empty, replacing a socket file an earlier simulator left there.
func (s *Sockets) Serve(key, path string, h http.Handler) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if path == "" {
		if s.dir == "" {
			dir, err := os.MkdirTemp("", s.Prefix)
			if err != nil {
				return fmt.Errorf("making the socket directory: %w", err)
			}
			s.dir = dir
		}
		path = filepath.Join(s.dir, key+".sock")
	}
	_ = os.Remove(path)
	ln, err := net.Listen("unix", path)
	if err != nil {
		return err
	}
	if s.servers == nil {
		s.servers = map[string]*unixServer{}
	}
	u := &unixServer{path: path, srv: &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}}
	s.servers[key] = u
	go func() { _ = u.srv.Serve(ln) }()
	return nil
}

// Path is the socket of key, while it is served.
func (s *Sockets) Path(key string) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	u := s.servers[key]
	if u == nil {
		return "", false
	}
	return u.path, true
}

// Stop stops serving key and removes its socket. Stopping a key not
// served does nothing.
func (s *Sockets) Stop(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stopLocked(key)
}

func (s *Sockets) stopLocked(key string) {
	u := s.servers[key]
	if u == nil {
		return
	}
	delete(s.servers, key)
	_ = u.srv.Close()
	_ = os.Remove(u.path)
}

// Close stops every server and removes the temporary directory.
func (s *Sockets) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for key := range s.servers {
		s.stopLocked(key)
	}
	if s.dir == "" {
		return nil
	}
	err := os.RemoveAll(s.dir)
	s.dir = ""
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("removing the socket directory: %w", err)
	}
	return nil
}
