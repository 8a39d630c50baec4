package fake

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/kipcell/kip/pluginapi"
)

// Provider is an in-memory pluginapi.Provider over a Store. It also
// implements pluginapi.EventWatcher, pluginapi.RegistryAuthenticator,
// pluginapi.ConsoleOutputReader, pluginapi.InstanceIdentityVerifier and
// pluginapi.VolumeAttacher, and records every call for tests.
type Provider struct {
	store        *Store
	name         string
	version      string
	capabilities []pluginapi.Capability
	types        []pluginapi.InstanceType
	bootDelay    time.Duration
	attachDelay  time.Duration
	clock        func() time.Time
	initErr      error // from loading the state file; every call but GetInfo returns it

	mu         sync.Mutex
	configured bool
	clusterID  string
	calls      []Call
	failures   map[string][]error
}

var (
	_ pluginapi.Provider                 = (*Provider)(nil)
	_ pluginapi.EventWatcher             = (*Provider)(nil)
	_ pluginapi.RegistryAuthenticator    = (*Provider)(nil)
	_ pluginapi.ConsoleOutputReader      = (*Provider)(nil)
	_ pluginapi.InstanceIdentityVerifier = (*Provider)(nil)
	_ pluginapi.VolumeAttacher           = (*Provider)(nil)
)

// ErrNotConfigured is returned (wrapped) by every call but GetInfo and
// Configure until Configure has succeeded. It is a
// pluginapi.NotConfiguredError, as the contract asks.
var ErrNotConfigured error = &pluginapi.NotConfiguredError{Message: "the fake provider is not configured: Configure must come first"}

// Call is one recorded call: the Provider method's name ("Launch") and a
// copy of the request it received (*pluginapi.LaunchRequest).
type Call struct {
	Method  string
	Request any
}

// Option configures a Provider.
type Option func(*options)

type options struct {
	store        *Store
	stateFile    string
	name         string
	version      string
	capabilities []pluginapi.Capability
	types        []pluginapi.InstanceType
	bootDelay    time.Duration
	attachDelay  time.Duration
	clock        func() time.Time
}

// WithStore makes the provider use store as its cloud. The default is a
// private Store of its own.
func WithStore(store *Store) Option { return func(o *options) { o.store = store } }

// WithStateFile makes the provider's Store persist its instances as JSON to
// path after every change, and loads the instances path holds when New runs,
// so a plugin process serving the fake that is killed and restarted finds
// the instances it launched. A load failure is returned by every call but
// GetInfo.
func WithStateFile(path string) Option { return func(o *options) { o.stateFile = path } }

// WithName sets the name GetInfo reports (default "fake").
func WithName(name string) Option { return func(o *options) { o.name = name } }

// WithVersion sets the version GetInfo reports (default "0.0.0-dev").
func WithVersion(version string) Option { return func(o *options) { o.version = version } }

// WithCapabilities sets the capabilities GetInfo reports and Launch honours,
// replacing the default (watch-events, registry-auth, console-output,
// instance-identity and volumes). With pluginapi.CapabilityVolumes, GetInfo
// reports VolumeDriver as its only volume driver.
func WithCapabilities(caps ...pluginapi.Capability) Option {
	return func(o *options) { o.capabilities = append([]pluginapi.Capability{}, caps...) }
}

// WithInstanceTypes sets the catalog, replacing DefaultInstanceTypes. An
// offering with Available false makes Launch answer InsufficientCapacity.
func WithInstanceTypes(types []pluginapi.InstanceType) Option {
	return func(o *options) { o.types = copyTypes(types) }
}

// WithBootDelay keeps a launched instance pending until d after its launch;
// then it is running with a private address. The default, 0, makes an
// instance running at once.
func WithBootDelay(d time.Duration) Option { return func(o *options) { o.bootDelay = d } }

