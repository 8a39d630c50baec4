package plugintest_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kipcell/kip/pluginapi"
	"github.com/kipcell/kip/pluginapi/fake"
	"github.com/kipcell/kip/pluginapi/plugintest"
)

// fakeFactory returns a factory whose providers share one cloud, as the
// suite requires.
func fakeFactory(store *fake.Store, opts ...fake.Option) pluginapi.Factory {
	return func(*slog.Logger) pluginapi.Provider {
		return fake.New(append([]fake.Option{fake.WithStore(store)}, opts...)...)
	}
}

// fakeConfig is the suite's configuration for fakes on store: the
// harness creates and deletes disks in it.
func fakeConfig(store *fake.Store) plugintest.Config {
	return plugintest.Config{
		Plugin:  []byte(`{"region":"nowhere"}`),
		Invalid: []plugintest.InvalidConfig{{Config: []byte(`{"fail":"on purpose"}`), Key: "fail"}},
		CreateVolume: func(_ context.Context, zone string) (string, error) {
			return store.CreateVolume(zone), nil
		},
		DeleteVolume: func(_ context.Context, handle string) error { return store.DeleteVolume(handle) },
		OtherZone:    "fake-b",
		// fake.large cannot take a "pd-standard" disk, as an N4 machine
		// cannot.
		IncompatibleInstanceType: "fake.large",
		IncompatibleVolume: func(_ context.Context, zone, instanceType string) (string, error) {
			return store.CreateTypedVolume(zone, "pd-standard", instanceType), nil
		},
	}
}

// checkNothingLeft fails t if the suite left instances, attachments or
// disks in store.
func checkNothingLeft(t *testing.T, store *fake.Store) {
	t.Helper()
	if left := store.Instances(); len(left) != 0 {
		t.Errorf("the suite left %d instances behind: %v", len(left), left)
	}
	if left := store.VolumeAttachments(); len(left) != 0 {
		t.Errorf("the suite left %d volume attachments behind: %v", len(left), left)
	}
	if left := store.Volumes(); len(left) != 0 {
		t.Errorf("the suite left %d disks behind: %v", len(left), left)
	}
}

func TestFakeConforms(t *testing.T) {
	tests := map[string][]fake.Option{
		"instant boot": nil,
		"slow boot":    {fake.WithBootDelay(50 * time.Millisecond), fake.WithAttachDelay(50 * time.Millisecond)},
	}
	for name, opts := range tests {
		t.Run(name, func(t *testing.T) {
			store := fake.NewStore()
			plugintest.Run(t, fakeFactory(store, opts...), fakeConfig(store))
			checkNothingLeft(t, store)
		})
	}
}

// broken wraps fake but breaks two rules: Launch is not idempotent (each
// call launches a new instance, under a hidden cell ID it translates back),
// and List returns the instances of every cluster.
type broken struct {
	*fake.Provider
	n atomic.Int64
}

func (b *broken) Launch(ctx context.Context, req *pluginapi.LaunchRequest) (*pluginapi.LaunchResponse, error) {
	hidden := *req
	hidden.CellID = fmt.Sprintf("%s--%d", req.CellID, b.n.Add(1))
	resp, err := b.Provider.Launch(ctx, &hidden)
	if err != nil {
		return nil, err
	}
	unhide(&resp.Instance)
	return resp, nil
}

func (b *broken) Describe(ctx context.Context, req *pluginapi.DescribeRequest) (*pluginapi.DescribeResponse, error) {
	resp, err := b.Provider.Describe(ctx, req)
	if err != nil {
		return nil, err
	}
	for i := range resp.Instances {
		unhide(&resp.Instances[i])
	}
	return resp, nil
}

func (b *broken) List(ctx context.Context, req *pluginapi.ListRequest) (*pluginapi.ListResponse, error) {
	if _, err := b.Provider.List(ctx, req); err != nil {
		return nil, err
	}
	all := b.Store().Instances()
	for i := range all {
		unhide(&all[i])
	}
	return &pluginapi.ListResponse{Instances: all}, nil
}

func (b *broken) Terminate(ctx context.Context, req *pluginapi.TerminateRequest) (*pluginapi.TerminateResponse, error) {
	resp, err := b.Provider.Terminate(ctx, req)
	if err != nil {
		return nil, err
	}
	unhide(&resp.Instance)
	return resp, nil
}

