package azuresim

import (
	"cmp"
	"context"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
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
	DefaultSubscription  = "00000000-0000-0000-0000-000000000000"
	DefaultResourceGroup = "kip-rg"
	DefaultLocation      = "eastus"
	DefaultPageSize      = 50
	// DefaultCellStartTimeout bounds one CellStarter.Start.
	DefaultCellStartTimeout = 2 * time.Minute
)

// maxBody bounds a request body (ARM's own limit on a request is 4 MiB;
// a VM's userData is at most 64 KiB).
const maxBody = 4 << 20

// Options configure a Server. The zero value is subscription
// DefaultSubscription with resource group kip-rg in eastus, zones 1, 2
// and 3, DefaultSizes in every zone, the subnet and network security
// group of DefaultSubnets and DefaultSecurityGroups, no delays, and the
// real clock.
type Options struct {
	// Subscription is the only subscription served; another is 404
	// SubscriptionNotFound.
	Subscription string
	// ResourceGroups are the resource groups that exist (404
	// ResourceGroupNotFound otherwise); nil means DefaultResourceGroup.
	ResourceGroups []string
	// Location is the only region served; Zones its availability zones,
	// by default "1", "2" and "3".
	Location string
	Zones    []string
	// Sizes are the VM sizes the location offers (DefaultSizes by
	// default); a size's Zones restrict it.
	Sizes []Size
	// Subnets and SecurityGroups are the network resources that exist
	// (DefaultSubnets, DefaultSecurityGroups).
	Subnets        []Subnet
	SecurityGroups []SecurityGroup
	// AllocationDelay is how long after the PUT a new VM's allocation is
	// decided (an injected allocation failure ends its create then);
	// BootDelay how long after that it runs (provisioningState Succeeded,
	// PowerState/running), and not before its cell started.
	AllocationDelay time.Duration
	BootDelay       time.Duration
	// ShutdownDelay is how long a deleted or evicted VM is Deleting
	// before it is gone (and not before its cell stopped).
	ShutdownDelay time.Duration
	// DiskDelay is how long a disk's create and delete, and an attach or
	// detach, take at least (also SetDiskDelay), besides the
	// DiskStarter's call.
	DiskDelay time.Duration
	// RetryAfter is the Retry-After the long-running operations' answers
	// carry, in whole seconds (0 lets the client poll at its own
	// frequency).
	RetryAfter time.Duration
	// PageSize is how many items a list's page holds (DefaultPageSize).
	PageSize int
	// Cells starts a cell for every VM (simcells.CellStarter, e.g.
	// localcells.LocalCells) from its base64-decoded userData; the
	// cell's address is the NIC's private IP. nil means VMs are only
	// records, with an address of 10.0.0.0/16.
	Cells simcells.CellStarter
	// CellStartTimeout bounds one CellStarter.Start; zero means
	// DefaultCellStartTimeout.
	CellStartTimeout time.Duration
	// AgentDelay is how long after a VM runs its cell agent starts (also
	// SetAgentDelay), where the CellStarter holds agents back.
	AgentDelay time.Duration
	// Latency is how long every answer waits (also SetLatency).
	Latency time.Duration
	// RateLimit throttles every call (also SetRateLimit), answered with
	// 429 and Retry-After; zero is no limit.
	RateLimit RateLimit
	// Now is the clock every state and timestamp is computed from.
	Now func() time.Time
	// Logger defaults to slog.Default().
	Logger *slog.Logger
}

// RateLimit is a token bucket over all calls: Burst calls at once,
// refilled at PerSecond. A call finding the bucket empty is answered with
// 429 and Retry-After, as ARM answers a subscription over its limits.
type RateLimit = simknobs.RateLimit

// Fault is an error answered instead of a call's result: Operation is
// ARM's operation ID ("VirtualMachines_CreateOrUpdate"; empty means
// any), Code ARM's error code, HTTPStatus its status (zero means 400),
// Message the message (empty means the code). AfterEffect answers it
// after the call took effect: a lost answer.
type Fault = simknobs.Fault

