package ec2sim

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
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
	DefaultRegion            = "us-east-1"
	DefaultAccountID         = "123456789012"
	DefaultVPCID             = "vpc-0000000000000a001"
	DefaultTerminatedVisible = time.Hour
	DefaultCellStartTimeout  = 2 * time.Minute
	DefaultLatency           = time.Millisecond
)

// maxBody bounds a request body; EC2's own limit on a Query request is
// far above what RunInstances with 16 KiB of user data needs.
const maxBody = 1 << 20

// Options configure a Server. The zero value is a usable us-east-1 with
// three zones, one default subnet each, Debian images and
// DefaultInstanceTypes, and no cells.
type Options struct {
	// Region is the region the server plays; requests signed for another
	// region are refused with AuthFailure, as a regional endpoint does.
	Region string
	// AccountID owns every resource.
	AccountID string
	// AccessKeyID, when set, is the only access key accepted (AuthFailure
	// otherwise). Signatures are never checked.
	AccessKeyID string
	// Zones default to <region>a, <region>b and <region>c.
	Zones []string
	// VPCID is the VPC of the subnets that name none.
	VPCID string
	// Subnets default to one default-for-AZ subnet per zone, 10.0.N.0/24.
	Subnets []Subnet
	// Images default to DefaultImages.
	Images []Image
	// InstanceTypes default to DefaultInstanceTypes.
	InstanceTypes []InstanceType
	// Cells starts a cell for every instance; nil means instances are
	// only records, with an address from their subnet.
	Cells CellStarter
	// CellStartTimeout bounds one CellStarter.Start; zero means
	// DefaultCellStartTimeout.
	CellStartTimeout time.Duration
	// BootDelay is how long an instance stays pending at least (also
	// SetBootDelay). ShutdownDelay is how long it stays shutting-down at
	// least (also SetShutdownDelay).
	BootDelay     time.Duration
	ShutdownDelay time.Duration
	// AgentDelay is how long after an instance runs its cell agent starts
	// (also SetAgentDelay), where the CellStarter can hold an agent back
	// (AgentStarter): a real instance runs minutes before cloud-init has
	// started kip-cell.
	AgentDelay time.Duration
	// VolumeDelay is how long a volume stays creating, attaching,
	// detaching and deleting at least (also SetVolumeDelay); EBS takes
	// seconds for each.
	VolumeDelay time.Duration
	// TerminatedVisible is how long a terminated instance stays visible;
	// zero means DefaultTerminatedVisible (EC2: about an hour).
	TerminatedVisible time.Duration
	// Latency is how long every answer waits (also SetLatency); zero
	// means DefaultLatency. See Server.reply for why it is not zero.
	Latency time.Duration
	// RateLimit throttles EC2 calls (also SetRateLimit); zero is no limit.
	RateLimit RateLimit
	// ECRPassword is the password in ECR authorization tokens; empty means
	// a random one (see ECRCredentials).
	ECRPassword string
	// Now is the clock states are computed from; nil means time.Now.
	Now func() time.Time
	// Logger receives the server's logs; nil means slog.Default().
	Logger *slog.Logger
}

// RateLimit is a token bucket over all EC2 calls, like EC2's request-rate
// limits: Burst calls at once, refilled at PerSecond. A call finding the
// bucket empty is answered with RequestLimitExceeded (HTTP 503).
type RateLimit = simknobs.RateLimit

// Fault is an error answered instead of a call's result: Operation is
// the action it applies to ("RunInstances", "GetAuthorizationToken"; empty
// means any), Code and Message EC2's error.
type Fault = simknobs.Fault

// Server is a simulated EC2 region. Create it with New; use it with Start
// or as an http.Handler.
//
// Its knobs and counters shared with gcesim (InjectFault, ClearFaults,
// SetRateLimit, SetLatency, Calls, MaxCallsPerSecond, Throttled,
// ResetCalls) come from the embedded simknobs.Knobs.
type Server struct {
	*simknobs.Knobs

	opts   Options
	region *region
	log    *slog.Logger
	now    func() time.Time

	cells           *simcells.Lifecycle
	insufficientCap simknobs.Shortages[bool]

	http simhttp.Endpoint

	closeOnce sync.Once

	mu               sync.Mutex
	instances        map[string]*instance
	order            []*instance
	tokens           map[string]*reservation
	seq              int64
	bootDelay        time.Duration
	shutdownDelay    time.Duration
	consistencyDelay time.Duration

	// EBS volumes (volumes.go), in creation order, by ID and by
	// CreateVolume ClientToken; diskCtx ends the DiskStarter calls under
	// way at Close.
	volumes      map[string]*volume
	volumeOrder  []*volume
	volumeTokens map[string]*volume
	volumeDelay  time.Duration
	diskCtx      context.Context
	diskStop     context.CancelFunc
	diskWG       sync.WaitGroup

	// Instance metadata (imds.go).
	signer identitySigner
	imds   simhttp.Sockets // the instances' IMDS
	timers []*time.Timer   // interruptions after their notice
}

