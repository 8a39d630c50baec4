package admin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/kipcell/kip/host/metrics"
)

// Paths the server serves.
const (
	PathMetrics = "/metrics"
	PathHealthz = "/healthz"
	PathReadyz  = "/readyz"
	PathCells   = "/cells"
	// PathPprof is where the runtime profiles are, with admin.profiling.
	PathPprof = "/debug/pprof/"
)

// Check is a health or readiness check: nil when it passes. The request's
// context bounds it.
type Check func(*http.Request) error

// namedCheck is a Check under its name.
type namedCheck struct {
	name  string
	check Check
}

// Server is the admin HTTP server. Build it with New, add checks, then
// Listen and Serve.
//
// /metrics, /cells, /debug/pprof/ and the paths of HandleProtected are
// protected: they answer only a request with a bearer token whose user
// the Access given to SetAccess authenticates (else 401) and authorizes
// for the path (a non-resource URL, verb get for GET; else 403), as the
// kubelet's and kube-rbac-proxy's /metrics do. Until SetAccess, a request
// with a token gets 503 (kip has no API client yet). AllowAnyone lifts
// the protection (admin.authorization: none). /healthz and /readyz are
// always open.
type Server struct {
	metrics *metrics.Metrics
	log     *slog.Logger
	// profiling serves PathPprof (EnableProfiling).
	profiling bool
	// open serves the protected paths to anyone (AllowAnyone).
	open   bool
	access atomic.Pointer[Access]

	mu     sync.Mutex
	health []namedCheck
	ready  []namedCheck
	// more holds the protected handlers of other packages
	// (HandleProtected); a ServeMux may gain handlers while it serves.
	more *http.ServeMux
}

// New builds the server of m's registry and cells; log receives failed
// checks and serving errors.
func New(m *metrics.Metrics, log *slog.Logger) *Server {
	s := &Server{metrics: m, log: log, more: http.NewServeMux()}
	s.AddHealthCheck("ping", func(*http.Request) error { return nil })
	return s
}

// EnableProfiling makes Handler serve Go's runtime profiles
// (net/http/pprof) under PathPprof (admin.profiling).
func (s *Server) EnableProfiling() { s.profiling = true }

// AllowAnyone serves /metrics, /cells and /debug/pprof/ to anyone who
// reaches the server, without a token (admin.authorization: none). Call
// it before Serve.
func (s *Server) AllowAnyone() { s.open = true }

// SetAccess makes a decide who may read the protected paths, from now
// on; until then a request with a token gets 503.
func (s *Server) SetAccess(a Access) { s.access.Store(&a) }

// HandleProtected serves h at pattern (an http.ServeMux pattern: a path,
// or a subtree ending in /) behind the same protection as /metrics and
// /cells: a caller the cluster authorizes to get the path as a
// non-resource URL (or anyone, with AllowAnyone). It may be called while
// the server serves, by a package the admin server does not know
// (host/keptlogs). A pattern of the server's own paths panics, as
// http.ServeMux's Handle does on a conflict.
func (s *Server) HandleProtected(pattern string, h http.Handler) {
	for _, own := range []string{PathMetrics, PathHealthz, PathReadyz, PathCells, PathPprof} {
		if pattern == own || strings.HasPrefix(pattern, own+"/") || strings.HasPrefix(own, strings.TrimSuffix(pattern, "/")+"/") {
			panic(fmt.Sprintf("admin: HandleProtected(%q) overlaps the server's own path %s", pattern, own))
		}
	}
	s.more.Handle(pattern, h)
}

// AddHealthCheck adds a liveness check (/healthz): one that fails only
// when the process should be restarted. A name added again replaces its
// check.
func (s *Server) AddHealthCheck(name string, check Check) { s.add(&s.health, name, check) }

// AddReadyCheck adds a readiness check (/readyz). A name added again
// replaces its check.
func (s *Server) AddReadyCheck(name string, check Check) { s.add(&s.ready, name, check) }