// Server is a simulated ARM subscription. Create it with New; serve it
// with Start (TLS on loopback).
type Server struct {
	opts Options
	log  *slog.Logger
	now  func() time.Time

	srvMu sync.Mutex
	srv   *httptest.Server
	url   string

	*simknobs.Knobs
	cells       *simcells.Lifecycle
	allocFails  simknobs.Shortages[string]
	unavailable simknobs.Shortages[bool]
	closeOnce   sync.Once

	mu            sync.Mutex
	vms           map[vmKey]*vm // the latest of each name
	order         []*vm         // every VM, in PUT order
	nics          map[vmKey]*nic
	nicOrder      []*nic
	operations    map[string]*operation
	sizes         map[string]Size
	seq           uint64
	allocDelay    time.Duration
	bootDelay     time.Duration
	shutdownDelay time.Duration
	pageSize      int
	quotas        map[string]int // family (or LowPriorityCores, cores) → vCPU limit
	rateLimit     RateLimit
	disks         map[vmKey]*disk // the latest of each name (disks.go)
	diskOrder     []*disk
	diskDelay     time.Duration

	// bgCtx, bgCancel and bgWG run the DiskStarter's calls in the
	// background; Close cancels and waits for them.
	bgCtx    context.Context //nolint:containedctx // the server's own lifetime, for its background calls
	bgCancel context.CancelFunc
	bgWG     sync.WaitGroup

	// imds serves each VM's Instance Metadata Service (imds.go).
	imds simhttp.Sockets
}

// vmKey names a VM (or a NIC) in a resource group; resource groups and
// names are case-insensitive in ARM and kept lowercase here.
type vmKey struct{ rg, name string }

func keyOf(rg, name string) vmKey { return vmKey{strings.ToLower(rg), strings.ToLower(name)} }

// New returns a Server for opts, with defaults applied.
func New(opts Options) *Server {
	opts.Subscription = cmp.Or(opts.Subscription, DefaultSubscription)
	if opts.ResourceGroups == nil {
		opts.ResourceGroups = []string{DefaultResourceGroup}
	}
	opts.Location = cmp.Or(opts.Location, DefaultLocation)
	if opts.Zones == nil {
		opts.Zones = []string{"1", "2", "3"}
	}
	if opts.Sizes == nil {
		opts.Sizes = DefaultSizes
	}
	if opts.Subnets == nil {
		opts.Subnets = DefaultSubnets
	}
	if opts.SecurityGroups == nil {
		opts.SecurityGroups = DefaultSecurityGroups
	}
	opts.PageSize = cmp.Or(opts.PageSize, DefaultPageSize)
	opts.CellStartTimeout = cmp.Or(opts.CellStartTimeout, DefaultCellStartTimeout)
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	s := &Server{
		opts: opts, log: opts.Logger.With("sim", "azure", "subscription", opts.Subscription), now: opts.Now,
		Knobs: simknobs.New(opts.Latency, opts.RateLimit),
		vms:   map[vmKey]*vm{}, nics: map[vmKey]*nic{}, operations: map[string]*operation{}, sizes: map[string]Size{},
		disks: map[vmKey]*disk{}, diskDelay: opts.DiskDelay,
		allocDelay: opts.AllocationDelay, bootDelay: opts.BootDelay, shutdownDelay: opts.ShutdownDelay,
		pageSize: opts.PageSize, quotas: map[string]int{}, rateLimit: opts.RateLimit,
		imds: simhttp.Sockets{Prefix: "azuresim-imds-"},
	}
	for _, sz := range opts.Sizes {
		s.sizes[strings.ToLower(sz.Name)] = sz
	}
	s.bgCtx, s.bgCancel = context.WithCancel(context.Background())
	s.cells = simcells.NewLifecycle(simcells.LifecycleConfig{
		Starter: opts.Cells, StartTimeout: opts.CellStartTimeout, Lock: &s.mu,
		AgentDelay: opts.AgentDelay, Now: opts.Now, Logger: s.log,
	})
	return s
}