// New returns a Server for opts, with defaults applied. It panics on
// inconsistent Options (a subnet in a zone the region lacks), which is a
// bug in the test that wrote them.
func New(opts Options) *Server {
	opts.Region = cmp.Or(opts.Region, DefaultRegion)
	opts.AccountID = cmp.Or(opts.AccountID, DefaultAccountID)
	opts.VPCID = cmp.Or(opts.VPCID, DefaultVPCID)
	if opts.Zones == nil {
		opts.Zones = []string{opts.Region + "a", opts.Region + "b", opts.Region + "c"}
	}
	if opts.Images == nil {
		opts.Images = DefaultImages
	}
	opts.Images = slices.Clone(opts.Images)
	if opts.InstanceTypes == nil {
		opts.InstanceTypes = DefaultInstanceTypes
	}
	opts.CellStartTimeout = cmp.Or(opts.CellStartTimeout, DefaultCellStartTimeout)
	opts.TerminatedVisible = cmp.Or(opts.TerminatedVisible, DefaultTerminatedVisible)
	if opts.ECRPassword == "" {
		opts.ECRPassword = "ecr-" + randomHex(24)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	r, err := newRegion(&opts)
	if err != nil {
		panic("ec2sim: " + err.Error())
	}
	s := &Server{
		Knobs: simknobs.New(cmp.Or(opts.Latency, DefaultLatency), opts.RateLimit),
		opts:  opts, region: r, log: opts.Logger.With("sim", "ec2", "region", opts.Region), now: opts.Now,
		instances: map[string]*instance{}, tokens: map[string]*reservation{},
		bootDelay: opts.BootDelay, shutdownDelay: opts.ShutdownDelay,
		imds:    simhttp.Sockets{Prefix: "ec2sim-imds-"},
		volumes: map[string]*volume{}, volumeTokens: map[string]*volume{}, volumeDelay: opts.VolumeDelay,
	}
	s.diskCtx, s.diskStop = context.WithCancel(context.Background())
	s.cells = simcells.NewLifecycle(simcells.LifecycleConfig{
		Starter: opts.Cells, StartTimeout: opts.CellStartTimeout, Lock: &s.mu,
		AgentDelay: opts.AgentDelay, Now: opts.Now, Logger: s.log,
	})
	return s
}

// Start serves on a free port of 127.0.0.1 and returns the endpoint URL
// to give the SDK as BaseEndpoint.
func (s *Server) Start() (string, error) { return s.http.Start(s, "EC2 simulator", s.log) }

// URL is the endpoint Start returned, or "".
func (s *Server) URL() string { return s.http.URL() }

// Close stops serving and stops every cell still running, waiting for
// them. It is idempotent.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		if err := s.http.Stop(); err != nil {
			s.log.Warn("stopping EC2 simulator", "error", err)
		}
		s.stopDiskOps()
		s.cells.Close()
		if err := s.deleteDisks(); err != nil {
			s.log.Warn("deleting the volumes' disks", "error", err)
		}
		if err := s.closeIMDS(); err != nil {
			s.log.Warn("closing instance metadata", "error", err)
		}
		s.log.Info("EC2 simulator stopped")
	})
	return nil
}

// ServeHTTP answers one EC2 Query or ECR JSON request.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	requestID := newRequestID()
	w.Header().Set("X-Amzn-Requestid", requestID)
	if target := r.Header.Get("X-Amz-Target"); target != "" {
		s.serveECR(w, r, requestID, target)
		return
	}
	if r.Method != http.MethodPost {
		s.replyEC2Error(w, r, requestID, &apiError{Status: http.StatusMethodNotAllowed, Code: "UnsupportedHttpVerb", Message: "The simulator accepts POST only"})
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBody))
	if err != nil {
		s.replyEC2Error(w, r, requestID, clientError("MalformedQueryString", "reading request body: %v", err))
		return
	}
	values, err := url.ParseQuery(string(body))
	if err != nil {
		s.replyEC2Error(w, r, requestID, clientError("MalformedQueryString", "%v", err))
		return
	}
	f := form(values)
	op := f.get("Action")
	resp, apiErr := s.call(op, true, r, func() (response, error) { return s.dispatchEC2(op, f) })
	if apiErr != nil {
		s.log.Debug("EC2 call failed", "op", op, "code", apiErr.Code, "status", apiErr.Status, "request_id", requestID)
		s.replyEC2Error(w, r, requestID, apiErr)
		return
	}
	resp.setRequestID(requestID)
	s.log.Debug("EC2 call", "op", op, "request_id", requestID)
	s.reply(w, r, http.StatusOK, xmlContentType, encodeXML(resp))
}