func unhide(inst *pluginapi.Instance) {
	inst.CellID, _, _ = strings.Cut(inst.CellID, "--")
	if inst.Tags != nil {
		inst.Tags[pluginapi.TagCell] = inst.CellID
	}
}

func TestBrokenProviderFailsExactlyItsCases(t *testing.T) {
	store := fake.NewStore()
	factory := func(*slog.Logger) pluginapi.Provider { return &broken{Provider: fake.New(fake.WithStore(store))} }
	results := plugintest.Check(t.Context(), factory, fakeConfig(store))

	if got, want := len(results), len(plugintest.Cases()); got != want {
		t.Fatalf("Check returned %d results, want one per case (%d)", got, want)
	}
	wantFail := map[string]*regexp.Regexp{
		plugintest.CaseIdempotentLaunch: regexp.MustCompile(
			`^launching cell pt-[0-9a-f]{6}-idempotent-launch-1 twice created 2 instances \(i-\d+, i-\d+\); Launch must be idempotent on the cell ID`),
		plugintest.CaseOwnInstances: regexp.MustCompile(
			`^List for cluster plugintest-[0-9a-f]{6} returned instance i-\d+ \(cell pt-[0-9a-f]{6}-own-instances-2\) of cluster plugintest-[0-9a-f]{6}-b; List must return only the configured cluster's instances`),
		plugintest.CaseLaunchAfterTerminate: regexp.MustCompile(
			`^launching cell pt-[0-9a-f]{6}-launch-after-terminate-1 again after terminating its instance (i-\d+) answered instance i-\d+ \(running\); a cell ID names one instance for good: want i-\d+, terminating or terminated`),
	}
	for i, r := range results {
		if r.Name != plugintest.Cases()[i] {
			t.Errorf("result %d is for case %q, want %q", i, r.Name, plugintest.Cases()[i])
		}
		re, shouldFail := wantFail[r.Name]
		switch {
		case shouldFail && r.Err == nil:
			t.Errorf("case %s passed for a provider that breaks it", r.Name)
		case shouldFail && !re.MatchString(r.Err.Error()):
			t.Errorf("case %s failed with\n  %s\nwant a message matching\n  %s", r.Name, r.Err, re)
		case !shouldFail && r.Err != nil:
			t.Errorf("case %s failed, but the provider keeps that rule: %v", r.Name, r.Err)
		}
		t.Log(r)
	}
	checkNothingLeft(t, store)
}

// Each variant of the fake breaks one more rule; Check must fail exactly the
// cases that rule belongs to and say why.
func TestCheckFailsTheCasesOfEachBrokenRule(t *testing.T) {
	for _, tt := range brokenRules {
		t.Run(tt.name, func(t *testing.T) {
			store := fake.NewStore()
			cfg := fakeConfig(store)
			if tt.cfg != nil {
				tt.cfg(&cfg)
			}
			factory := fakeFactory(store, tt.opts...)
			if tt.wrap != nil {
				factory = func(log *slog.Logger) pluginapi.Provider {
					return tt.wrap(fakeFactory(store, tt.opts...)(log).(*fake.Provider))
				}
			}
			results := plugintest.Check(t.Context(), factory, cfg)
			for _, r := range results {
				want, shouldFail := tt.want[r.Name]
				switch {
				case shouldFail && r.Err == nil:
					t.Errorf("case %s passed, want it to fail with %q", r.Name, want)
				case shouldFail && !strings.Contains(r.Err.Error(), want):
					t.Errorf("case %s failed with %q, want it to say %q", r.Name, r.Err, want)
				case !shouldFail && r.Err != nil:
					t.Errorf("case %s failed, want it to pass: %v", r.Name, r.Err)
				}
			}
			checkNothingLeft(t, store)
		})
	}
}

