package gcesim

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/kipcell/kip/test/cloudsim/simcells"
	"github.com/kipcell/kip/test/cloudsim/simhttp"
	"github.com/kipcell/kip/test/cloudsim/simknobs"
)

// Defaults of Options.
const (
	DefaultProject = "kip-sim"
	DefaultRegion  = "us-central1"
	// DefaultMaxWait bounds zoneOperations.wait, as GCE's two-minute
	// deadline does.
	DefaultMaxWait          = 2 * time.Minute
	DefaultCellStartTimeout = 2 * time.Minute
)

// apiBase is the prefix of every selfLink, zone and machine type URL, as
// GCE writes them whatever endpoint the client called.
const apiBase = "https://www.googleapis.com/compute/v1/"

// maxBody bounds a request body (GCE's own limit on an instance's
// metadata is 512 KiB).
const maxBody = 1 << 20

// Options configure a Server. The zero value is project kip-sim in
// us-central1 with zones a, b and c, no delays, and the real clock.
type Options struct {
	// Project is the only project served; another is notFound.
	Project string
	// ProjectNumber is its number (DefaultProjectNumber), which the
	// metadata server and the identity tokens name.
	ProjectNumber int64
	// Region names the region of the zones and of the default subnetwork.
	Region string
	// Zones default to <region>-a, -b and -c.
	Zones []string
	// MachineTypes default to DefaultMachineTypes, Images to DefaultImages,
	// Subnetworks to DefaultSubnetworks and Networks to DefaultNetworks
	// (surface.go).
	MachineTypes []MachineType
	Images       []Image
	Subnetworks  []Subnetwork
	Networks     []Network
	// BootDelay is how long a new instance takes to be RUNNING: it is
	// PROVISIONING for the first half, STAGING for the second.
	BootDelay time.Duration
	// ShutdownDelay is how long a deleted instance is STOPPING before it
	// is TERMINATED.
	ShutdownDelay time.Duration
	// TerminatedVisible is how long a TERMINATED instance is still
	// returned by get and list after its delete (0: it is gone at once,
	// as GCE removes a deleted instance).
	TerminatedVisible time.Duration
	// OperationDelay is how long an operation is RUNNING before it is DONE
	// (a delete's operation also waits for the instance to be
	// TERMINATED). With 0 an operation is DONE on the client's first poll,
	// which costs Operation.Wait no sleep.
	OperationDelay time.Duration
	// MaxWait bounds how long zoneOperations.wait holds a request in real
	// time before it answers with the operation as it is.
	MaxWait time.Duration
	// Cells starts a cell for every instance (simcells.CellStarter, e.g.
	// localcells.LocalCells) from its kip-bootstrap metadata item; the
	// cell's address is nic0's networkIP. nil means instances are only
	// records, with an address of 10.128.0.0/16.
	Cells simcells.CellStarter
	// CellStartTimeout bounds one CellStarter.Start; zero means
	// DefaultCellStartTimeout.
	CellStartTimeout time.Duration
	// AgentDelay is how long after an instance runs its cell agent starts
	// (also SetAgentDelay), where the CellStarter holds agents back
	// (simcells.AgentStarter): the startup script starts kip-cell a while
	// after GCE says RUNNING.
	AgentDelay time.Duration
	// Latency is how long every answer waits (also SetLatency).
	Latency time.Duration
	// RateLimit throttles every call (also SetRateLimit), answered with
	// 403 rateLimitExceeded; zero is no limit.
	RateLimit RateLimit
	// Now is the clock every state and timestamp is computed from.
	Now func() time.Time
	// Logger defaults to slog.Default().
	Logger *slog.Logger
}

// RateLimit is a token bucket over all calls: Burst calls at once,
// refilled at PerSecond. A call finding the bucket empty is answered with
// 403 rateLimitExceeded (domain usageLimits), as GCE answers a project
// over its API rate quota.
type RateLimit = simknobs.RateLimit

// Fault is an error answered instead of a call's result: Operation is
// GCE's method name ("compute.instances.insert"; empty means any), Code
// the reason (notFound, backendError, rateLimitExceeded, …), HTTPStatus
// its status (zero means 400), Message the message (empty means the
// reason). AfterEffect answers it after the call took effect: a lost
// answer, which a retry with the same requestId must survive.
type Fault = simknobs.Fault

// Server is a simulated Compute Engine project. Create it with New; use it
// with Start or as an http.Handler.
type Server struct {
	opts Options
	log  *slog.Logger
	now  func() time.Time

	http    simhttp.Endpoint
	surface *surface // machine types, images, networks: fixed by New

	*simknobs.Knobs
	cells     *simcells.Lifecycle
	signer    identitySigner
	metadata  simhttp.Sockets // the instances' metadata servers
	stockouts simknobs.Shortages[Stockout]
	closeOnce sync.Once

	mu            sync.Mutex
	instances     map[instanceKey]*instance  // the latest of each name
	order         []*instance                // every instance, in insert order
	operations    map[instanceKey]*operation // by zone and operation name
	requests      map[string]*operation      // by requestId
	seq           uint64
	bootDelay     time.Duration
	shutdownDelay time.Duration
	opDelay       time.Duration
	quotas        []Quota
	opOrder       []*operation // every operation, in insert order
	opSeq         uint64
	disks         map[instanceKey]*disk // the latest of each name
	diskOrder     []*disk               // every disk, in insert order
	diskSeq       uint64

	// bgCtx ends at Close; bg counts the DiskStarter calls under way.
	bgCtx  context.Context
	stopBG context.CancelFunc
	bg     sync.WaitGroup
}