// WithAttachDelay keeps an attached disk attaching, and a detached one
// detaching, until d after the AttachVolume or DetachVolume; then it is
// attached, or gone. The default, 0, attaches and detaches at once.
func WithAttachDelay(d time.Duration) Option { return func(o *options) { o.attachDelay = d } }

// WithClock sets the provider's clock (default time.Now), which stamps
// LaunchedAt and decides when a booting instance is running.
func WithClock(now func() time.Time) Option { return func(o *options) { o.clock = now } }

// DefaultZone is the zone of the default catalog.
const DefaultZone = "fake-a"

// DefaultInstanceTypes returns the default catalog: three amd64 types sold
// on demand in DefaultZone at known prices.
func DefaultInstanceTypes() []pluginapi.InstanceType {
	const gib = 1 << 30
	offer := func(price float64) []pluginapi.Offering {
		return []pluginapi.Offering{{
			Zone: DefaultZone, CapacityType: pluginapi.CapacityOnDemand,
			HourlyPrice: price, PriceKnown: true, Available: true,
		}}
	}
	return []pluginapi.InstanceType{
		{Name: "fake.small", MilliCPU: 2000, MemoryBytes: 4 * gib, Arch: pluginapi.ArchAMD64, Offerings: offer(0.05)},
		{Name: "fake.medium", MilliCPU: 4000, MemoryBytes: 8 * gib, Arch: pluginapi.ArchAMD64, Offerings: offer(0.10)},
		{Name: "fake.large", MilliCPU: 8000, MemoryBytes: 32 * gib, Arch: pluginapi.ArchAMD64, Offerings: offer(0.40)},
	}
}

// New returns a fake provider. It is not configured: every call but GetInfo
// fails until Configure succeeds.
func New(opts ...Option) *Provider {
	o := options{
		name:    "fake",
		version: "0.0.0-dev",
		capabilities: []pluginapi.Capability{pluginapi.CapabilityWatchEvents, pluginapi.CapabilityRegistryAuth, pluginapi.CapabilityConsoleOutput, pluginapi.CapabilityInstanceIdentity,
			pluginapi.CapabilityVolumes,
		},
		types: DefaultInstanceTypes(),
		clock: time.Now,
	}
	for _, opt := range opts {
		opt(&o)
	}
	if o.store == nil {
		o.store = NewStore()
	}
	p := &Provider{
		store:        o.store,
		name:         o.name,
		version:      o.version,
		capabilities: o.capabilities,
		types:        o.types,
		bootDelay:    o.bootDelay,
		attachDelay:  o.attachDelay,
		clock:        o.clock,
		failures:     map[string][]error{},
	}
	if o.stateFile != "" {
		p.initErr = o.store.attachStateFile(o.stateFile)
	}
	return p
}

// Store returns the provider's cloud.
func (p *Provider) Store() *Store { return p.store }

// Calls returns how many times method ("Launch") was called since New or
// Reset, including calls that failed.
func (p *Provider) Calls(method string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, c := range p.calls {
		if c.Method == method {
			n++
		}
	}
	return n
}

// Requests returns every recorded call in order.
func (p *Provider) Requests() []Call {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.calls)
}

// FailNext makes the next call of method ("Launch") return err without any
// effect. Several FailNext for one method fail that many calls, in order.
func (p *Provider) FailNext(method string, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.failures[method] = append(p.failures[method], err)
}

// Reset forgets the recorded calls and the pending FailNext errors. It keeps
// the configuration and does not touch the Store's instances.
func (p *Provider) Reset() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.calls = nil
	p.failures = map[string][]error{}
}

// begin records a call and returns the cluster to act for, or the error the
// call must return: an injected failure, ctx's error, a state-file load
// failure or "not configured".
func (p *Provider) begin(ctx context.Context, method string, req any, needConfig bool) (string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.calls = append(p.calls, Call{Method: method, Request: req})
	if errs := p.failures[method]; len(errs) > 0 {
		p.failures[method] = errs[1:]
		return "", errs[0]
	}
	if err := ctx.Err(); err != nil {
		return "", err
	}
	if !needConfig {
		return "", nil
	}
	if p.initErr != nil {
		return "", p.initErr
	}
	if !p.configured {
		return "", fmt.Errorf("calling %s before Configure: %w", method, ErrNotConfigured)
	}
	return p.clusterID, nil
}