// brokenRules are the variants of the fake TestCheckFailsTheCasesOfEachBrokenRule
// checks, each breaking one more rule.
var brokenRules = []struct {
	name string
	opts []fake.Option
	wrap func(*fake.Provider) pluginapi.Provider
	cfg  func(*plugintest.Config)
	want map[string]string // failing case → part of its message
}{
	{
		name: "malformed capability",
		opts: []fake.Option{fake.WithCapabilities("Spot Instances")},
		want: map[string]string{plugintest.CaseInfo: `capability "Spot Instances" is not a lower-case dashed name`},
	},
	{
		name: "watch-events without the interface",
		opts: []fake.Option{fake.WithCapabilities(pluginapi.CapabilityWatchEvents)},
		wrap: func(p *fake.Provider) pluginapi.Provider { return onlyProvider{p} },
		want: map[string]string{plugintest.CaseInfo: `reports "watch-events" but the provider does not implement pluginapi.EventWatcher`},
	},
	{
		name: "cancellation reported as a transient failure",
		wrap: func(p *fake.Provider) pluginapi.Provider { return ctxHider{p} },
		want: map[string]string{
			plugintest.CaseContextCancellation: "called directly with a cancelled context, List answered transient: request cancelled (Transient); want a context error",
		},
	},
	{
		name: "interruption events without watch events",
		opts: []fake.Option{fake.WithCapabilities(pluginapi.CapabilityInterruptionEvents)},
		want: map[string]string{plugintest.CaseInfo: `reports "interruption-events" without "watch-events"`},
	},
	{
		name: "invalid config names another key",
		cfg: func(c *plugintest.Config) {
			c.Invalid = []plugintest.InvalidConfig{{Config: []byte(`{"fail":"x"}`), Key: "region"}}
		},
		want: map[string]string{
			plugintest.CaseConfig:     `answered InvalidConfig naming key "fail"`,
			plugintest.CaseErrorKinds: `answered InvalidConfig key "fail"; want key "region"`,
		},
	},
	{
		name: "an invalid config the plugin accepts",
		cfg: func(c *plugintest.Config) {
			c.Invalid = []plugintest.InvalidConfig{{Config: []byte(`{"subnets":[]}`), Key: "subnets"}}
		},
		want: map[string]string{
			plugintest.CaseConfig:     `Configure succeeded; want InvalidConfig naming key "subnets"`,
			plugintest.CaseErrorKinds: `answered <nil> (no error); want an InvalidConfigError`,
		},
	},
	{
		name: "instances never boot",
		opts: []fake.Option{fake.WithBootDelay(time.Hour)},
		cfg:  func(c *plugintest.Config) { c.ReadyTimeout = 100 * time.Millisecond },
		want: map[string]string{
			plugintest.CaseLaunch:             "did not reach running with an address within 100ms; last seen pending with 0 addresses",
			plugintest.CaseStandbyLaunch:      "did not reach running",
			plugintest.CaseConcurrentLaunches: "did not reach running",
			plugintest.CaseVolumeAttach:       "did not reach running",
			plugintest.CaseVolumeInUse:        "did not reach running",
			plugintest.CaseVolumeWrongZone:    "did not reach running",
			plugintest.CaseVolumeWrongType:    "did not reach running",
			plugintest.CaseVolumeDetach:       "did not reach running",
			plugintest.CaseVolumeRefusals:     "did not reach running",
		},
	},
	{
		name: "unknown instance type",
		cfg:  func(c *plugintest.Config) { c.InstanceType = "fake.huge" },
		want: map[string]string{
			plugintest.CaseCatalog:              `instance type "fake.huge" is not in the catalog`,
			plugintest.CaseLaunch:               "cannot launch",
			plugintest.CaseStandbyLaunch:        "cannot launch",
			plugintest.CaseIdempotentLaunch:     "cannot launch",
			plugintest.CaseOwnInstances:         "cannot launch",
			plugintest.CaseTerminateTwice:       "cannot launch",
			plugintest.CaseLaunchAfterTerminate: "cannot launch",
			plugintest.CaseUnsupportedFields:    "cannot launch",
			plugintest.CaseConcurrentLaunches:   "cannot launch",
			plugintest.CaseVolumeAttach:         "cannot launch",
			plugintest.CaseVolumeInUse:          "cannot launch",
			plugintest.CaseVolumeWrongZone:      "cannot launch",
			plugintest.CaseVolumeWrongType:      "cannot launch",
			plugintest.CaseVolumeDetach:         "cannot launch",
			plugintest.CaseVolumeRefusals:       "cannot launch",
		},
	},
	{
		name: "volumes without a CreateVolume hook",
		cfg:  func(c *plugintest.Config) { c.CreateVolume = nil },
		want: map[string]string{
			plugintest.CaseVolumeAttach:    "must set plugintest.Config.CreateVolume",
			plugintest.CaseVolumeInUse:     "must set plugintest.Config.CreateVolume",
			plugintest.CaseVolumeWrongZone: "must set plugintest.Config.CreateVolume",
			plugintest.CaseVolumeDetach:    "must set plugintest.Config.CreateVolume",
			plugintest.CaseVolumeRefusals:  "must set plugintest.Config.CreateVolume",
		},
	},
	{
		name: "volumes without an IncompatibleVolume hook or a reason",
		cfg:  func(c *plugintest.Config) { c.IncompatibleVolume = nil },
		want: map[string]string{
			plugintest.CaseVolumeWrongType: "must set plugintest.Config.IncompatibleVolume",
		},
	},
	{
		name: "a disk of the wrong type attached",
		cfg: func(c *plugintest.Config) {
			// The plugin attaches what the hook says it cannot.
			create := c.CreateVolume
			c.IncompatibleVolume = func(ctx context.Context, zone, _ string) (string, error) { return create(ctx, zone) }
		},
		want: map[string]string{
			plugintest.CaseVolumeWrongType: "it succeeded; want VolumeConflict wrong-type",
		},
	},
	{
		name: "volumes without the interface",
		opts: []fake.Option{fake.WithCapabilities(pluginapi.CapabilityVolumes)},
		wrap: func(p *fake.Provider) pluginapi.Provider { return onlyProvider{p} },
		want: map[string]string{
			plugintest.CaseInfo:            `reports "volumes" but the provider does not implement pluginapi.VolumeAttacher`,
			plugintest.CaseVolumeAttach:    "unsupported: plugin does not implement AttachVolume",
			plugintest.CaseVolumeInUse:     "unsupported: plugin does not implement AttachVolume",
			plugintest.CaseVolumeWrongZone: "want VolumeConflict wrong-zone",
			plugintest.CaseVolumeWrongType: "want VolumeConflict wrong-type",
			plugintest.CaseVolumeDetach:    "unsupported: plugin does not implement AttachVolume",
			plugintest.CaseVolumeRefusals:  "want NotFound",
		},
	},
	{
		name: "conflicts as plain errors",
		wrap: func(p *fake.Provider) pluginapi.Provider { return plainConflicts{p} },
		want: map[string]string{
			plugintest.CaseVolumeInUse:     "(unclassified plugin error, code Unknown); want VolumeConflict in-use",
			plugintest.CaseVolumeWrongZone: "(unclassified plugin error, code Unknown); want VolumeConflict wrong-zone",
			plugintest.CaseVolumeWrongType: "(unclassified plugin error, code Unknown); want VolumeConflict wrong-type",
		},
	},
	{
		name: "attach forgets the device",
		wrap: func(p *fake.Provider) pluginapi.Provider { return forgetfulAttacher{p} },
		want: map[string]string{
			plugintest.CaseVolumeAttach: "twice answered devices {Serial:vol00000001 Path:}, then {Serial: Path:}; want the same device",
		},
	},
	{
		name: "disks never attach",
		opts: []fake.Option{fake.WithAttachDelay(time.Hour)},
		cfg:  func(c *plugintest.Config) { c.ReadyTimeout = 200 * time.Millisecond },
		want: map[string]string{
			plugintest.CaseVolumeAttach: "was not attached within 200ms; last seen attaching",
			plugintest.CaseVolumeInUse:  "was not attached within 200ms",
			plugintest.CaseVolumeDetach: "was not attached within 200ms",
		},
	},
	{
		name: "an empty config refused without a key",
		wrap: func(p *fake.Provider) pluginapi.Provider { return keylessConfig{p} },
		want: map[string]string{
			plugintest.CaseEmptyConfig: `Configure with the config {} answered InvalidConfig naming no key (invalid config: needs settings); every InvalidConfig names its key`,
		},
	},
}