// instanceKey names an instance (or an operation) in a zone.
type instanceKey struct{ zone, name string }

// New returns a Server for opts, with defaults applied.
func New(opts Options) *Server {
	opts.Project = cmp.Or(opts.Project, DefaultProject)
	opts.Region = cmp.Or(opts.Region, DefaultRegion)
	opts.ProjectNumber = cmp.Or(opts.ProjectNumber, DefaultProjectNumber)
	if opts.Zones == nil {
		opts.Zones = []string{opts.Region + "-a", opts.Region + "-b", opts.Region + "-c"}
	}
	opts.Zones = slices.Clone(opts.Zones)
	opts.MaxWait = cmp.Or(opts.MaxWait, DefaultMaxWait)
	opts.CellStartTimeout = cmp.Or(opts.CellStartTimeout, DefaultCellStartTimeout)
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	s := &Server{
		surface: newSurface(&opts), opts: opts, log: opts.Logger.With("sim", "gce", "project", opts.Project), now: opts.Now,
		Knobs:     simknobs.New(opts.Latency, opts.RateLimit),
		instances: map[instanceKey]*instance{}, operations: map[instanceKey]*operation{}, requests: map[string]*operation{},
		metadata:  simhttp.Sockets{Prefix: "gcesim-metadata-"},
		disks:     map[instanceKey]*disk{},
		bootDelay: opts.BootDelay, shutdownDelay: opts.ShutdownDelay, opDelay: opts.OperationDelay,
	}
	s.bgCtx, s.stopBG = context.WithCancel(context.Background())
	s.cells = simcells.NewLifecycle(simcells.LifecycleConfig{
		Starter: opts.Cells, StartTimeout: opts.CellStartTimeout, Lock: &s.mu,
		AgentDelay: opts.AgentDelay, Now: opts.Now, Logger: s.log,
	})
	return s
}

// Start serves on a free port of 127.0.0.1 and returns the endpoint URL
// to give the client as option.WithEndpoint.
func (s *Server) Start() (string, error) { return s.http.Start(s, "GCE simulator", s.log) }

// URL is the endpoint Start returned, or "".
func (s *Server) URL() string { return s.http.URL() }

// Close stops serving and stops every cell still running, waiting for
// them. It is idempotent.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		if err := s.http.Stop(); err != nil {
			s.log.Warn("stopping GCE simulator", "error", err)
		}
		s.stopBG()
		s.bg.Wait()
		s.cells.Close()
		if err := s.metadata.Close(); err != nil {
			s.log.Warn("closing the instances' metadata servers", "error", err)
		}
	})
	return nil
}

// ---- knobs ----

// SetBootDelay sets Options.BootDelay for instances inserted from now on.
func (s *Server) SetBootDelay(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.bootDelay = d
}

// SetShutdownDelay sets Options.ShutdownDelay for deletes from now on.
func (s *Server) SetShutdownDelay(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.shutdownDelay = d
}

// SetOperationDelay sets Options.OperationDelay for operations started
// from now on.
func (s *Server) SetOperationDelay(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.opDelay = d
}

// ---- inspection ----

// Instance returns what the server knows of the instance named name in
// zone, as it is now, including one that is gone after its delete.
func (s *Server) Instance(zone, name string) (Instance, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	in := s.instances[instanceKey{zone, name}]
	if in == nil {
		return Instance{}, false
	}
	return in.snapshot(s.now()), true
}

// Instances returns every instance ever inserted, in insert order.
func (s *Server) Instances() []Instance {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	out := make([]Instance, 0, len(s.order))
	for _, in := range s.order {
		out = append(out, in.snapshot(now))
	}
	return out
}

// ---- HTTP ----

// ServeHTTP answers one Compute REST request.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == certsPath {
		s.serveCerts(w, r)
		return
	}
	rest, ok := strings.CutPrefix(r.URL.Path, "/compute/v1/projects/")
	if !ok {
		writeError(w, r, s.log, unserved(r))
		return
	}
	parts := strings.Split(rest, "/")
	rt, ok := route(r.Method, parts[1:])
	if !ok {
		writeError(w, r, s.log, unserved(r))
		return
	}
	s.Count(rt.method, s.now())
	req := request{r: r, project: parts[0], args: rt.args}
	body, err := s.call(rt, req)
	s.Delay()
	if err != nil {
		var ae *apiError
		if !errors.As(err, &ae) {
			ae = &apiError{Status: http.StatusInternalServerError, Reason: "backendError", Message: err.Error()}
		}
		s.log.Debug("GCE call failed", "method", rt.method, "status", ae.Status, "reason", ae.Reason)
		writeError(w, r, s.log, ae)
		return
	}
	s.log.Debug("GCE call", "method", rt.method)
	writeJSON(w, r, s.log, http.StatusOK, body)
}

