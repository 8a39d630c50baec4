package plugintest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kipcell/kip/pluginapi"
)

// Config tells the conformance suite how to configure the plugin under test.
type Config struct {
	// Plugin is a valid plugin configuration (JSON), as the plugin.config
	// section of kip's configuration; may be empty, which means {}.
	Plugin []byte
	// Invalid are configurations Configure must refuse with InvalidConfig
	// naming Key (never empty).
	Invalid []InvalidConfig
	// InstanceType is the type the suite launches; default: the first type
	// of the catalog.
	InstanceType string
	// ClusterID is the cluster the suite's instances belong to; default: a
	// generated "plugintest-<random>". Some cases also use ClusterID+"-b".
	ClusterID string
	// ReadyTimeout bounds the wait for a launched instance to be running
	// with an address; default 60s.
	ReadyTimeout time.Duration
	// UnknownInstanceID is an instance ID that does not exist in the cloud,
	// in the cloud's ID format; default "i-0000000000000dead".
	UnknownInstanceID string
	// CreateVolume creates a disk in zone that the plugin's first volume
	// driver (GetInfoResponse.VolumeDrivers[0]) attaches, and returns its
	// handle (a PersistentVolume's spec.csi.volumeHandle). The volume cases
	// attach such disks to the instances they launch, so a plugin that
	// reports pluginapi.CapabilityVolumes must give it: without it those
	// cases fail, saying so. Plugins without the capability leave it nil.
	CreateVolume func(ctx context.Context, zone string) (handle string, err error)
	// DeleteVolume, when set, deletes a disk CreateVolume made; the suite
	// calls it for each one at the end of the case that made it, after
	// terminating the case's instances (whose disks the cloud may still be
	// detaching: DeleteVolume waits for that itself).
	DeleteVolume func(ctx context.Context, handle string) error
	// OtherZone is a zone where CreateVolume can create a disk other than
	// the zone the suite's instances run in, for the wrong-zone case;
	// default: another zone of the catalog's offerings.
	OtherZone string
	// IncompatibleVolume, when set, creates a disk in zone that instances
	// of instanceType cannot take (Compute Engine's pd-standard for an N4
	// machine, Azure's Premium_LRS for a size without premium storage),
	// for the wrong-type case, which launches IncompatibleInstanceType.
	// A plugin reporting pluginapi.CapabilityVolumes whose cloud has no
	// such combination leaves it nil and says why in
	// NoIncompatibleVolume; with neither, the case fails saying so.
	IncompatibleVolume func(ctx context.Context, zone, instanceType string) (handle string, err error)
	// IncompatibleInstanceType is the type the wrong-type case launches;
	// default: InstanceType.
	IncompatibleInstanceType string
	// NoIncompatibleVolume says why the plugin's cloud has no disk an
	// instance type cannot take ("every EBS volume type attaches to every
	// Nitro instance type"): the wrong-type case is then skipped with it
	// (Run: t.Skip; Check: Result.Skipped), never counted as passed.
	NoIncompatibleVolume string
}

// InvalidConfig is a plugin configuration Configure must refuse.
type InvalidConfig struct {
	Config []byte
	// Key is the InvalidConfigError.Key Configure must name.
	Key string
}

// Result is the outcome of one conformance case; Err is nil when it passed.
type Result struct {
	Name string
	Err  error
	// Skipped says why the case did not run (Config.NoIncompatibleVolume);
	// Err is then nil, and the case neither passed nor failed.
	Skipped string
}

// String is "name: ok", "name: FAIL: <why>" or "name: skipped: <why>".
func (r Result) String() string {
	switch {
	case r.Err != nil:
		return r.Name + ": FAIL: " + r.Err.Error()
	case r.Skipped != "":
		return r.Name + ": skipped: " + r.Skipped
	}
	return r.Name + ": ok"
}

// notApplicable ends a case that does not apply to the plugin, for the
// reason its harness gave: Run skips it, Check reports it Skipped.
type notApplicable struct{ reason string }

func (n *notApplicable) Error() string { return "not applicable: " + n.reason }

// Names of the conformance cases, in the order they run.
const (
	CaseInfo                 = "info"
	CaseNotConfigured        = "not-configured"
	CaseConfig               = "config"
	CaseEmptyConfig          = "empty-config"
	CaseCatalog              = "catalog"
	CaseLaunch               = "launch"
	CaseStandbyLaunch        = "standby-launch"
	CaseIdempotentLaunch     = "idempotent-launch"
	CaseOwnInstances         = "own-instances"
	CaseTerminateTwice       = "terminate-twice"
	CaseLaunchAfterTerminate = "launch-after-terminate"
	CaseTerminateUnknown     = "terminate-unknown"
	CaseDescribeUnknown      = "describe-unknown"
	CaseInstanceIdentity     = "instance-identity"
	CaseUnsupportedFields    = "unsupported-fields"
	CaseConcurrentLaunches   = "concurrent-launches"
	CaseContextCancellation  = "context-cancellation"
	CaseDeadline             = "deadline"
	CaseErrorKinds           = "error-kinds"
	CaseVolumeAttach         = "volume-attach"
	CaseVolumeInUse          = "volume-in-use"
	CaseVolumeWrongZone      = "volume-wrong-zone"
	CaseVolumeWrongType      = "volume-wrong-type"
	CaseVolumeDetach         = "volume-detach"
	CaseVolumeRefusals       = "volume-refusals"
)

type conformanceCase struct {
	name string
	run  func(ctx context.Context, e *env) error
}