// A plugin whose cloud has no disk an instance type cannot take says
// why, and the wrong-type case is skipped with that reason: neither
// passed nor failed.
func TestWrongTypeCaseSkippedWithTheReasonGiven(t *testing.T) {
	store := fake.NewStore()
	cfg := fakeConfig(store)
	cfg.IncompatibleVolume = nil
	cfg.NoIncompatibleVolume = "every disk of this cloud attaches to every type"
	for _, r := range plugintest.Check(t.Context(), fakeFactory(store), cfg) {
		switch {
		case r.Name == plugintest.CaseVolumeWrongType && (r.Err != nil || r.Skipped != cfg.NoIncompatibleVolume):
			t.Errorf("case %s = %v, skipped %q; want skipped with %q", r.Name, r.Err, r.Skipped, cfg.NoIncompatibleVolume)
		case r.Name != plugintest.CaseVolumeWrongType && (r.Err != nil || r.Skipped != ""):
			t.Errorf("case %s = %v, skipped %q; want it to pass", r.Name, r.Err, r.Skipped)
		}
	}
	if got, want := (plugintest.Result{Name: "volume-wrong-type", Skipped: "none"}).String(), "volume-wrong-type: skipped: none"; got != want {
		t.Errorf("a skipped Result's String() = %q, want %q", got, want)
	}
	checkNothingLeft(t, store)
}

