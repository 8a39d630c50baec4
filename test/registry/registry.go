package registry

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	ggcrregistry "github.com/google/go-containerregistry/pkg/registry"
)

// DefaultAddr is the address Start listens on when Options.Addr is empty:
// loopback, with a port chosen by the kernel.
const DefaultAddr = "127.0.0.1:0"

// Options configures Start. The zero value is an anonymous registry on
// DefaultAddr that logs nothing.
type Options struct {
	// Addr is the TCP address to listen on, DefaultAddr when empty. Use
	// "0.0.0.0:0" (or a fixed port) together with AdvertiseHost when
	// containers in other network namespaces must pull from the registry.
	Addr string

	// AdvertiseHost is the host name or IP address, without a port, that
	// Host and Ref report, joined with the listening port. When empty they
	// report the listening IP, or 127.0.0.1 when listening on every address.
	AdvertiseHost string

	// Username and Password, when either is set, turn on HTTP basic auth:
	// every request without exactly these credentials is answered 401 with
	// a "WWW-Authenticate: Basic" header.
	Username, Password string

	// Log, when not nil, receives one line per request (method, URL and,
	// for failures, the status) and the HTTP server's errors.
	Log io.Writer
}

// Registry is a running registry. Its methods are safe for concurrent use.
type Registry struct {
	ln        net.Listener
	srv       *http.Server
	host      string
	localHost string
	username  string
	password  string

	closeOnce sync.Once
	closeErr  error
	done      chan struct{} // closed when Serve has returned
}

// Start listens on opts.Addr and serves an empty in-memory registry until
// Close is called or ctx is done. It returns once the listener is open, so
// the registry accepts pushes and pulls as soon as Start returns.
func Start(ctx context.Context, opts Options) (*Registry, error) {
	addr := opts.Addr
	if addr == "" {
		addr = DefaultAddr
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("starting registry on %s: %w", addr, err)
	}
	tcp, ok := ln.Addr().(*net.TCPAddr)
	if !ok {
		_ = ln.Close()
		return nil, fmt.Errorf("starting registry on %s: listener address %v is not TCP", addr, ln.Addr())
	}
	port := fmt.Sprint(tcp.Port)
	local := "127.0.0.1"
	if !tcp.IP.IsUnspecified() {
		local = tcp.IP.String()
	}
	advertise := local
	if opts.AdvertiseHost != "" {
		advertise = opts.AdvertiseHost
	}

	out := opts.Log
	if out == nil {
		out = io.Discard
	}
	logger := log.New(out, "registry: ", log.LstdFlags|log.Lmicroseconds)

	h := ggcrregistry.New(ggcrregistry.Logger(logger))
	if opts.Username != "" || opts.Password != "" {
		h = basicAuth(h, opts.Username, opts.Password, logger)
	}

	r := &Registry{
		ln:        ln,
		host:      net.JoinHostPort(advertise, port),
		localHost: net.JoinHostPort(local, port),
		username:  opts.Username,
		password:  opts.Password,
		srv: &http.Server{
			Handler:           h,
			ReadHeaderTimeout: 10 * time.Second,
			ErrorLog:          logger,
		},
		done: make(chan struct{}),
	}
	go func() {
		defer close(r.done)
		// Serve returns http.ErrServerClosed after Close; any other error
		// has already been logged by the server.
		_ = r.srv.Serve(ln)
	}()
	go func() {
		select {
		case <-ctx.Done():
			_ = r.Close()
		case <-r.done:
		}
	}()
	return r, nil
}

// Host returns the registry's host:port as clients should name it in image
// references: Options.AdvertiseHost (or the listening IP) and the port.
func (r *Registry) Host() string { return r.host }

// LocalHost returns a host:port that this process can always reach, for
// pushing: the listening IP, or 127.0.0.1 when listening on every address.
// It equals Host unless Options.AdvertiseHost is set.
func (r *Registry) LocalHost() string { return r.localHost }

// Ref returns the reference Host()/repo:tag, for example
// "127.0.0.1:39121/kip-e2e/hello:v1".
func (r *Registry) Ref(repo, tag string) string {
	return r.host + "/" + strings.TrimPrefix(repo, "/") + ":" + tag
}

// Credentials returns the basic-auth user name and password, both empty
// for an anonymous registry.
func (r *Registry) Credentials() (username, password string) {
	return r.username, r.password
}

// AuthRequired reports whether the registry demands basic auth.
func (r *Registry) AuthRequired() bool { return r.username != "" || r.password != "" }

// Close stops the registry and drops every image in it. It closes open
// connections at once and waits for the server to stop. Calling it again
// returns the first result.
func (r *Registry) Close() error {
	r.closeOnce.Do(func() {
		err := r.srv.Close()
		<-r.done
		if err != nil && !errors.Is(err, net.ErrClosed) {
			r.closeErr = fmt.Errorf("closing registry %s: %w", r.localHost, err)
		}
	})
	return r.closeErr
}

// basicAuth answers 401 to every request that lacks the given credentials.
func basicAuth(next http.Handler, username, password string, logger *log.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		u, p, ok := req.BasicAuth()
		if !ok || !equal(u, username) || !equal(p, password) {
			logger.Printf("%s %s 401 unauthorized (credentials given: %t)", req.Method, req.URL, ok)
			w.Header().Set("WWW-Authenticate", `Basic realm="kip-test-registry"`)
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = io.WriteString(w, `{"errors":[{"code":"UNAUTHORIZED","message":"authentication required"}]}`)
			return
		}
		next.ServeHTTP(w, req)
	})
}

func equal(a, b string) bool {
	return subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1
}