var cases = []conformanceCase{
	{CaseInfo, checkInfo},
	{CaseNotConfigured, checkNotConfigured},
	{CaseConfig, checkConfig},
	{CaseEmptyConfig, checkEmptyConfig},
	{CaseCatalog, checkCatalog},
	{CaseLaunch, checkLaunch},
	{CaseStandbyLaunch, checkStandbyLaunch},
	{CaseIdempotentLaunch, checkIdempotentLaunch},
	{CaseOwnInstances, checkOwnInstances},
	{CaseTerminateTwice, checkTerminateTwice},
	{CaseLaunchAfterTerminate, checkLaunchAfterTerminate},
	{CaseTerminateUnknown, checkTerminateUnknown},
	{CaseDescribeUnknown, checkDescribeUnknown},
	{CaseInstanceIdentity, checkInstanceIdentity},
	{CaseUnsupportedFields, checkUnsupportedFields},
	{CaseConcurrentLaunches, checkConcurrentLaunches},
	{CaseContextCancellation, checkContextCancellation},
	{CaseDeadline, checkDeadline},
	{CaseErrorKinds, checkErrorKinds},
	{CaseVolumeAttach, checkVolumeAttach},
	{CaseVolumeInUse, checkVolumeInUse},
	{CaseVolumeWrongZone, checkVolumeWrongZone},
	{CaseVolumeWrongType, checkVolumeWrongType},
	{CaseVolumeDetach, checkVolumeDetach},
	{CaseVolumeRefusals, checkVolumeRefusals},
}

// Cases returns the names of the conformance cases in the order they run.
func Cases() []string {
	names := make([]string, len(cases))
	for i, c := range cases {
		names[i] = c.name
	}
	return names
}

// Run runs every conformance case against the providers factory builds, each
// as a subtest of t, over a real in-process gRPC connection.
//
// Every Provider the factory returns must see the same cloud, as separate
// processes of a real plugin do: some cases configure two providers with
// different cluster IDs and check that each sees only its own instances.
func Run(t *testing.T, factory pluginapi.Factory, cfg Config) {
	t.Helper()
	s := newSuite(t.Context(), factory, cfg)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := s.run(t.Context(), c)
			var na *notApplicable
			if errors.As(err, &na) {
				t.Skip(na.reason)
			}
			if err != nil {
				t.Error(err)
			}
		})
	}
}

// Check runs the same cases as Run without a testing.T and returns one
// Result per case, in order, for a CLI or a test that inspects failures.
// The factory has Run's requirements.
func Check(ctx context.Context, factory pluginapi.Factory, cfg Config) []Result {
	s := newSuite(ctx, factory, cfg)
	results := make([]Result, 0, len(cases))
	for _, c := range cases {
		r := Result{Name: c.name, Err: s.run(ctx, c)}
		var na *notApplicable
		if errors.As(r.Err, &na) {
			r.Err, r.Skipped = nil, na.reason
		}
		results = append(results, r)
	}
	return results
}

// suite holds what every case shares.
type suite struct {
	factory  pluginapi.Factory
	cfg      Config
	runID    string
	log      *slog.Logger
	capacity pluginapi.CapacityType
	setupErr error // why no instance type could be chosen
}

func newSuite(ctx context.Context, factory pluginapi.Factory, cfg Config) *suite {
	s := &suite{factory: factory, cfg: cfg, runID: randomID(), log: slog.New(slog.DiscardHandler)}
	if s.cfg.ClusterID == "" {
		s.cfg.ClusterID = "plugintest-" + s.runID
	}
	if s.cfg.ReadyTimeout <= 0 {
		s.cfg.ReadyTimeout = 60 * time.Second
	}
	if s.cfg.UnknownInstanceID == "" {
		s.cfg.UnknownInstanceID = "i-0000000000000dead"
	}
	s.setupErr = s.chooseInstanceType(ctx)
	return s
}

// chooseInstanceType fills cfg.InstanceType from the catalog when unset
// and picks a capacity type it is offered in, preferring on-demand.
func (s *suite) chooseInstanceType(ctx context.Context) error {
	e := s.newEnv()
	defer e.close()
	c, err := e.configured(ctx, s.cfg.ClusterID)
	if err != nil {
		return err
	}
	resp, err := c.ListInstanceTypes(ctx, &pluginapi.ListInstanceTypesRequest{})
	if err != nil {
		return fmt.Errorf("listing instance types to choose one: %w", err)
	}
	if len(resp.InstanceTypes) == 0 {
		return errors.New("the catalog is empty, so there is no instance type to launch")
	}
	if s.cfg.InstanceType == "" {
		s.cfg.InstanceType = resp.InstanceTypes[0].Name
	}
	i := slices.IndexFunc(resp.InstanceTypes, func(t pluginapi.InstanceType) bool { return t.Name == s.cfg.InstanceType })
	if i < 0 {
		return fmt.Errorf("instance type %q is not in the catalog", s.cfg.InstanceType)
	}
	s.capacity = ""
	for _, o := range resp.InstanceTypes[i].Offerings {
		if o.Available && (s.capacity == "" || o.CapacityType == pluginapi.CapacityOnDemand) {
			s.capacity = o.CapacityType
		}
	}
	if s.capacity == "" {
		return fmt.Errorf("instance type %q has no available offering", s.cfg.InstanceType)
	}
	return nil
}

// run runs one case and cleans up after it, whatever happened.
func (s *suite) run(ctx context.Context, c conformanceCase) error {
	e := s.newEnv()
	e.caseName = c.name
	err := c.run(ctx, e)
	return errors.Join(err, e.cleanup(ctx))
}

// env is one case's world: its providers and what it launched.
type env struct {
	*suite
	caseName string

	mu       sync.Mutex
	clients  map[string]pluginapi.Client // configured, by cluster ID
	stops    []func()
	launched map[string]string // instance ID → cluster ID
	cells    map[string]string // cell ID → cluster ID
	nextCell int
	// abandoned: the case gave up on a launch in flight.
	abandoned bool
	// disks are the disks the case created (Config.CreateVolume).
	disks []string
}