func TestResultString(t *testing.T) {
	ok := plugintest.Result{Name: "launch"}
	bad := plugintest.Result{Name: "launch", Err: errors.New("instance i-1 never ran")}
	if ok.String() != "launch: ok" || bad.String() != "launch: FAIL: instance i-1 never ran" {
		t.Errorf("Result strings = %q, %q", ok, bad)
	}
}

// The harness carries error kinds, validation and streams over real gRPC.
func TestServeCrossesTheWire(t *testing.T) {
	p := fake.New()
	c := plugintest.Client(t, p)
	ctx := t.Context()

	if _, err := c.List(ctx, &pluginapi.ListRequest{}); !pluginapi.IsNotConfigured(err) || !strings.Contains(err.Error(), "not configured") {
		t.Errorf("List before Configure over gRPC = %v, want a NotConfigured error", err)
	}
	if _, err := c.Configure(ctx, &pluginapi.ConfigureRequest{ClusterID: "cl"}); err != nil {
		t.Fatal(err)
	}
	p.FailNext("Launch", fmt.Errorf("launching cell c-1: %w", pluginapi.NewThrottled(2*time.Second, "slow down")))
	_, err := c.Launch(ctx, &pluginapi.LaunchRequest{CellID: "c-1", InstanceType: "fake.small"})
	var th *pluginapi.ThrottledError
	if !errors.As(err, &th) || th.RetryAfter != 2*time.Second || !strings.HasPrefix(err.Error(), "launching cell c-1: throttled") {
		t.Errorf("an injected Throttled over gRPC = %v, want ThrottledError with RetryAfter 2s and the wrapping text", err)
	}

	events := make(chan *pluginapi.Event, 8)
	watchCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		_ = c.WatchEvents(watchCtx, &pluginapi.WatchEventsRequest{}, func(e *pluginapi.Event) error { events <- e; return nil })
	}()
	// Poke a probe instance until its event arrives: then the stream is up.
	probe, err := c.Launch(ctx, &pluginapi.LaunchRequest{CellID: "probe", InstanceType: "fake.small"})
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.After(5 * time.Second)
	for up := false; !up; {
		if err := p.Store().SetState(probe.Instance.ID, pluginapi.StateRunning, "probe"); err != nil {
			t.Fatal(err)
		}
		select {
		case <-events:
			up = true
		case <-time.After(10 * time.Millisecond):
		case <-deadline:
			t.Fatal("WatchEvents over gRPC delivered nothing within 5s")
		}
	}
	l, err := c.Launch(ctx, &pluginapi.LaunchRequest{CellID: "c-1", InstanceType: "fake.small"})
	if err != nil {
		t.Fatal(err)
	}
	for {
		select {
		case e := <-events:
			if e.InstanceID == probe.Instance.ID {
				continue
			}
			if e.InstanceID != l.Instance.ID || e.CellID != "c-1" || e.State != pluginapi.StateRunning || e.Type != pluginapi.EventStateChange {
				t.Errorf("event over gRPC = %+v, want a state change of %s (c-1) to running", e, l.Instance.ID)
			}
			return
		case <-deadline:
			t.Fatal("no event for the launch over gRPC within 5s")
		}
	}
}

// keylessConfig refuses the empty configuration {} with an InvalidConfig
// that names no key.
type keylessConfig struct{ *fake.Provider }

func (p keylessConfig) Configure(ctx context.Context, req *pluginapi.ConfigureRequest) (*pluginapi.ConfigureResponse, error) {
	if string(req.Config) == "{}" {
		return nil, pluginapi.NewInvalidConfig("", "needs settings")
	}
	return p.Provider.Configure(ctx, req)
}