func (s *Server) add(list *[]namedCheck, name string, check Check) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if i := slices.IndexFunc(*list, func(c namedCheck) bool { return c.name == name }); i >= 0 {
		(*list)[i].check = check
		return
	}
	*list = append(*list, namedCheck{name, check})
}

func (s *Server) checks(list *[]namedCheck) []namedCheck {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(*list)
}

// Handler serves every path.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	if reg := s.metrics.Registry(); reg != nil {
		mux.Handle(PathMetrics, s.protect(promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorLog: promLog{s.log}})))
	}
	mux.Handle(PathHealthz, s.checkHandler("healthz", &s.health))
	mux.Handle(PathHealthz+"/", s.checkHandler("healthz", &s.health))
	mux.Handle(PathReadyz, s.checkHandler("readyz", &s.ready))
	mux.Handle(PathReadyz+"/", s.checkHandler("readyz", &s.ready))
	mux.Handle(PathCells, s.protect(http.HandlerFunc(s.serveCells)))
	// Any other path: a handler of HandleProtected, behind the protection,
	// else 404 without asking for a token.
	more := s.protect(s.more)
	mux.Handle("/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, pattern := s.more.Handler(r); pattern == "" {
			http.NotFound(w, r)
			return
		}
		more.ServeHTTP(w, r)
	}))
	if s.profiling {
		// net/http/pprof's own handlers, on this mux only (its init
		// registers them on http.DefaultServeMux, which kip never serves).
		mux.Handle(PathPprof, s.protect(http.HandlerFunc(pprof.Index)))
		mux.Handle(PathPprof+"cmdline", s.protect(http.HandlerFunc(pprof.Cmdline)))
		mux.Handle(PathPprof+"profile", s.protect(http.HandlerFunc(pprof.Profile)))
		mux.Handle(PathPprof+"symbol", s.protect(http.HandlerFunc(pprof.Symbol)))
		mux.Handle(PathPprof+"trace", s.protect(http.HandlerFunc(pprof.Trace)))
	}
	return mux
}