func (s *suite) newEnv() *env {
	return &env{suite: s, clients: map[string]pluginapi.Client{}, launched: map[string]string{}, cells: map[string]string{}}
}

// fresh returns a new, unconfigured provider from the factory behind gRPC.
func (e *env) fresh() pluginapi.Client { return e.serve(e.factory(e.log)) }

// serve serves p behind gRPC until the case ends.
func (e *env) serve(p pluginapi.Provider) pluginapi.Client {
	c, stop := Serve(p)
	e.mu.Lock()
	e.stops = append(e.stops, stop)
	e.mu.Unlock()
	return c
}

// configured returns the case's provider for cluster, configured with the
// valid config.
func (e *env) configured(ctx context.Context, cluster string) (pluginapi.Client, error) {
	e.mu.Lock()
	c, ok := e.clients[cluster]
	e.mu.Unlock()
	if ok {
		return c, nil
	}
	c = e.fresh()
	if _, err := c.Configure(ctx, e.configureRequest(cluster, e.cfg.Plugin)); err != nil {
		return nil, fmt.Errorf("configuring the plugin for cluster %s with the valid config %s: %w", cluster, showConfig(e.cfg.Plugin), err)
	}
	e.mu.Lock()
	e.clients[cluster] = c
	e.mu.Unlock()
	return c, nil
}

func (e *env) configureRequest(cluster string, config []byte) *pluginapi.ConfigureRequest {
	return &pluginapi.ConfigureRequest{ClusterID: cluster, NodeName: e.nodeName(), Config: config}
}

func (e *env) nodeName() string { return "plugintest-node-" + e.runID }

// cell returns a new cell ID for cluster, unique to this run.
func (e *env) cell(cluster string) string {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.nextCell++
	id := fmt.Sprintf("pt-%s-%s-%d", e.runID, e.caseName, e.nextCell) // at most 63 characters of [a-z0-9-]
	e.cells[id] = cluster
	return id
}

func (e *env) launchRequest(cell string) *pluginapi.LaunchRequest {
	return &pluginapi.LaunchRequest{
		CellID:       cell,
		NodeName:     e.nodeName(),
		PodUID:       "uid-" + cell,
		PodNamespace: "plugintest",
		PodName:      cell,
		InstanceType: e.cfg.InstanceType,
		CapacityType: e.capacity,
		Tags:         map[string]string{extraTagKey: extraTagValue},
	}
}

const (
	extraTagKey   = "kipcell.io/plugintest"
	extraTagValue = "conformance"
)

// launch launches cell in cluster and remembers the instance for cleanup.
func (e *env) launch(ctx context.Context, cluster, cell string) (pluginapi.Instance, error) {
	return e.launchAs(ctx, cluster, cell, e.cfg.InstanceType)
}

// launchAs is launch of an instance of type typ.
func (e *env) launchAs(ctx context.Context, cluster, cell, typ string) (pluginapi.Instance, error) {
	if e.setupErr != nil {
		return pluginapi.Instance{}, fmt.Errorf("cannot launch: %w", e.setupErr)
	}
	c, err := e.configured(ctx, cluster)
	if err != nil {
		return pluginapi.Instance{}, err
	}
	req := e.launchRequest(cell)
	req.InstanceType = typ
	resp, err := c.Launch(ctx, req)
	if err != nil {
		return pluginapi.Instance{}, fmt.Errorf("launching cell %s (type %s, %s): %w", cell, typ, e.capacity, err)
	}
	e.remember(resp.Instance.ID, cluster)
	return resp.Instance, nil
}

func (e *env) remember(id, cluster string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.launched[id] = cluster
}