// GetInfo reports the provider's name, version, capabilities, catalog
// source and, with pluginapi.CapabilityVolumes, VolumeDriver.
func (p *Provider) GetInfo(ctx context.Context, req *pluginapi.GetInfoRequest) (*pluginapi.GetInfoResponse, error) {
	if _, err := p.begin(ctx, "GetInfo", copyPtr(req), false); err != nil {
		return nil, err
	}
	return &pluginapi.GetInfoResponse{
		Name:          p.name,
		Version:       p.version,
		APIVersions:   []string{pluginapi.APIVersion},
		Capabilities:  slices.Clone(p.capabilities),
		ConfigSchema:  configSchema,
		Catalog:       pluginapi.CatalogInfo{Source: "fake"},
		VolumeDrivers: p.volumeDrivers(),
	}, nil
}

const configSchema = `{"type":"object","properties":{"fail":{"type":"string","description":"any value makes Configure fail with InvalidConfig naming this key"}}}`

// Configure accepts an empty config (nil, blank or null, which mean {}) or
// a JSON object. It refuses an empty cluster ID (InvalidConfig key
// "clusterID"), a config that is not a JSON object (key "plugin.config"),
// and a config with a "fail" key (key "fail"), so tests can provoke an
// invalid configuration.
func (p *Provider) Configure(ctx context.Context, req *pluginapi.ConfigureRequest) (*pluginapi.ConfigureResponse, error) {
	if _, err := p.begin(ctx, "Configure", copyPtr(req), false); err != nil {
		return nil, err
	}
	if p.initErr != nil {
		return nil, p.initErr
	}
	if req.ClusterID == "" {
		return nil, pluginapi.NewInvalidConfig("clusterID", "cluster ID is empty")
	}
	if raw := strings.TrimSpace(string(req.Config)); raw != "" && raw != "null" {
		var cfg map[string]json.RawMessage
		if err := json.Unmarshal(req.Config, &cfg); err != nil || cfg == nil {
			return nil, pluginapi.NewInvalidConfig(pluginapi.ConfigKey, "must be a JSON object")
		}
		if fail, ok := cfg["fail"]; ok {
			return nil, pluginapi.NewInvalidConfig("fail", "config asks Configure to fail with %s", fail)
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.configured = true
	p.clusterID = req.ClusterID
	return &pluginapi.ConfigureResponse{}, nil
}

// ListInstanceTypes returns the catalog.
func (p *Provider) ListInstanceTypes(ctx context.Context, req *pluginapi.ListInstanceTypesRequest) (*pluginapi.ListInstanceTypesResponse, error) {
	if _, err := p.begin(ctx, "ListInstanceTypes", copyPtr(req), true); err != nil {
		return nil, err
	}
	return &pluginapi.ListInstanceTypesResponse{InstanceTypes: copyTypes(p.types)}, nil
}

// Launch starts an instance for req.CellID, or returns the one the cluster
// already has for that cell, also once it has ended: a terminated cell's
// Launch answers its instance, terminated, and starts nothing. The
// instance carries pluginapi.StandardTags. Errors: InvalidConfig key
// "cellID" for an empty cell ID; InvalidConfig key "instanceType" for a
// type not in the catalog; Unsupported naming the field for spot, security
// groups, an instance profile or a volume size without the capability;
// InsufficientCapacity when no available offering matches the capacity type
// and zones.
func (p *Provider) Launch(ctx context.Context, req *pluginapi.LaunchRequest) (*pluginapi.LaunchResponse, error) {
	cluster, err := p.begin(ctx, "Launch", copyLaunch(req), true)
	if err != nil {
		return nil, err
	}
	if req.CellID == "" {
		return nil, pluginapi.NewInvalidConfig("cellID", "cell ID is empty")
	}
	capacity := req.CapacityType
	if capacity == "" {
		capacity = pluginapi.CapacityOnDemand
	}
	if err := p.checkFeatures(req, capacity); err != nil {
		return nil, fmt.Errorf("launching cell %s: %w", req.CellID, err)
	}
	zone, err := p.pickZone(req, capacity)
	if err != nil {
		return nil, fmt.Errorf("launching cell %s: %w", req.CellID, err)
	}

	now := p.clock()
	s := p.store
	s.mu.Lock()
	defer s.mu.Unlock()
	s.advanceLocked(now)
	if r := s.findCellLocked(cluster, req.CellID); r != nil {
		return &pluginapi.LaunchResponse{Instance: copyInstance(r.Instance)}, nil
	}
	if r := s.ended[cellKey(cluster, req.CellID)]; r != nil {
		return &pluginapi.LaunchResponse{Instance: copyInstance(r.Instance)}, nil
	}
	id, _ := s.newIDLocked()
	r := &record{
		ClusterID: cluster,
		ReadyAt:   now.Add(p.bootDelay),
		Instance: pluginapi.Instance{
			ID:           id,
			CellID:       req.CellID,
			InstanceType: req.InstanceType,
			CapacityType: capacity,
			Zone:         zone,
			State:        pluginapi.StatePending,
			Tags:         pluginapi.StandardTags(cluster, req),
			LaunchedAt:   now,
		},
	}
	s.addLocked(r)
	if p.bootDelay <= 0 {
		s.setStateLocked(r, pluginapi.StateRunning, "", now)
	} else {
		s.emitLocked(r, now)
	}
	if err := s.persistLocked(); err != nil {
		return nil, fmt.Errorf("launching cell %s: %w", req.CellID, err)
	}
	return &pluginapi.LaunchResponse{Instance: copyInstance(r.Instance)}, nil
}

func (p *Provider) checkFeatures(req *pluginapi.LaunchRequest, capacity pluginapi.CapacityType) error {
	if capacity != pluginapi.CapacityOnDemand && capacity != pluginapi.CapacitySpot {
		return pluginapi.NewInvalidConfig("capacityType", "capacity type %q is neither on-demand nor spot", capacity)
	}
	info := &pluginapi.GetInfoResponse{Name: p.name, Capabilities: p.capabilities}
	return info.CheckLaunch(req)
}

// pickZone returns the first acceptable zone with an available offering of
// the type and capacity type.
func (p *Provider) pickZone(req *pluginapi.LaunchRequest, capacity pluginapi.CapacityType) (string, error) {
	i := slices.IndexFunc(p.types, func(t pluginapi.InstanceType) bool { return t.Name == req.InstanceType })
	if i < 0 {
		return "", pluginapi.NewInvalidConfig("instanceType", "instance type %q is not in the catalog", req.InstanceType)
	}
	offers := p.types[i].Offerings
	zones := req.Zones
	if len(zones) == 0 {
		for _, o := range offers {
			zones = append(zones, o.Zone)
		}
	}
	for _, z := range zones {
		for _, o := range offers {
			if o.Zone == z && o.CapacityType == capacity && o.Available {
				return z, nil
			}
		}
	}
	zone := ""
	if len(req.Zones) > 0 {
		zone = req.Zones[0]
	}
	return "", pluginapi.NewInsufficientCapacity(req.InstanceType, zone, capacity, "no available offering in the requested zones")
}

// Describe returns the cluster's instances among req.IDs; unknown IDs, and
// instances of other clusters, are absent.
func (p *Provider) Describe(ctx context.Context, req *pluginapi.DescribeRequest) (*pluginapi.DescribeResponse, error) {
	cluster, err := p.begin(ctx, "Describe", &pluginapi.DescribeRequest{IDs: slices.Clone(req.IDs)}, true)
	if err != nil {
		return nil, err
	}
	if err := p.store.advance(p.clock()); err != nil {
		return nil, fmt.Errorf("describing instances: %w", err)
	}
	s := p.store
	s.mu.Lock()
	defer s.mu.Unlock()
	out := &pluginapi.DescribeResponse{}
	seen := map[string]bool{}
	for _, id := range req.IDs {
		r, ok := s.instances[id]
		if !ok || r.ClusterID != cluster || seen[id] {
			continue
		}
		seen[id] = true
		out.Instances = append(out.Instances, copyInstance(r.Instance))
	}
	return out, nil
}

// List returns every instance of the configured cluster, sorted by ID.
func (p *Provider) List(ctx context.Context, req *pluginapi.ListRequest) (*pluginapi.ListResponse, error) {
	cluster, err := p.begin(ctx, "List", copyPtr(req), true)
	if err != nil {
		return nil, err
	}
	if err := p.store.advance(p.clock()); err != nil {
		return nil, fmt.Errorf("listing instances: %w", err)
	}
	s := p.store
	s.mu.Lock()
	defer s.mu.Unlock()
	out := &pluginapi.ListResponse{}
	for _, r := range s.instances {
		if r.ClusterID == cluster {
			out.Instances = append(out.Instances, copyInstance(r.Instance))
		}
	}
	sortInstances(out.Instances)
	return out, nil
}

// Terminate ends an instance of the configured cluster at once: it is
// removed from the store (Describe and List no longer show it) and the
// answer shows it terminated. A later call, or a call for an ID the cluster
// does not have, returns NotFound. A later Launch of its cell answers it,
// terminated.
func (p *Provider) Terminate(ctx context.Context, req *pluginapi.TerminateRequest) (*pluginapi.TerminateResponse, error) {
	cluster, err := p.begin(ctx, "Terminate", copyPtr(req), true)
	if err != nil {
		return nil, err
	}
	now := p.clock()
	s := p.store
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.instances[req.ID]
	if !ok || r.ClusterID != cluster {
		return nil, pluginapi.NewNotFound("instance %s", req.ID)
	}
	s.removeLocked(r)
	r.Instance.Addresses = nil
	s.setStateLocked(r, pluginapi.StateTerminated, "terminated by request", now)
	s.ended[cellKey(r.ClusterID, r.Instance.CellID)] = r
	if err := s.persistLocked(); err != nil {
		return nil, fmt.Errorf("terminating instance %s: %w", req.ID, err)
	}
	return &pluginapi.TerminateResponse{Instance: copyInstance(r.Instance)}, nil
}

// WatchEvents sends a state-change event for every launch, boot, state
// change and termination of the configured cluster's instances until ctx
// ends, then returns ctx.Err(). It returns send's error if send fails.
func (p *Provider) WatchEvents(ctx context.Context, req *pluginapi.WatchEventsRequest, send func(*pluginapi.Event) error) error {
	cluster, err := p.begin(ctx, "WatchEvents", copyPtr(req), true)
	if err != nil {
		return err
	}
	sub := p.store.subscribe(cluster)
	defer p.store.unsubscribe(sub)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case e := <-sub.events:
			if err := send(&e); err != nil {
				return err
			}
		case <-tick.C:
			// Booting instances become running as time passes, not only when
			// someone asks.
			if p.bootDelay > 0 {
				if err := p.store.advance(p.clock()); err != nil {
					return fmt.Errorf("watching events: %w", err)
				}
			}
		}
	}
}