// sleepy takes 300 ms over every call, whatever its context says.
type sleepy struct{ *fake.Provider }

const sleepyDelay = 300 * time.Millisecond

func (p sleepy) GetInfo(ctx context.Context, req *pluginapi.GetInfoRequest) (*pluginapi.GetInfoResponse, error) {
	time.Sleep(sleepyDelay)
	return p.Provider.GetInfo(ctx, req)
}

func (p sleepy) Configure(ctx context.Context, req *pluginapi.ConfigureRequest) (*pluginapi.ConfigureResponse, error) {
	time.Sleep(sleepyDelay)
	return p.Provider.Configure(context.WithoutCancel(ctx), req)
}

func (p sleepy) ListInstanceTypes(ctx context.Context, req *pluginapi.ListInstanceTypesRequest) (*pluginapi.ListInstanceTypesResponse, error) {
	time.Sleep(sleepyDelay)
	return p.Provider.ListInstanceTypes(context.WithoutCancel(ctx), req)
}

func (p sleepy) Launch(ctx context.Context, req *pluginapi.LaunchRequest) (*pluginapi.LaunchResponse, error) {
	time.Sleep(sleepyDelay)
	return p.Provider.Launch(context.WithoutCancel(ctx), req)
}

func (p sleepy) Describe(ctx context.Context, req *pluginapi.DescribeRequest) (*pluginapi.DescribeResponse, error) {
	time.Sleep(sleepyDelay)
	return p.Provider.Describe(context.WithoutCancel(ctx), req)
}

func (p sleepy) List(ctx context.Context, req *pluginapi.ListRequest) (*pluginapi.ListResponse, error) {
	time.Sleep(sleepyDelay)
	return p.Provider.List(context.WithoutCancel(ctx), req)
}

func (p sleepy) Terminate(ctx context.Context, req *pluginapi.TerminateRequest) (*pluginapi.TerminateResponse, error) {
	time.Sleep(sleepyDelay)
	return p.Provider.Terminate(context.WithoutCancel(ctx), req)
}

func (p sleepy) RegistryAuth(ctx context.Context, req *pluginapi.RegistryAuthRequest) (*pluginapi.RegistryAuthResponse, error) {
	time.Sleep(sleepyDelay)
	return p.Provider.RegistryAuth(context.WithoutCancel(ctx), req)
}

// The other cases pass a plugin that ignores its context; the deadline
// case fails it, naming the call and by how much it outlived its deadline.
func TestDeadlineCaseFailsAProviderThatIgnoresItsContext(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		wrap func(*fake.Provider) pluginapi.Provider
		want *regexp.Regexp // nil: every case passes
	}{
		{name: "well-behaved", wrap: func(p *fake.Provider) pluginapi.Provider { return p }},
		{
			name: "sleeps 300ms ignoring ctx",
			wrap: func(p *fake.Provider) pluginapi.Provider { return sleepy{p} },
			want: regexp.MustCompile(`(?m)^ListInstanceTypes outlived its 50ms deadline by (2[5-9]\d|[3-9]\d\d)ms; a call must return promptly \(within 200ms\) once its context is done$`),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			store := fake.NewStore()
			factory := func(log *slog.Logger) pluginapi.Provider { return tt.wrap(fakeFactory(store)(log).(*fake.Provider)) }
			for _, r := range plugintest.Check(t.Context(), factory, fakeConfig(store)) {
				switch {
				case r.Name == plugintest.CaseDeadline && tt.want != nil && r.Err == nil:
					t.Errorf("case %s passed, want it to fail with %s", r.Name, tt.want)
				case r.Name == plugintest.CaseDeadline && tt.want != nil && !tt.want.MatchString(r.Err.Error()):
					t.Errorf("case %s failed with\n  %s\nwant a line matching\n  %s", r.Name, r.Err, tt.want)
				case (r.Name != plugintest.CaseDeadline || tt.want == nil) && r.Err != nil:
					t.Errorf("case %s failed, want it to pass: %v", r.Name, r.Err)
				}
				if r.Name == plugintest.CaseDeadline {
					t.Log(r)
				}
			}
			checkNothingLeft(t, store)
		})
	}
}