const xmlContentType = "text/xml;charset=UTF-8"

func (s *Server) replyEC2Error(w http.ResponseWriter, r *http.Request, requestID string, e *apiError) {
	s.reply(w, r, e.Status, xmlContentType, ec2ErrorBody(requestID, e))
}

// reply writes an answer after the latency, gzip-compressed when the
// client accepts it (Go's transport asks for gzip and decompresses
// transparently).
//
// Both make a race in the SDK harmless: smithy-go's request body
// (safeWriteToReadCloser) answers WriteTo with io.EOF once the SDK has
// closed it, which it does as soon as the response arrives. A loopback
// server can answer before net/http's write loop has finished with the
// body; the write loop then fails with that EOF and closes the connection
// under the SDK, which is still reading the response ("use of closed
// network connection"). The latency lets the write loop finish first, and
// a compressed answer usually arrives whole in the transport's first read,
// so a closed connection no longer matters.
func (s *Server) reply(w http.ResponseWriter, r *http.Request, status int, contentType string, body []byte) {
	s.Delay()
	simhttp.Write(w, r, status, contentType, body)
}

func (s *Server) dispatchEC2(op string, f form) (response, error) {
	switch op {
	case "RunInstances":
		return s.runInstances(f)
	case "DescribeInstances":
		return s.describeInstances(f)
	case "TerminateInstances":
		return s.terminateInstances(f)
	case "DescribeInstanceStatus":
		return s.describeInstanceStatus(f)
	case "DescribeInstanceTypeOfferings":
		return s.describeInstanceTypeOfferings(f)
	case "DescribeSubnets":
		return s.describeSubnets(f)
	case "DescribeImages":
		return s.describeImages(f)
	case "DescribeAvailabilityZones":
		return s.describeAvailabilityZones(f)
	case "GetConsoleOutput":
		return s.getConsoleOutput(f)
	case "CreateVolume":
		return s.createVolume(f)
	case "DeleteVolume":
		return s.deleteVolume(f)
	case "DescribeVolumes":
		return s.describeVolumes(f)
	case "AttachVolume":
		return s.attachVolume(f)
	case "DetachVolume":
		return s.detachVolume(f)
	default:
		return nil, clientError(codeInvalidAction, "The action %s is not valid for this web service.", op)
	}
}

// call counts a call, applies authentication, the rate limit (to EC2
// calls) and injected faults, and runs handle under s.mu.
func (s *Server) call(op string, isEC2 bool, r *http.Request, handle func() (response, error)) (response, *apiError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	s.Count(op, now)
	if err := s.authenticate(r); err != nil {
		return nil, err
	}
	if isEC2 && !s.Allow(now) {
		return nil, &apiError{Status: http.StatusServiceUnavailable, Code: codeThrottle, Message: defaultThrottleMessage}
	}
	fault := s.TakeFault(op)
	if fault != nil && !fault.AfterEffect {
		return nil, faultError(fault)
	}
	resp, err := handle()
	if fault != nil {
		return nil, faultError(fault)
	}
	if err != nil {
		var ae *apiError
		if errors.As(err, &ae) {
			return nil, ae
		}
		return nil, &apiError{Status: http.StatusInternalServerError, Code: codeInternal, Message: err.Error()}
	}
	return resp, nil
}