// RegistryServer is the registry RegistryAuth knows: images under it get
// credentials, others NotFound.
const RegistryServer = "registry.fake.invalid"

// RegistryAuth returns fixed credentials, valid for an hour, for an image
// under RegistryServer, and NotFound for any other image.
func (p *Provider) RegistryAuth(ctx context.Context, req *pluginapi.RegistryAuthRequest) (*pluginapi.RegistryAuthResponse, error) {
	if _, err := p.begin(ctx, "RegistryAuth", copyPtr(req), true); err != nil {
		return nil, err
	}
	if !strings.HasPrefix(req.Image, RegistryServer+"/") {
		return nil, pluginapi.NewNotFound("image %q is not in %s", req.Image, RegistryServer)
	}
	return &pluginapi.RegistryAuthResponse{
		Server:    RegistryServer,
		Username:  "fake",
		Password:  "fake-token",
		ExpiresAt: p.clock().Add(time.Hour),
	}, nil
}

// ConsoleOutput returns what Store.SetConsoleOutput set for the
// instance (empty by default), NotFound for an instance of another cluster
// or none.
func (p *Provider) ConsoleOutput(ctx context.Context, req *pluginapi.ConsoleOutputRequest) (*pluginapi.ConsoleOutputResponse, error) {
	cluster, err := p.begin(ctx, "ConsoleOutput", copyPtr(req), true)
	if err != nil {
		return nil, err
	}
	s := p.store
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.instances[req.InstanceID]
	if !ok || r.ClusterID != cluster {
		return nil, pluginapi.NewNotFound("instance %s", req.InstanceID)
	}
	return &pluginapi.ConsoleOutputResponse{Output: r.Console, Timestamp: p.clock()}, nil
}