// waitRunning describes id until it is running with an address.
func (e *env) waitRunning(ctx context.Context, cluster, id string) (pluginapi.Instance, error) {
	c, err := e.configured(ctx, cluster)
	if err != nil {
		return pluginapi.Instance{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, e.cfg.ReadyTimeout)
	defer cancel()
	last := "never described"
	delay := 20 * time.Millisecond
	for {
		resp, err := c.Describe(ctx, &pluginapi.DescribeRequest{IDs: []string{id}})
		switch {
		case err != nil && ctx.Err() == nil && !errors.Is(err, context.DeadlineExceeded):
			// A DeadlineExceeded is the ReadyTimeout's: the plugin's side
			// of the call can see the deadline pass before this side's
			// context says so.
			return pluginapi.Instance{}, fmt.Errorf("describing instance %s: %w", id, err)
		case err == nil && len(resp.Instances) == 0:
			last = "absent from Describe"
		case err == nil:
			inst := resp.Instances[0]
			last = fmt.Sprintf("%s with %d addresses", inst.State, len(inst.Addresses))
			if inst.State == pluginapi.StateRunning && len(inst.Addresses) > 0 {
				return inst, nil
			}
			if inst.State == pluginapi.StateTerminating || inst.State == pluginapi.StateTerminated {
				return inst, fmt.Errorf("instance %s went %s (%s) instead of running", id, inst.State, inst.StateReason)
			}
		}
		select {
		case <-ctx.Done():
			return pluginapi.Instance{}, fmt.Errorf("instance %s did not reach running with an address within %s; last seen %s",
				id, e.cfg.ReadyTimeout, last)
		case <-time.After(delay):
		}
		delay = min(2*delay, time.Second)
	}
}

// list returns the instances List shows for cluster.
func (e *env) list(ctx context.Context, cluster string) ([]pluginapi.Instance, error) {
	c, err := e.configured(ctx, cluster)
	if err != nil {
		return nil, err
	}
	resp, err := c.List(ctx, &pluginapi.ListRequest{})
	if err != nil {
		return nil, fmt.Errorf("listing instances of cluster %s: %w", cluster, err)
	}
	return resp.Instances, nil
}

// lateArrival is how long cleanup waits before it looks for the cells
// again: a launch the case gave up on (a cancelled or expired context) may
// have left a request in flight that the cloud carries out after the
// first look, as a real cloud would.
const lateArrival = time.Second

// cleanup terminates every instance the case launched or that List shows
// for one of its cells, and stops its providers; then, after lateArrival,
// once more for the instances that showed up since. It uses a context of
// its own so that a case's cancelled context does not leave instances
// behind.
func (e *env) cleanup(parent context.Context) error {
	defer e.close()
	ctx, cancel := context.WithTimeout(context.WithoutCancel(parent), 2*time.Minute)
	defer cancel()
	first := e.terminateAll(ctx)
	e.mu.Lock()
	gaveUp := e.abandoned
	e.mu.Unlock()
	if !gaveUp {
		return errors.Join(first, e.deleteDisks(ctx))
	}
	select {
	case <-ctx.Done():
		return errors.Join(first, ctx.Err())
	case <-time.After(lateArrival):
	}
	// Fresh providers, whose List cannot answer from a cache of the
	// first pass.
	e.mu.Lock()
	e.clients = map[string]pluginapi.Client{}
	e.mu.Unlock()
	return errors.Join(first, e.terminateAll(ctx), e.deleteDisks(ctx))
}

// deleteDisks deletes the disks the case created, with Config.DeleteVolume
// if the harness gave one.
func (e *env) deleteDisks(ctx context.Context) error {
	e.mu.Lock()
	disks := e.disks
	e.disks = nil
	e.mu.Unlock()
	if e.cfg.DeleteVolume == nil {
		return nil
	}
	var errs []error
	for _, d := range disks {
		if err := e.cfg.DeleteVolume(ctx, d); err != nil {
			errs = append(errs, fmt.Errorf("cleaning up: deleting disk %s with Config.DeleteVolume: %w", d, err))
		}
	}
	return errors.Join(errs...)
}

// terminateAll is one pass of cleanup.
func (e *env) terminateAll(ctx context.Context) error {
	e.mu.Lock()
	byCluster := map[string]map[string]bool{}
	for id, cluster := range e.launched {
		if byCluster[cluster] == nil {
			byCluster[cluster] = map[string]bool{}
		}
		byCluster[cluster][id] = true
	}
	cellClusters := map[string]bool{}
	for _, cluster := range e.cells {
		cellClusters[cluster] = true
	}
	e.mu.Unlock()

	var errs []error
	for cluster := range cellClusters {
		insts, err := e.list(ctx, cluster)
		if err != nil {
			errs = append(errs, fmt.Errorf("cleaning up: %w", err))
			continue
		}
		for _, inst := range insts {
			e.mu.Lock()
			_, ours := e.cells[inst.CellID]
			e.mu.Unlock()
			if tag := inst.Tags[pluginapi.TagCluster]; ours && (tag == cluster || tag == "") {
				if byCluster[cluster] == nil {
					byCluster[cluster] = map[string]bool{}
				}
				byCluster[cluster][inst.ID] = true
			}
		}
	}
	for cluster, ids := range byCluster {
		c, err := e.configured(ctx, cluster)
		if err != nil {
			errs = append(errs, fmt.Errorf("cleaning up: %w", err))
			continue
		}
		for _, id := range sortedKeys(ids) {
			_, err := c.Terminate(ctx, &pluginapi.TerminateRequest{ID: id})
			if err := pluginapi.IgnoreNotFound(err); err != nil {
				errs = append(errs, fmt.Errorf("cleaning up: terminating instance %s: %w", id, err))
			}
		}
	}
	return errors.Join(errs...)
}

func (e *env) close() {
	e.mu.Lock()
	stops := e.stops
	e.stops = nil
	e.mu.Unlock()
	for _, stop := range stops {
		stop()
	}
}

// ---- cases ----

var capabilityName = regexp.MustCompile(`^[a-z0-9]+(-[a-z0-9]+)*$`)

func checkInfo(ctx context.Context, e *env) error {
	raw := e.factory(e.log)
	c, stop := Serve(raw)
	defer stop()
	// Before Configure, on purpose.
	info, err := c.GetInfo(ctx, &pluginapi.GetInfoRequest{})
	if err != nil {
		return fmt.Errorf("GetInfo before Configure failed: %w; it must work before Configure", err)
	}
	var errs []error
	if _, ok := pluginapi.CompatibleAPIVersion(info.APIVersions); !ok {
		errs = append(errs, fmt.Errorf("API versions %q include none compatible with %s", info.APIVersions, pluginapi.APIVersion))
	}
	seen := map[pluginapi.Capability]bool{}
	for _, cp := range info.Capabilities {
		if !capabilityName.MatchString(string(cp)) {
			errs = append(errs, fmt.Errorf("capability %q is not a lower-case dashed name such as %q", cp, pluginapi.CapabilityWatchEvents))
		}
		if seen[cp] {
			errs = append(errs, fmt.Errorf("capability %q is listed twice", cp))
		}
		seen[cp] = true
	}
	if _, ok := raw.(pluginapi.EventWatcher); info.Has(pluginapi.CapabilityWatchEvents) && !ok {
		errs = append(errs, fmt.Errorf("GetInfo reports %q but the provider does not implement pluginapi.EventWatcher", pluginapi.CapabilityWatchEvents))
	}
	if _, ok := raw.(pluginapi.RegistryAuthenticator); info.Has(pluginapi.CapabilityRegistryAuth) && !ok {
		errs = append(errs, fmt.Errorf("GetInfo reports %q but the provider does not implement pluginapi.RegistryAuthenticator", pluginapi.CapabilityRegistryAuth))
	}
	if _, ok := raw.(pluginapi.ConsoleOutputReader); info.Has(pluginapi.CapabilityConsoleOutput) && !ok {
		errs = append(errs, fmt.Errorf("GetInfo reports %q but the provider does not implement pluginapi.ConsoleOutputReader", pluginapi.CapabilityConsoleOutput))
	}
	if _, ok := raw.(pluginapi.InstanceIdentityVerifier); info.Has(pluginapi.CapabilityInstanceIdentity) && !ok {
		errs = append(errs, fmt.Errorf("GetInfo reports %q but the provider does not implement pluginapi.InstanceIdentityVerifier", pluginapi.CapabilityInstanceIdentity))
	}
	if _, ok := raw.(pluginapi.VolumeAttacher); info.Has(pluginapi.CapabilityVolumes) && !ok {
		errs = append(errs, fmt.Errorf("GetInfo reports %q but the provider does not implement pluginapi.VolumeAttacher", pluginapi.CapabilityVolumes))
	}
	if info.Has(pluginapi.CapabilityInterruptionEvents) && !info.Has(pluginapi.CapabilityWatchEvents) {
		errs = append(errs, fmt.Errorf("GetInfo reports %q without %q", pluginapi.CapabilityInterruptionEvents, pluginapi.CapabilityWatchEvents))
	}
	return errors.Join(errs...)
}

func checkConfig(ctx context.Context, e *env) error {
	var errs []error
	c := e.fresh()
	for i := 1; i <= 2; i++ {
		if _, err := c.Configure(ctx, e.configureRequest(e.cfg.ClusterID, e.cfg.Plugin)); err != nil {
			errs = append(errs, fmt.Errorf("calling Configure (call %d) with the valid config %s failed: %w; it must accept it, and again (Configure is idempotent)",
				i, showConfig(e.cfg.Plugin), err))
			break
		}
	}
	for _, inv := range e.cfg.Invalid {
		_, err := e.fresh().Configure(ctx, e.configureRequest(e.cfg.ClusterID, inv.Config))
		if err := wantInvalidConfig(err, inv.Key); err != nil {
			errs = append(errs, fmt.Errorf("calling Configure with the invalid config %s: %w", showConfig(inv.Config), err))
		}
	}
	_, err := e.fresh().Configure(ctx, e.configureRequest("", e.cfg.Plugin))
	if err := wantInvalidConfig(err, "clusterID"); err != nil {
		errs = append(errs, fmt.Errorf("calling Configure with an empty cluster ID: %w", err))
	}
	return errors.Join(errs...)
}

func checkCatalog(ctx context.Context, e *env) error {
	c, err := e.configured(ctx, e.cfg.ClusterID)
	if err != nil {
		return err
	}
	// The client validated the catalog (names, sizes, prices) already.
	resp, err := c.ListInstanceTypes(ctx, &pluginapi.ListInstanceTypesRequest{})
	if err != nil {
		return fmt.Errorf("ListInstanceTypes failed: %w", err)
	}
	if len(resp.InstanceTypes) == 0 {
		return errors.New("ListInstanceTypes returned an empty catalog; want at least one instance type")
	}
	available := false
	for _, t := range resp.InstanceTypes {
		for _, o := range t.Offerings {
			available = available || o.Available
		}
	}
	if !available {
		return fmt.Errorf("none of the %d instance types has an available offering", len(resp.InstanceTypes))
	}
	return e.setupErr
}

func checkLaunch(ctx context.Context, e *env) error {
	cluster := e.cfg.ClusterID
	cell := e.cell(cluster)
	inst, err := e.launch(ctx, cluster, cell)
	if err != nil {
		return err
	}
	var errs []error
	if inst.InstanceType != "" && inst.InstanceType != e.cfg.InstanceType {
		errs = append(errs, fmt.Errorf("launching cell %s as %s answered instance type %q", cell, e.cfg.InstanceType, inst.InstanceType))
	}
	running, err := e.waitRunning(ctx, cluster, inst.ID)
	if err != nil {
		return errors.Join(append(errs, fmt.Errorf("launching cell %s: %w", cell, err))...)
	}
	want := pluginapi.StandardTags(cluster, e.launchRequest(cell))
	for _, k := range sortedKeys(want) {
		if got, ok := running.Tags[k]; !ok || got != want[k] {
			errs = append(errs, fmt.Errorf("instance %s of cell %s has tag %s=%q (present: %v); want %q",
				inst.ID, cell, k, got, ok, want[k]))
		}
	}
	insts, err := e.list(ctx, cluster)
	if err != nil {
		return errors.Join(append(errs, err)...)
	}
	if !slices.ContainsFunc(insts, func(i pluginapi.Instance) bool { return i.ID == inst.ID }) {
		errs = append(errs, fmt.Errorf("List for cluster %s does not show instance %s of cell %s; it must show every instance of the cluster", cluster, inst.ID, cell))
	}
	return errors.Join(errs...)
}

// checkStandbyLaunch launches a standby cell of a warm pool, as the
// contract allows (LaunchRequest): no pod (empty PodUID, PodNamespace and
// PodName), the pool's tag (TagWarmPool). The instance runs and shows the
// pool's tag and an empty pod-uid tag.
func checkStandbyLaunch(ctx context.Context, e *env) error {
	if e.setupErr != nil {
		return fmt.Errorf("cannot launch: %w", e.setupErr)
	}
	cluster := e.cfg.ClusterID
	cell := e.cell(cluster)
	c, err := e.configured(ctx, cluster)
	if err != nil {
		return err
	}
	req := e.launchRequest(cell)
	req.PodUID, req.PodNamespace, req.PodName = "", "", ""
	req.Tags = map[string]string{pluginapi.TagWarmPool: "plugintest"}
	resp, err := c.Launch(ctx, req)
	if err != nil {
		return fmt.Errorf("launching standby cell %s (no pod): %w", cell, err)
	}
	e.remember(resp.Instance.ID, cluster)
	running, err := e.waitRunning(ctx, cluster, resp.Instance.ID)
	if err != nil {
		return fmt.Errorf("launching standby cell %s: %w", cell, err)
	}
	var errs []error
	want := pluginapi.StandardTags(cluster, req)
	for _, k := range sortedKeys(want) {
		if got := running.Tags[k]; got != want[k] {
			errs = append(errs, fmt.Errorf("standby instance %s of cell %s has tag %s=%q; want %q", running.ID, cell, k, got, want[k]))
		}
	}
	return errors.Join(errs...)
}

func checkIdempotentLaunch(ctx context.Context, e *env) error {
	cluster := e.cfg.ClusterID
	var errs []error

	// One after the other, as a host retrying after a timeout does.
	cell := e.cell(cluster)
	first, err := e.launch(ctx, cluster, cell)
	if err != nil {
		return err
	}
	second, err := e.launch(ctx, cluster, cell)
	if err != nil {
		return fmt.Errorf("launching cell %s a second time failed: %w; it must return the first instance", cell, err)
	}
	if err := e.oneInstance(ctx, cluster, cell, "twice", []string{first.ID, second.ID}); err != nil {
		errs = append(errs, err)
	}

	// At the same time, as a host and its restarted self might.
	const n = 4
	cell = e.cell(cluster)
	ids := make([]string, n)
	launchErrs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			inst, err := e.launch(ctx, cluster, cell)
			ids[i], launchErrs[i] = inst.ID, err
		}()
	}
	wg.Wait()
	if err := errors.Join(launchErrs...); err != nil {
		return errors.Join(append(errs, fmt.Errorf("launching cell %s %d times at once: %w", cell, n, err))...)
	}
	if err := e.oneInstance(ctx, cluster, cell, fmt.Sprintf("%d times at once", n), ids); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// oneInstance checks that the launches of cell, which answered ids, made one