// protect serves next only to a request whose bearer token's user may
// do the method's verb on its path (Server's doc comment), unless
// AllowAnyone. The mux has cleaned the path before (it redirects any
// other), so the path reviewed is the one served.
func (s *Server) protect(next http.Handler) http.Handler {
	if s.open {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		token := bearerToken(r)
		if token == "" {
			unauthorized(w)
			return
		}
		a := s.access.Load()
		if a == nil {
			w.Header().Set("Retry-After", "5")
			http.Error(w, "kip cannot review tokens yet: it has no Kubernetes client until it has its node identity", http.StatusServiceUnavailable)
			return
		}
		u, ok, err := (*a).Authenticate(r.Context(), token)
		if err != nil {
			s.log.Warn("authenticating an admin request", "path", r.URL.Path, "error", err)
			http.Error(w, "kip could not review the token: the API server did not answer", http.StatusServiceUnavailable)
			return
		}
		if !ok {
			unauthorized(w)
			return
		}
		verb := verbOf(r.Method)
		allowed, reason, err := (*a).Authorize(r.Context(), u, verb, r.URL.Path)
		if err != nil {
			s.log.Warn("authorizing an admin request", "user", u.Name, "verb", verb, "path", r.URL.Path, "error", err)
			http.Error(w, "kip could not review the access: the API server did not answer", http.StatusServiceUnavailable)
			return
		}
		if !allowed {
			s.log.Debug("admin request forbidden", "user", u.Name, "verb", verb, "path", r.URL.Path, "reason", reason)
			http.Error(w, fmt.Sprintf("Forbidden (user=%s, verb=%s, path=%s)", u.Name, verb, r.URL.Path), http.StatusForbidden)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// unauthorized answers 401: no bearer token, or one that is not valid.
func unauthorized(w http.ResponseWriter) {
	w.Header().Set("WWW-Authenticate", `Bearer realm="kip"`)
	http.Error(w, "Unauthorized", http.StatusUnauthorized)
}

// checkHandler serves /healthz or /readyz (what), or one check of it at
// what/<name>, in the kube-apiserver's format.
func (s *Server) checkHandler(what string, list *[]namedCheck) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		checks := s.checks(list)
		if name, ok := strings.CutPrefix(r.URL.Path, "/"+what+"/"); ok {
			i := slices.IndexFunc(checks, func(c namedCheck) bool { return c.name == name })
			if i < 0 {
				http.Error(w, fmt.Sprintf("no %s check %q", what, name), http.StatusNotFound)
				return
			}
			if err := checks[i].check(r); err != nil {
				s.log.Warn(what+" check failed", "check", name, "error", err)
				http.Error(w, fmt.Sprintf("[-]%s failed: %v", name, err), http.StatusInternalServerError)
				return
			}
			fmt.Fprint(w, "ok")
			return
		}
		excluded := r.URL.Query()["exclude"]
		var out strings.Builder
		failed := false
		for _, c := range checks {
			if slices.Contains(excluded, c.name) {
				fmt.Fprintf(&out, "[+]%s excluded: ok\n", c.name)
				continue
			}
			if err := c.check(r); err != nil {
				failed = true
				s.log.Warn(what+" check failed", "check", c.name, "error", err)
				fmt.Fprintf(&out, "[-]%s failed: %v\n", c.name, err)
				continue
			}
			fmt.Fprintf(&out, "[+]%s ok\n", c.name)
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		if failed {
			w.WriteHeader(http.StatusInternalServerError)
			fmt.Fprintf(w, "%s%s check failed\n", out.String(), what)
			return
		}
		if _, verbose := r.URL.Query()["verbose"]; verbose {
			fmt.Fprintf(w, "%s%s check passed\n", out.String(), what)
			return
		}
		fmt.Fprint(w, "ok")
	})
}

// serveCells writes the node's cells as a JSON list, by namespace and
// name.
func (s *Server) serveCells(w http.ResponseWriter, _ *http.Request) {
	cells := s.metrics.Cells()
	if cells == nil {
		cells = []metrics.Cell{}
	}
	slices.SortFunc(cells, func(a, b metrics.Cell) int {
		return strings.Compare(a.Namespace+"/"+a.Pod, b.Namespace+"/"+b.Pod)
	})
	w.Header().Set("Content-Type", "application/json")
	if err := json.NewEncoder(w).Encode(cells); err != nil {
		s.log.Warn("writing /cells", "error", err)
	}
}

// Listen binds cfg.ListenAddress, so that a port in use stops kip at its
// start.
func Listen(cfg Config) (net.Listener, error) {
	lis, err := net.Listen("tcp", cfg.ListenAddress)
	if err != nil {
		return nil, fmt.Errorf("listening on admin.listenAddress %s: %w", cfg.ListenAddress, err)
	}
	return lis, nil
}

// shutdownTimeout bounds how long Serve lets requests in flight finish
// once ctx ends.
const shutdownTimeout = 5 * time.Second

// Serve serves on lis until ctx ends; it returns nil then, or the error
// that stopped it before.
func (s *Server) Serve(ctx context.Context, lis net.Listener) error {
	srv := &http.Server{Handler: s.Handler(), ReadHeaderTimeout: 10 * time.Second,
		BaseContext: func(net.Listener) context.Context { return ctx }}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(lis) }()
	select {
	case err := <-done:
		return fmt.Errorf("serving the admin server on %s: %w", lis.Addr(), err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		_ = srv.Close()
	}
	if err := <-done; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serving the admin server on %s: %w", lis.Addr(), err)
	}
	return nil
}

// promLog passes promhttp's errors to the log.
type promLog struct{ log *slog.Logger }

func (l promLog) Println(v ...any) { l.log.Warn("serving /metrics", "error", fmt.Sprint(v...)) }