// IdentityDocument is the instance identity the fake accepts for the
// instance id (VerifyInstanceIdentity); its signature is
// IdentitySignature(id).
func IdentityDocument(id string) []byte { return []byte(`{"instanceId":"` + id + `"}`) }

// IdentitySignature is the signature of IdentityDocument(id).
func IdentitySignature(id string) []byte { return []byte("fake-signature:" + id) }

// VerifyInstanceIdentity accepts IdentityDocument and IdentitySignature of
// the instance asked about, and an empty identity answered NotChecked (the
// fake cells have no metadata service); anything else is refused.
func (p *Provider) VerifyInstanceIdentity(ctx context.Context, req *pluginapi.VerifyInstanceIdentityRequest) (*pluginapi.VerifyInstanceIdentityResponse, error) {
	if _, err := p.begin(ctx, "VerifyInstanceIdentity", copyPtr(req), true); err != nil {
		return nil, err
	}
	if len(req.Document) == 0 && len(req.Signature) == 0 {
		return &pluginapi.VerifyInstanceIdentityResponse{NotChecked: "the fake has no identity for this instance"}, nil
	}
	if !bytes.Equal(req.Document, IdentityDocument(req.InstanceID)) || !bytes.Equal(req.Signature, IdentitySignature(req.InstanceID)) {
		return nil, fmt.Errorf("the instance identity is not instance %s's", req.InstanceID)
	}
	return &pluginapi.VerifyInstanceIdentityResponse{}, nil
}

// copyPtr returns a pointer to a shallow copy of *v, or nil.
func copyPtr[T any](v *T) *T {
	if v == nil {
		return nil
	}
	c := *v
	return &c
}

func copyLaunch(req *pluginapi.LaunchRequest) *pluginapi.LaunchRequest {
	if req == nil {
		return nil
	}
	c := *req
	c.Zones = slices.Clone(req.Zones)
	c.Bootstrap = slices.Clone(req.Bootstrap)
	c.SecurityGroups = slices.Clone(req.SecurityGroups)
	if req.Tags != nil {
		c.Tags = make(map[string]string, len(req.Tags))
		for k, v := range req.Tags {
			c.Tags[k] = v
		}
	}
	return &c
}

func copyTypes(types []pluginapi.InstanceType) []pluginapi.InstanceType {
	if types == nil {
		return nil
	}
	out := make([]pluginapi.InstanceType, len(types))
	for i, t := range types {
		out[i] = t
		out[i].Offerings = slices.Clone(t.Offerings)
	}
	return out
}