// instance, both in their answers and in List.
func (e *env) oneInstance(ctx context.Context, cluster, cell, how string, ids []string) error {
	distinct := slices.Compact(slices.Sorted(slices.Values(ids)))
	if len(distinct) > 1 {
		return fmt.Errorf("launching cell %s %s created %d instances (%s); Launch must be idempotent on the cell ID",
			cell, how, len(distinct), strings.Join(distinct, ", "))
	}
	insts, err := e.list(ctx, cluster)
	if err != nil {
		return err
	}
	var listed []string
	for _, inst := range insts {
		if inst.CellID == cell {
			listed = append(listed, inst.ID)
		}
	}
	if len(listed) != 1 {
		return fmt.Errorf("after launching cell %s %s, List shows %d instances for it (%s); want exactly one, %s",
			cell, how, len(listed), strings.Join(listed, ", "), distinct[0])
	}
	return nil
}

func checkOwnInstances(ctx context.Context, e *env) error {
	a, b := e.cfg.ClusterID, e.cfg.ClusterID+"-b"
	instA, err := e.launch(ctx, a, e.cell(a))
	if err != nil {
		return fmt.Errorf("in cluster %s: %w", a, err)
	}
	instB, err := e.launch(ctx, b, e.cell(b))
	if err != nil {
		return fmt.Errorf("in cluster %s: %w", b, err)
	}
	var errs []error
	for _, side := range []struct {
		cluster, other string
		own, foreign   pluginapi.Instance
	}{{a, b, instA, instB}, {b, a, instB, instA}} {
		insts, err := e.list(ctx, side.cluster)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		sawOwn := false
		for _, inst := range insts {
			switch {
			case inst.ID == side.own.ID:
				sawOwn = true
			case inst.ID == side.foreign.ID:
				errs = append(errs, fmt.Errorf("List for cluster %s returned instance %s (cell %s) of cluster %s; List must return only the configured cluster's instances",
					side.cluster, inst.ID, inst.CellID, side.other))
			case inst.Tags[pluginapi.TagCluster] != side.cluster:
				errs = append(errs, fmt.Errorf("List for cluster %s returned instance %s (cell %s) tagged with cluster %q; List must return only the configured cluster's instances",
					side.cluster, inst.ID, inst.CellID, inst.Tags[pluginapi.TagCluster]))
			}
		}
		if !sawOwn {
			errs = append(errs, fmt.Errorf("List for cluster %s does not show its instance %s", side.cluster, side.own.ID))
		}
	}
	return errors.Join(errs...)
}