// onlyProvider hides the optional interfaces of the provider it wraps.
type onlyProvider struct{ pluginapi.Provider }

// ctxHider turns a cancelled context in List into a Transient error.
type ctxHider struct{ *fake.Provider }

func (p ctxHider) List(ctx context.Context, req *pluginapi.ListRequest) (*pluginapi.ListResponse, error) {
	if ctx.Err() != nil {
		return nil, pluginapi.NewTransient("request cancelled")
	}
	return p.Provider.List(ctx, req)
}

// plainConflicts turns the VolumeConflict errors of AttachVolume into
// errors of no kind.
type plainConflicts struct{ *fake.Provider }

func (p plainConflicts) AttachVolume(ctx context.Context, req *pluginapi.AttachVolumeRequest) (*pluginapi.AttachVolumeResponse, error) {
	resp, err := p.Provider.AttachVolume(ctx, req)
	if pluginapi.IsVolumeConflict(err) {
		return nil, errors.New(err.Error())
	}
	return resp, err
}

// forgetfulAttacher answers an attachment without its device when the disk
// is attached already.
type forgetfulAttacher struct{ *fake.Provider }

func (p forgetfulAttacher) AttachVolume(ctx context.Context, req *pluginapi.AttachVolumeRequest) (*pluginapi.AttachVolumeResponse, error) {
	before := p.Store().VolumeAttachments()
	resp, err := p.Provider.AttachVolume(ctx, req)
	if err == nil && slices.ContainsFunc(before, func(a pluginapi.VolumeAttachment) bool { return a.VolumeHandle == req.VolumeHandle }) {
		resp.Attachment.Device = pluginapi.VolumeDevice{}
		resp.Attachment.State = pluginapi.AttachmentAttaching
	}
	return resp, err
}

// invalidLauncher answers Launch with an instance of another cell.
type invalidLauncher struct{ *fake.Provider }

func (p invalidLauncher) Launch(ctx context.Context, req *pluginapi.LaunchRequest) (*pluginapi.LaunchResponse, error) {
	other := *req
	other.CellID = "someone-else"
	return p.Provider.Launch(ctx, &other)
}

func TestServeRejectsInvalidAnswers(t *testing.T) {
	c := plugintest.Client(t, invalidLauncher{fake.New()})
	ctx := t.Context()
	if _, err := c.Configure(ctx, &pluginapi.ConfigureRequest{ClusterID: "cl"}); err != nil {
		t.Fatal(err)
	}
	_, err := c.Launch(ctx, &pluginapi.LaunchRequest{CellID: "c-1", InstanceType: "fake.small"})
	if !pluginapi.IsInvalidAnswer(err) || !strings.Contains(err.Error(), `not the requested "c-1"`) {
		t.Errorf("Launch answering another cell = %v, want an invalid answer naming the cell", err)
	}
}

// A provider without the optional interfaces answers Unsupported for them.
func TestServeOptionalCallsUnsupported(t *testing.T) {
	c := plugintest.Client(t, onlyProvider{fake.New()})
	ctx := t.Context()
	if _, err := c.Configure(ctx, &pluginapi.ConfigureRequest{ClusterID: "cl"}); err != nil {
		t.Fatal(err)
	}
	err := c.WatchEvents(ctx, &pluginapi.WatchEventsRequest{}, func(*pluginapi.Event) error { return nil })
	if !pluginapi.IsUnsupported(err) {
		t.Errorf("WatchEvents of a provider without it = %v, want Unsupported", err)
	}
	if _, err := c.RegistryAuth(ctx, &pluginapi.RegistryAuthRequest{Image: "x"}); !pluginapi.IsUnsupported(err) {
		t.Errorf("RegistryAuth of a provider without it = %v, want Unsupported", err)
	}
}

func TestCasesAreUniqueAndOrdered(t *testing.T) {
	names := plugintest.Cases()
	if len(names) < 10 || names[0] != plugintest.CaseInfo {
		t.Fatalf("Cases() = %v, want the info case first and every case", names)
	}
	sorted := slices.Clone(names)
	slices.Sort(sorted)
	if len(slices.Compact(sorted)) != len(names) {
		t.Errorf("Cases() = %v has duplicates", names)
	}
}