// Start serves over TLS on a free port of 127.0.0.1 and returns the
// endpoint URL (https://127.0.0.1:<port>) to give the client as
// cloud.Configuration's ResourceManager endpoint; Client and CACert are
// what trusts its certificate. Once started, it returns the same URL.
func (s *Server) Start() (string, error) {
	s.srvMu.Lock()
	defer s.srvMu.Unlock()
	if s.srv != nil {
		return s.url, nil
	}
	srv := httptest.NewUnstartedServer(s)
	srv.Config.ErrorLog = slog.NewLogLogger(s.log.Handler(), slog.LevelDebug)
	srv.StartTLS()
	s.srv, s.url = srv, srv.URL
	s.log.Info("ARM simulator started", "url", s.url)
	return s.url, nil
}

// URL is the endpoint Start returned, or "".
func (s *Server) URL() string {
	s.srvMu.Lock()
	defer s.srvMu.Unlock()
	return s.url
}

// Client is an HTTP client that trusts the server's certificate (an
// azcore policy.Transporter), or nil before Start.
func (s *Server) Client() *http.Client {
	s.srvMu.Lock()
	defer s.srvMu.Unlock()
	if s.srv == nil {
		return nil
	}
	return s.srv.Client()
}

// CACert is the server's certificate in PEM, for a client's CA bundle
// (the plugin's config), or nil before Start.
func (s *Server) CACert() []byte {
	s.srvMu.Lock()
	defer s.srvMu.Unlock()
	if s.srv == nil {
		return nil
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: s.srv.Certificate().Raw})
}

// CertPool is a pool holding the server's certificate, or nil before
// Start.
func (s *Server) CertPool() *x509.CertPool {
	s.srvMu.Lock()
	defer s.srvMu.Unlock()
	if s.srv == nil {
		return nil
	}
	p := x509.NewCertPool()
	p.AddCert(s.srv.Certificate())
	return p
}

// Close stops serving, stops every cell still running, waiting for
// them, and stops every VM's metadata service. It is idempotent.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		s.srvMu.Lock()
		srv := s.srv
		s.srvMu.Unlock()
		if srv != nil {
			srv.CloseClientConnections()
			srv.Close()
		}
		s.bgCancel()
		s.bgWG.Wait()
		s.cells.Close()
		if err := s.closeIMDS(); err != nil {
			s.log.Warn("closing instance metadata", "error", err)
		}
	})
	return nil
}

// ---- knobs of time ----

// SetAllocationDelay sets Options.AllocationDelay for VMs created from
// now on.
func (s *Server) SetAllocationDelay(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.allocDelay = d
}

// SetBootDelay sets Options.BootDelay for VMs created from now on.
func (s *Server) SetBootDelay(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.bootDelay = d
}

// SetShutdownDelay sets Options.ShutdownDelay for deletes and evictions
// from now on.
func (s *Server) SetShutdownDelay(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.shutdownDelay = d
}

// SetPageSize sets how many items a list's page holds (Options.PageSize).
func (s *Server) SetPageSize(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pageSize = max(n, 1)
}

// ---- HTTP ----

// request is one routed call: the path's variables by name and the
// request.
type request struct {
	r    *http.Request
	rg   string // the resource group, where the path has one
	name string // the resource's name, where the path has one
	sub  string // the second name: a subnet's, an operation's location
}

// routed is what route found: ARM's operation ID and its handler.
type routed struct {
	op     string
	handle func(*Server, request) (*answer, error)
}

// answer is a handler's success: its status, headers and JSON body (nil:
// none).
type answer struct {
	status int
	header http.Header
	body   any
}

func answerOK(body any) *answer { return &answer{status: http.StatusOK, body: body} }

// ServeHTTP answers one ARM request. It serves TLS only (Start), as ARM.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.TLS == nil {
		writeError(w, r, s.log, &armError{Status: http.StatusBadRequest, Code: "HttpsRequired", Message: "The ARM simulator serves HTTPS only."})
		return
	}
	rt, q, found := route(r)
	if !found {
		writeError(w, r, s.log, unserved(r))
		return
	}
	s.Count(rt.op, s.now())
	a, err := s.call(rt, q)
	s.Delay()
	if err != nil {
		var ae *armError
		if !errors.As(err, &ae) {
			ae = &armError{Status: http.StatusInternalServerError, Code: "InternalServerError", Message: err.Error()}
		}
		s.log.Debug("ARM call failed", "op", rt.op, "status", ae.Status, "code", ae.Code)
		writeError(w, r, s.log, ae)
		return
	}
	s.log.Debug("ARM call", "op", rt.op, "status", a.status)
	for k, v := range a.header {
		w.Header()[k] = v
	}
	if a.body == nil {
		w.WriteHeader(a.status)
		return
	}
	writeJSON(w, r, s.log, a.status, a.body)
}