// launchAndTerminate launches an instance for a new cell of cluster and
// terminates it once, returning the client, the cell and the instance.
func (e *env) launchAndTerminate(ctx context.Context, cluster string) (pluginapi.Client, string, pluginapi.Instance, error) {
	cell := e.cell(cluster)
	inst, err := e.launch(ctx, cluster, cell)
	if err != nil {
		return nil, "", inst, err
	}
	c, err := e.configured(ctx, cluster)
	if err != nil {
		return nil, "", inst, err
	}
	if _, err := c.Terminate(ctx, &pluginapi.TerminateRequest{ID: inst.ID}); err != nil {
		return nil, "", inst, fmt.Errorf("terminating instance %s of cell %s failed: %w", inst.ID, cell, err)
	}
	return c, cell, inst, nil
}

func checkTerminateTwice(ctx context.Context, e *env) error {
	cluster := e.cfg.ClusterID
	c, _, inst, err := e.launchAndTerminate(ctx, cluster)
	if err != nil {
		return err
	}
	if _, err := c.Terminate(ctx, &pluginapi.TerminateRequest{ID: inst.ID}); err != nil && !pluginapi.IsNotFound(err) {
		return fmt.Errorf("terminating instance %s a second time failed with %w (%s); want success or NotFound", inst.ID, err, kindOf(err))
	}
	resp, err := c.Describe(ctx, &pluginapi.DescribeRequest{IDs: []string{inst.ID}})
	if err != nil {
		return fmt.Errorf("describing terminated instance %s: %w", inst.ID, err)
	}
	for _, got := range resp.Instances {
		if !ended(got.State) {
			return fmt.Errorf("after Terminate, Describe shows instance %s %s; want it absent, terminating or terminated", got.ID, got.State)
		}
	}
	insts, err := e.list(ctx, cluster)
	if err != nil {
		return err
	}
	for _, got := range insts {
		if got.ID == inst.ID && !ended(got.State) {
			return fmt.Errorf("after Terminate, List shows instance %s %s; want it absent, terminating or terminated", got.ID, got.State)
		}
	}
	return nil
}