// The SDK's server enforces what it can of the contract before the
// provider sees a call, so every Go plugin keeps those rules.
func TestServeEnforcesTheContract(t *testing.T) {
	p := fake.New()
	c := plugintest.Client(t, p)
	ctx := t.Context()

	before := map[string]func() error{
		"ListInstanceTypes": func() error { _, err := c.ListInstanceTypes(ctx, &pluginapi.ListInstanceTypesRequest{}); return err },
		"Launch": func() error {
			_, err := c.Launch(ctx, &pluginapi.LaunchRequest{CellID: "c-1", InstanceType: "fake.small"})
			return err
		},
		"Describe":  func() error { _, err := c.Describe(ctx, &pluginapi.DescribeRequest{IDs: []string{"i-1"}}); return err },
		"List":      func() error { _, err := c.List(ctx, &pluginapi.ListRequest{}); return err },
		"Terminate": func() error { _, err := c.Terminate(ctx, &pluginapi.TerminateRequest{ID: "i-1"}); return err },
		"WatchEvents": func() error {
			return c.WatchEvents(ctx, &pluginapi.WatchEventsRequest{}, func(*pluginapi.Event) error { return nil })
		},
		"RegistryAuth": func() error { _, err := c.RegistryAuth(ctx, &pluginapi.RegistryAuthRequest{Image: "x"}); return err },
	}
	for name, call := range before {
		if err := call(); !pluginapi.IsNotConfigured(err) || !strings.Contains(err.Error(), name+" called before a successful Configure") {
			t.Errorf("%s before Configure = %v, want NotConfigured naming the call", name, err)
		}
		if n := p.Calls(name); n != 0 {
			t.Errorf("%s before Configure reached the provider %d times, want never", name, n)
		}
	}

	configs := []struct {
		name   string
		req    pluginapi.ConfigureRequest
		key    string // "" for success
		passed string // the Config the provider got
	}{
		{name: "empty cluster ID", req: pluginapi.ConfigureRequest{Config: []byte(`{}`)}, key: "clusterID"},
		{name: "a string", req: pluginapi.ConfigureRequest{ClusterID: "cl", Config: []byte(`"abc"`)}, key: "plugin.config"},
		{name: "a list", req: pluginapi.ConfigureRequest{ClusterID: "cl", Config: []byte(`[{"a":1}]`)}, key: "plugin.config"},
		{name: "nil", req: pluginapi.ConfigureRequest{ClusterID: "cl"}, passed: "{}"},
		{name: "null", req: pluginapi.ConfigureRequest{ClusterID: "cl", Config: []byte(" null ")}, passed: "{}"},
		{name: "an object", req: pluginapi.ConfigureRequest{ClusterID: "cl", Config: []byte(`{"region":"x"}`)}, passed: `{"region":"x"}`},
	}
	for _, tt := range configs {
		p.Reset()
		_, err := c.Configure(ctx, &tt.req)
		var ic *pluginapi.InvalidConfigError
		switch {
		case tt.key != "" && (!errors.As(err, &ic) || ic.Key != tt.key):
			t.Errorf("Configure with %s = %v, want InvalidConfig key %q", tt.name, err, tt.key)
		case tt.key != "" && p.Calls("Configure") != 0:
			t.Errorf("Configure with %s reached the provider, want the server to refuse it", tt.name)
		case tt.key == "" && err != nil:
			t.Errorf("Configure with %s = %v, want success", tt.name, err)
		case tt.key == "":
			reqs := p.Requests()
			if len(reqs) != 1 || string(reqs[0].Request.(*pluginapi.ConfigureRequest).Config) != tt.passed {
				t.Errorf("Configure with %s handed the provider %+v, want one Configure with config %s", tt.name, reqs, tt.passed)
			}
		}
	}

	// Configured now: a feature the fake does not report is refused.
	p.Reset()
	_, err := c.Launch(ctx, &pluginapi.LaunchRequest{CellID: "c-1", InstanceType: "fake.small", VolumeSizeGiB: 50})
	var u *pluginapi.UnsupportedError
	if !errors.As(err, &u) || u.Field != pluginapi.FieldVolumeSizeGiB {
		t.Errorf("Launch with a volume size the plugin does not support = %v, want Unsupported naming %q", err, pluginapi.FieldVolumeSizeGiB)
	}
	if n := p.Calls("Launch"); n != 0 {
		t.Errorf("the refused Launch reached the provider %d times, want never", n)
	}
}