// call checks the credentials, the api-version, the subscription and the
// resource group, applies the rate limit and injected faults, and runs
// the handler.
func (s *Server) call(rt routed, q request) (*answer, error) {
	if !strings.HasPrefix(q.r.Header.Get("Authorization"), "Bearer ") {
		return nil, &armError{Status: http.StatusUnauthorized, Code: "AuthenticationFailed", Message: "Authentication failed. The 'Authorization' header is missing."}
	}
	if q.r.URL.Query().Get("api-version") == "" {
		return nil, &armError{Status: http.StatusBadRequest, Code: "MissingApiVersionParameter",
			Message: "The api-version query parameter (?api-version=) is required for all requests."}
	}
	if sub := pathSubscription(q.r.URL.Path); !strings.EqualFold(sub, s.opts.Subscription) {
		return nil, &armError{Status: http.StatusNotFound, Code: "SubscriptionNotFound", Message: fmt.Sprintf("The subscription '%s' could not be found.", sub)}
	}
	if q.rg != "" && !slices.ContainsFunc(s.opts.ResourceGroups, func(g string) bool { return strings.EqualFold(g, q.rg) }) {
		return nil, &armError{Status: http.StatusNotFound, Code: "ResourceGroupNotFound", Message: fmt.Sprintf("Resource group '%s' could not be found.", q.rg)}
	}
	if !s.Allow(s.now()) {
		return nil, s.throttled()
	}
	fault := s.TakeFault(rt.op)
	if fault != nil && !fault.AfterEffect {
		return nil, faultError(fault)
	}
	a, err := rt.handle(s, q)
	if fault != nil {
		s.log.Info("answer lost after the call took effect", "op", rt.op, "code", fault.Code)
		return nil, faultError(fault)
	}
	return a, err
}

// pathSubscription is the subscription ID of an ARM path.
func pathSubscription(path string) string {
	p := strings.Split(strings.Trim(path, "/"), "/")
	if len(p) < 2 || !strings.EqualFold(p[0], "subscriptions") {
		return ""
	}
	return p[1]
}