// ended reports whether an instance in state s has ended or is ending.
func ended(s pluginapi.InstanceState) bool {
	return s == pluginapi.StateTerminating || s == pluginapi.StateTerminated
}

func checkTerminateUnknown(ctx context.Context, e *env) error {
	c, err := e.configured(ctx, e.cfg.ClusterID)
	if err != nil {
		return err
	}
	_, err = c.Terminate(ctx, &pluginapi.TerminateRequest{ID: e.cfg.UnknownInstanceID})
	if !pluginapi.IsNotFound(err) {
		return fmt.Errorf("terminating unknown instance %s answered %s (%s); want NotFound", e.cfg.UnknownInstanceID, errText(err), kindOf(err))
	}
	return nil
}

func checkDescribeUnknown(ctx context.Context, e *env) error {
	c, err := e.configured(ctx, e.cfg.ClusterID)
	if err != nil {
		return err
	}
	resp, err := c.Describe(ctx, &pluginapi.DescribeRequest{IDs: []string{e.cfg.UnknownInstanceID}})
	if err != nil {
		return fmt.Errorf("describing unknown instance %s failed with %w (%s); Describe must leave unknown IDs out of its answer, not fail",
			e.cfg.UnknownInstanceID, err, kindOf(err))
	}
	if len(resp.Instances) != 0 {
		return fmt.Errorf("describing unknown instance %s answered %d instances; want none", e.cfg.UnknownInstanceID, len(resp.Instances))
	}
	return nil
}

// checkInstanceIdentity: a plugin that offers instance-identity never
// lets a forged identity through: a garbage document for an unknown
// instance is refused (an error) or answered NotChecked. Without the
// capability there is nothing to check.
func checkInstanceIdentity(ctx context.Context, e *env) error {
	c, err := e.configured(ctx, e.cfg.ClusterID)
	if err != nil {
		return err
	}
	info, err := c.GetInfo(ctx, &pluginapi.GetInfoRequest{})
	if err != nil {
		return fmt.Errorf("GetInfo failed: %w", err)
	}
	if !info.Has(pluginapi.CapabilityInstanceIdentity) {
		return nil
	}
	for _, req := range []*pluginapi.VerifyInstanceIdentityRequest{
		{InstanceID: e.cfg.UnknownInstanceID},
		{InstanceID: e.cfg.UnknownInstanceID, Document: []byte(`{"instanceId":"` + e.cfg.UnknownInstanceID + `"}`), Signature: []byte("not a signature")},
	} {
		resp, err := c.VerifyInstanceIdentity(ctx, req)
		if err == nil && resp.NotChecked == "" {
			return fmt.Errorf("VerifyInstanceIdentity accepted a forged identity (document %q) for unknown instance %s", req.Document, req.InstanceID)
		}
	}
	return nil
}