// authenticate checks what a regional endpoint checks before anything
// else: a SigV4 Authorization header scoped to this region (and the access
// key, when Options.AccessKeyID is set). The signature is not verified.
func (s *Server) authenticate(r *http.Request) *apiError {
	auth := r.Header.Get("Authorization")
	cred, ok := strings.CutPrefix(auth, "AWS4-HMAC-SHA256 Credential=")
	if !ok {
		return &apiError{Status: http.StatusUnauthorized, Code: codeAuthFailure, Message: "AWS was not able to validate the provided access credentials"}
	}
	cred, _, _ = strings.Cut(cred, ",")
	parts := strings.Split(cred, "/")
	if len(parts) != 5 {
		return &apiError{Status: http.StatusUnauthorized, Code: codeAuthFailure, Message: "Credential should be scoped to a valid region."}
	}
	if parts[2] != s.opts.Region {
		return &apiError{Status: http.StatusUnauthorized, Code: codeAuthFailure, Message: fmt.Sprintf("Credential should be scoped to a valid region, not '%s'.", parts[2])}
	}
	if s.opts.AccessKeyID != "" && parts[0] != s.opts.AccessKeyID {
		return &apiError{Status: http.StatusUnauthorized, Code: codeAuthFailure, Message: "AWS was not able to validate the provided access credentials"}
	}
	return nil
}

func faultError(f *Fault) *apiError {
	return &apiError{Status: cmp.Or(f.HTTPStatus, http.StatusBadRequest), Code: f.Code, Message: cmp.Or(f.Message, f.Code)}
}

// ---- knobs ----

// SetBootDelay sets how long instances launched from now on stay pending
// at least.
func (s *Server) SetBootDelay(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.bootDelay = d
}

// SetAgentDelay sets how long after they run the instances launched from
// now on start their cell agents (Options.AgentDelay).
func (s *Server) SetAgentDelay(d time.Duration) { s.cells.SetAgentDelay(d) }

// SilenceAgents makes the next n instances launched never start their
// cell agents: they run, with an address and a console output that says
// why, and nothing answers there, as an instance whose image or boot
// recipe is broken. It needs a CellStarter that is an AgentStarter
// (LocalCells); without one an instance has no agent anyway.
func (s *Server) SilenceAgents(n int) { s.cells.Silence(n) }

// SetShutdownDelay sets how long instances shut down from now on stay
// shutting-down at least.
func (s *Server) SetShutdownDelay(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.shutdownDelay = d
}

// SetEventualConsistency makes instances launched from now on invisible to
// DescribeInstances, DescribeInstanceStatus and TerminateInstances for d
// after RunInstances (InvalidInstanceID.NotFound by ID), as EC2 may be
// right after a launch; and volumes created from now on invisible to the
// other volume calls for d after CreateVolume (InvalidVolume.NotFound).
func (s *Server) SetEventualConsistency(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.consistencyDelay = d
}

// LaunchErrorCodes are the refusals of RunInstances an account meets on a
// first real day, each as EC2 words it (errors-overview.html), for
// InjectLaunchError: the quotas, a type the zone does not sell, and the
// refusals for good.
var LaunchErrorCodes = map[string]string{
	"MaxSpotInstanceCountExceeded": "Max spot instance count exceeded",
	"VcpuLimitExceeded": "You have requested more vCPU capacity than your current vCPU limit of 32 allows for the instance bucket " +
		"that the specified instance type belongs to. Please visit http://aws.amazon.com/contact-us/ec2-request to request an adjustment to this limit.",
	"InstanceLimitExceeded": "Your quota allows for 0 more running instance(s). You requested at least 1.",
	"Unsupported": "Your requested instance type is not supported in your requested Availability Zone. " +
		"Please retry your request by not specifying an Availability Zone or choosing another one.",
	"AuthFailure.ServiceLinkedRoleCreationNotPermitted": "The provided credentials do not have permission to create the service-linked role for EC2 Spot Instances.",
	"InstanceCreditSpecification.NotSupported":          "The specified instance type does not support CPU credits.",
	"InvalidBlockDeviceMapping":                         "Volume of size 4GB is smaller than snapshot 'snap-0123456789abcdef0', expect size >= 8GB",
}

// InjectLaunchError makes the next n RunInstances calls fail with code (a
// key of LaunchErrorCodes, with its message; any other code with the code
// as message), status 400 as EC2 answers them.
func (s *Server) InjectLaunchError(code string, n int) {
	s.InjectFault(Fault{Operation: "RunInstances", Code: code, Message: cmp.Or(LaunchErrorCodes[code], code), Times: n})
}

// InjectThrottle answers the next n calls with RequestLimitExceeded (HTTP
// 503), which the SDK's retryer treats as throttling.
func (s *Server) InjectThrottle(n int) {
	s.InjectFault(Fault{Code: codeThrottle, Message: defaultThrottleMessage, HTTPStatus: http.StatusServiceUnavailable, Times: n})
}

// Inject5xx answers the next n calls with InternalError (HTTP 500).
func (s *Server) Inject5xx(n int) {
	s.InjectFault(Fault{Code: codeInternal, Message: defaultInternalMessage, HTTPStatus: http.StatusInternalServerError, Times: n})
}