// call checks the project and the zone, applies the rate limit and
// injected faults, and runs the handler.
func (s *Server) call(rt routed, req request) (any, error) {
	if req.project != s.opts.Project && !crossProject[rt.method] {
		return nil, notFound("projects/" + req.project)
	}
	if rt.zonal && !slices.Contains(s.opts.Zones, req.zone()) {
		return nil, invalid("zone", req.zone(), "Unknown zone.")
	}
	if !s.Allow(s.now()) {
		return nil, rateLimited(s.opts.Project)
	}
	fault := s.TakeFault(rt.method)
	if fault != nil && !fault.AfterEffect {
		return nil, faultError(fault)
	}
	body, err := rt.handle(s, req)
	if fault != nil {
		s.log.Info("answer lost after the call took effect", "method", rt.method, "reason", fault.Code)
		return nil, faultError(fault)
	}
	return body, err
}

// request is one routed call: its project and the path's variables
// (zone first, where the path has one).
type request struct {
	r       *http.Request
	project string
	args    []string
}

func (q request) zone() string { return q.args[0] }

// routed is what route found: the method's name, whether its first
// argument is a zone, and its handler.
type routed struct {
	method string
	zonal  bool
	args   []string
	handle func(*Server, request) (any, error)
}

// route maps a method and the path after projects/{project} to a
// handler, or false.
func route(method string, p []string) (routed, bool) {
	switch {
	case len(p) >= 3 && len(p) <= 4 && p[0] == "zones" && (p[2] == "instances" || p[2] == "disks"):
		if rt, ok := routeZonal(method, p); ok {
			return rt, true
		}
	case len(p) == 5 && p[0] == "zones" && p[2] == "instances" && method == http.MethodPost && p[4] == "attachDisk":
		return routed{"compute.instances.attachDisk", true, []string{p[1], p[3]}, (*Server).attachDisk}, true
	case len(p) == 5 && p[0] == "zones" && p[2] == "instances" && method == http.MethodPost && p[4] == "detachDisk":
		return routed{"compute.instances.detachDisk", true, []string{p[1], p[3]}, (*Server).detachDisk}, true
	case len(p) == 2 && p[0] == "aggregated" && p[1] == "instances" && method == http.MethodGet:
		return routed{"compute.instances.aggregatedList", false, nil, (*Server).aggregatedInstances}, true
	case len(p) >= 3 && p[0] == "zones" && p[2] == "operations", len(p) >= 2 && p[1] == "operations":
		return routeOperation(method, p)
	}
	return surfaceRoute(method, p)
}

// routeZonal maps a method and zones/{zone}/instances[/{name}] or
// zones/{zone}/disks[/{name}] to a handler, or false.
func routeZonal(method string, p []string) (routed, bool) {
	switch {
	case len(p) == 3 && p[2] == "instances":
		switch method {
		case http.MethodPost:
			return routed{"compute.instances.insert", true, []string{p[1]}, (*Server).insertInstance}, true
		case http.MethodGet:
			return routed{"compute.instances.list", true, []string{p[1]}, (*Server).listInstances}, true
		}
	case len(p) == 4 && p[2] == "instances":
		switch method {
		case http.MethodGet:
			return routed{"compute.instances.get", true, []string{p[1], p[3]}, (*Server).getInstance}, true
		case http.MethodDelete:
			return routed{"compute.instances.delete", true, []string{p[1], p[3]}, (*Server).deleteInstance}, true
		}
	case len(p) == 3 && p[2] == "disks":
		switch method {
		case http.MethodPost:
			return routed{"compute.disks.insert", true, []string{p[1]}, (*Server).insertDisk}, true
		case http.MethodGet:
			return routed{"compute.disks.list", true, []string{p[1]}, (*Server).listDisks}, true
		}
	case len(p) == 4 && p[2] == "disks":
		switch method {
		case http.MethodGet:
			return routed{"compute.disks.get", true, []string{p[1], p[3]}, (*Server).getDisk}, true
		case http.MethodDelete:
			return routed{"compute.disks.delete", true, []string{p[1], p[3]}, (*Server).deleteDisk}, true
		}
	}
	return routed{}, false
}

// zoneURL and friends write the URLs GCE puts in its resources.
func (s *Server) zoneURL(zone string) string {
	return apiBase + "projects/" + s.opts.Project + "/zones/" + zone
}

// formatTime writes a timestamp as GCE does (RFC 3339 with milliseconds
// and the offset).
func formatTime(t time.Time) string { return t.Format("2006-01-02T15:04:05.000-07:00") }