func checkConcurrentLaunches(ctx context.Context, e *env) error {
	const n = 8
	cluster := e.cfg.ClusterID
	cells := make([]string, n)
	for i := range cells {
		cells[i] = e.cell(cluster)
	}
	insts := make([]pluginapi.Instance, n)
	errs := make([]error, 2*n)
	var wg sync.WaitGroup
	for i := range cells {
		wg.Add(1)
		go func() {
			defer wg.Done()
			insts[i], errs[i] = e.launch(ctx, cluster, cells[i])
			if errs[i] == nil {
				_, errs[n+i] = e.waitRunning(ctx, cluster, insts[i].ID)
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("launching %d cells at once: %w", n, err)
	}
	byID := map[string]string{}
	for i, inst := range insts {
		if other, dup := byID[inst.ID]; dup {
			return fmt.Errorf("launching cells %s and %s at once gave both instance %s; distinct cells need distinct instances", other, cells[i], inst.ID)
		}
		byID[inst.ID] = cells[i]
	}
	return nil
}

// checkContextCancellation: calls with a context cancelled before they
// start answer a context error (or success), not another kind, and
// launches with cancelled or expiring contexts leave at most one instance.
// How soon a call returns once its context ends mid-call is the deadline
// case's (checkDeadline), which watches the provider's side of the wire.
func checkContextCancellation(ctx context.Context, e *env) error {
	cluster := e.cfg.ClusterID
	c, err := e.configured(ctx, cluster)
	if err != nil {
		return err
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	cell := e.cell(cluster)
	calls := e.calls(c, nil, cluster, cell)
	const prompt = 5 * time.Second
	var errs []error
	for _, call := range calls {
		done := make(chan error, 1)
		go func() { done <- call.call(cancelled) }()
		select {
		case err := <-done:
			if !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
				errs = append(errs, fmt.Errorf("%s with a cancelled context answered %s (%s); want a context error", call.name, errText(err), kindOf(err)))
			}
		case <-time.After(prompt):
			errs = append(errs, fmt.Errorf("%s with a cancelled context did not return within %s", call.name, prompt))
		}
	}
	// The same calls straight to a provider, not through gRPC (whose client
	// gives up on a cancelled context by itself): the plugin must not block
	// on a cancelled context, and may answer only with success or a context
	// error.
	raw := e.factory(e.log)
	if _, err := raw.Configure(ctx, e.configureRequest(cluster, e.cfg.Plugin)); err != nil {
		return errors.Join(append(errs, fmt.Errorf("configuring a provider without gRPC: %w", err))...)
	}
	direct := slices.DeleteFunc(e.calls(raw, nil, cluster, cell), func(call contractCall) bool {
		return call.name == "ListInstanceTypes" || call.name == "Terminate"
	})
	for _, call := range direct {
		done := make(chan error, 1)
		go func() { done <- call.call(cancelled) }()
		select {
		case err := <-done:
			if err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
				errs = append(errs, fmt.Errorf("called directly with a cancelled context, %s answered %s (%s); want a context error", call.name, errText(err), kindOf(err)))
			}
		case <-time.After(prompt):
			errs = append(errs, fmt.Errorf("called directly with a cancelled context, %s did not return within %s", call.name, prompt))
		}
	}

	// A launch whose deadline passes in flight may or may not have created
	// the instance, but never more than one.
	short, cancelShort := context.WithTimeout(ctx, time.Millisecond)
	defer cancelShort()
	e.mu.Lock()
	e.abandoned = true
	e.mu.Unlock()
	if resp, err := c.Launch(short, e.launchRequest(cell)); err == nil {
		e.remember(resp.Instance.ID, cluster)
	}
	insts, err := e.list(ctx, cluster)
	if err != nil {
		return errors.Join(append(errs, err)...)
	}
	var ids []string
	for _, inst := range insts {
		if inst.CellID == cell {
			ids = append(ids, inst.ID)
		}
	}
	if len(ids) > 1 {
		errs = append(errs, fmt.Errorf("launching cell %s with cancelled or expiring contexts left %d instances (%s); want at most one",
			cell, len(ids), strings.Join(ids, ", ")))
	}
	return errors.Join(errs...)
}

func checkErrorKinds(ctx context.Context, e *env) error {
	var errs []error
	c, err := e.configured(ctx, e.cfg.ClusterID)
	if err != nil {
		return err
	}
	_, err = c.Terminate(ctx, &pluginapi.TerminateRequest{ID: e.cfg.UnknownInstanceID})
	var nf *pluginapi.NotFoundError
	if !errors.As(err, &nf) || pluginapi.IsUnreachable(err) {
		errs = append(errs, fmt.Errorf("over gRPC, terminating unknown instance %s answered %s (%s); want a NotFoundError", e.cfg.UnknownInstanceID, errText(err), kindOf(err)))
	}
	_, err = e.fresh().Configure(ctx, e.configureRequest("", e.cfg.Plugin))
	var ic *pluginapi.InvalidConfigError
	if !errors.As(err, &ic) || ic.Key != "clusterID" {
		errs = append(errs, fmt.Errorf("over gRPC, Configure with an empty cluster ID answered %s (%s); want an InvalidConfigError with key \"clusterID\"", errText(err), kindOf(err)))
	}
	for _, inv := range e.cfg.Invalid {
		_, err := e.fresh().Configure(ctx, e.configureRequest(e.cfg.ClusterID, inv.Config))
		var ic *pluginapi.InvalidConfigError
		switch {
		case !errors.As(err, &ic):
			errs = append(errs, fmt.Errorf("over gRPC, Configure with the invalid config %s answered %s (%s); want an InvalidConfigError",
				showConfig(inv.Config), errText(err), kindOf(err)))
		case ic.Key != inv.Key:
			errs = append(errs, fmt.Errorf("over gRPC, Configure with the invalid config %s answered InvalidConfig key %q; want key %q",
				showConfig(inv.Config), ic.Key, inv.Key))
		}
	}
	return errors.Join(errs...)
}

// ---- helpers ----

func wantInvalidConfig(err error, key string) error {
	var ic *pluginapi.InvalidConfigError
	switch {
	case err == nil:
		return fmt.Errorf("Configure succeeded; want InvalidConfig naming key %q", key)
	case !errors.As(err, &ic):
		return fmt.Errorf("Configure failed with %w (%s); want InvalidConfig naming key %q", err, kindOf(err), key)
	case ic.Key != key:
		return fmt.Errorf("Configure answered InvalidConfig naming key %q (%w); want key %q", ic.Key, err, key)
	}
	return nil
}

// kindOf names the error kind of err, for failure messages.
func kindOf(err error) string {
	var pe *pluginapi.PluginError
	switch {
	case err == nil:
		return "no error"
	case pluginapi.IsNotFound(err):
		return "NotFound"
	case pluginapi.IsInvalidConfig(err):
		return "InvalidConfig"
	case pluginapi.IsInsufficientCapacity(err):
		return "InsufficientCapacity"
	case pluginapi.IsQuotaExceeded(err):
		return "QuotaExceeded"
	case pluginapi.IsThrottled(err):
		return "Throttled"
	case pluginapi.IsUnsupported(err):
		return "Unsupported"
	case pluginapi.IsNotConfigured(err):
		return "NotConfigured"
	case pluginapi.IsVolumeConflict(err):
		return "VolumeConflict"
	case pluginapi.IsUnreachable(err):
		return "plugin unreachable"
	case pluginapi.IsTransient(err):
		return "Transient"
	case pluginapi.IsInvalidAnswer(err):
		return "invalid answer"
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return "context error"
	case errors.As(err, &pe):
		return "unclassified plugin error, code " + pe.Code.String()
	}
	return fmt.Sprintf("%T", err)
}

func showConfig(config []byte) string {
	if len(config) == 0 {
		return "(empty)"
	}
	return string(config)
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// randomID returns 6 random lower-case hex characters, so that repeated
// runs against a real cloud do not share cells or clusters.
func randomID() string {
	b := make([]byte, 3)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// errText is err's message, or "<nil>" for no error.
func errText(err error) string {
	if err == nil {
		return "<nil>"
	}
	return err.Error()
}