// InjectInsufficientCapacity makes RunInstances of instanceType in zone
// fail with InsufficientInstanceCapacity (HTTP 500) until cleared. An
// empty instanceType or zone matches any.
func (s *Server) InjectInsufficientCapacity(instanceType, zone string) {
	s.insufficientCap.Inject(instanceType, zone, true)
}

// ClearInsufficientCapacity undoes InjectInsufficientCapacity with the
// same arguments.
func (s *Server) ClearInsufficientCapacity(instanceType, zone string) {
	s.insufficientCap.Clear(instanceType, zone)
}

// insufficient reports whether zone lacks capacity for instanceType.
func (s *Server) insufficient(instanceType, zone string) bool {
	_, short := s.insufficientCap.Short(instanceType, zone)
	return short
}

// Interrupt reclaims a spot instance as EC2 does: it goes to
// shutting-down with stateReason Server.SpotInstanceTermination, its cell
// is stopped, then it is terminated.
func (s *Server) Interrupt(instanceID string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	in := s.instances[instanceID]
	if in == nil {
		return fmt.Errorf("interrupting %s: no such instance", instanceID)
	}
	s.advance(in, now)
	switch {
	case !in.spot:
		return fmt.Errorf("interrupting %s: not a spot instance", instanceID)
	case in.state != statePending && in.state != stateRunning:
		return fmt.Errorf("interrupting %s: instance is %s", instanceID, in.state)
	}
	in.transitionReason = "Server.SpotInstanceTermination"
	s.shutDown(in, ReasonSpotTermination, now)
	return nil
}

// ScheduleMaintenance schedules a system-maintenance event on the
// instance, starting in a day, and returns its event ID.
func (s *Server) ScheduleMaintenance(instanceID string) (string, error) {
	now := s.now()
	return s.ScheduleEvent(instanceID, ScheduledEvent{
		Code: "system-maintenance", Description: "Scheduled system maintenance",
		NotBefore: now.Add(24 * time.Hour), NotAfter: now.Add(26 * time.Hour),
	})
}

// ScheduleEvent adds a scheduled event to a pending or running instance
// and returns its ID; DescribeInstanceStatus reports it.
func (s *Server) ScheduleEvent(instanceID string, ev ScheduledEvent) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	in := s.instances[instanceID]
	if in == nil {
		return "", fmt.Errorf("scheduling event on %s: no such instance", instanceID)
	}
	s.advance(in, s.now())
	if in.state != statePending && in.state != stateRunning {
		return "", fmt.Errorf("scheduling event on %s: instance is %s", instanceID, in.state)
	}
	if ev.Code == "" || ev.NotBefore.IsZero() {
		return "", fmt.Errorf("scheduling event on %s: code and not-before are required", instanceID)
	}
	ev.ID = "instance-event-" + randomHex(17)
	in.events = append(in.events, ev)
	s.log.Info("event scheduled", "instance", in.id, "cell", in.cellAttr(), "code", ev.Code, "event", ev.ID, "not_before", ev.NotBefore)
	return ev.ID, nil
}

// CompleteEvent marks a scheduled event as EC2 does once it is over: its
// description gets the prefix "[Completed]" (canceled: "[Canceled]").
func (s *Server) CompleteEvent(instanceID, eventID string, canceled bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	in := s.instances[instanceID]
	if in == nil {
		return fmt.Errorf("completing event %s: no instance %s", eventID, instanceID)
	}
	for i, ev := range in.events {
		if ev.ID == eventID {
			prefix := "[Completed] "
			if canceled {
				prefix = "[Canceled] "
			}
			in.events[i].Description = prefix + ev.Description
			return nil
		}
	}
	return fmt.Errorf("completing event %s: instance %s has no such event", eventID, instanceID)
}

// ---- inspection ----

// Instance returns what the server knows of an instance, visible or not.
func (s *Server) Instance(id string) (Instance, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	in := s.instances[id]
	if in == nil {
		return Instance{}, false
	}
	s.advance(in, s.now())
	return in.snapshot(), true
}

// Instances returns every instance ever launched, in launch order.
func (s *Server) Instances() []Instance {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	out := make([]Instance, 0, len(s.order))
	for _, in := range s.order {
		s.advance(in, now)
		out = append(out, in.snapshot())
	}
	return out
}

// randomHex returns n random lowercase hex digits.
func randomHex(n int) string {
	b := make([]byte, (n+1)/2)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)[:n]
}

func newRequestID() string {
	h := randomHex(32)
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}