// routes are the paths served: their method, ARM's operation ID, the
// handler, and the path's segments, matched case-insensitively, where
// {sub} is the subscription, {rg} the resource group, {name} the
// resource's name and {sub2} a second name (a subnet's, an operation's
// location).
var routes = []struct {
	method, op, path string
	handle           func(*Server, request) (*answer, error)
}{
	{http.MethodGet, "VirtualMachines_ListAll", "subscriptions/{sub}/providers/Microsoft.Compute/virtualMachines", (*Server).listAllVMs},
	{http.MethodGet, "ResourceSkus_List", "subscriptions/{sub}/providers/Microsoft.Compute/skus", (*Server).listSkus},
	{http.MethodGet, "Operations_Get", "subscriptions/{sub}/providers/Microsoft.Compute/locations/{sub2}/operations/{name}", (*Server).getOperation},
	{http.MethodGet, "OperationResults_Get", "subscriptions/{sub}/providers/Microsoft.Compute/locations/{sub2}/operationResults/{name}", (*Server).getOperationResult},
	{http.MethodGet, "VirtualMachines_List", "subscriptions/{sub}/resourceGroups/{rg}/providers/Microsoft.Compute/virtualMachines", (*Server).listVMs},
	{http.MethodGet, "VirtualMachines_Get", "subscriptions/{sub}/resourceGroups/{rg}/providers/Microsoft.Compute/virtualMachines/{name}", (*Server).getVM},
	{http.MethodPut, "VirtualMachines_CreateOrUpdate", "subscriptions/{sub}/resourceGroups/{rg}/providers/Microsoft.Compute/virtualMachines/{name}", (*Server).putVM},
	{http.MethodPatch, "VirtualMachines_Update", "subscriptions/{sub}/resourceGroups/{rg}/providers/Microsoft.Compute/virtualMachines/{name}", (*Server).patchVM},
	{http.MethodDelete, "VirtualMachines_Delete", "subscriptions/{sub}/resourceGroups/{rg}/providers/Microsoft.Compute/virtualMachines/{name}", (*Server).deleteVM},
	{http.MethodGet, "Disks_Get", "subscriptions/{sub}/resourceGroups/{rg}/providers/Microsoft.Compute/disks/{name}", (*Server).getDisk},
	{http.MethodPut, "Disks_CreateOrUpdate", "subscriptions/{sub}/resourceGroups/{rg}/providers/Microsoft.Compute/disks/{name}", (*Server).putDisk},
	{http.MethodDelete, "Disks_Delete", "subscriptions/{sub}/resourceGroups/{rg}/providers/Microsoft.Compute/disks/{name}", (*Server).deleteDisk},
	{http.MethodGet, "VirtualMachines_InstanceView", "subscriptions/{sub}/resourceGroups/{rg}/providers/Microsoft.Compute/virtualMachines/{name}/instanceView", (*Server).getInstanceView},
	{http.MethodGet, "NetworkInterfaces_List", "subscriptions/{sub}/resourceGroups/{rg}/providers/Microsoft.Network/networkInterfaces", (*Server).listNICs},
	{http.MethodGet, "NetworkInterfaces_Get", "subscriptions/{sub}/resourceGroups/{rg}/providers/Microsoft.Network/networkInterfaces/{name}", (*Server).getNIC},
	{http.MethodGet, "Subnets_Get", "subscriptions/{sub}/resourceGroups/{rg}/providers/Microsoft.Network/virtualNetworks/{name}/subnets/{sub2}", (*Server).getSubnet},
	{http.MethodGet, "NetworkSecurityGroups_Get", "subscriptions/{sub}/resourceGroups/{rg}/providers/Microsoft.Network/networkSecurityGroups/{name}", (*Server).getSecurityGroup},
}

// route maps a request to ARM's operation and its handler, or false.
func route(r *http.Request) (routed, request, bool) {
	p := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	for _, rt := range routes {
		if rt.method != r.Method {
			continue
		}
		if q, ok := match(strings.Split(rt.path, "/"), p); ok {
			q.r = r
			return routed{rt.op, rt.handle}, q, true
		}
	}
	return routed{}, request{r: r}, false
}

// match matches a path's segments against a route's, filling in the
// request's variables.
func match(pattern, p []string) (request, bool) {
	var q request
	if len(pattern) != len(p) {
		return q, false
	}
	for i, seg := range pattern {
		switch seg {
		case "{sub}":
		case "{rg}":
			q.rg = p[i]
		case "{name}":
			q.name = p[i]
		case "{sub2}":
			q.sub = p[i]
		default:
			if !strings.EqualFold(seg, p[i]) {
				return q, false
			}
		}
	}
	return q, true
}

// resourceID is the ARM ID of a resource of typ (Microsoft.Compute/virtualMachines)
// named name in resource group rg.
func (s *Server) resourceID(rg, typ, name string) string {
	return fmt.Sprintf("/subscriptions/%s/resourceGroups/%s/providers/%s/%s", s.opts.Subscription, rg, typ, name)
}

// formatTime writes a timestamp as ARM does (RFC 3339 with fractional
// seconds).
func formatTime(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// SetRateLimit replaces the rate limit over all calls (Options.RateLimit);
// the zero RateLimit removes it.
func (s *Server) SetRateLimit(l RateLimit) {
	s.mu.Lock()
	s.rateLimit = l
	s.mu.Unlock()
	s.Knobs.SetRateLimit(l)
}

// retryAfterThrottled is the Retry-After of a throttled call: the time
// the bucket takes to refill one token, at least a second (ARM's
// Retry-After is whole seconds).
func (s *Server) retryAfterThrottled() time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.rateLimit.PerSecond <= 0 {
		return time.Second
	}
	return max(time.Second, time.Duration(float64(time.Second)/s.rateLimit.PerSecond))
}
