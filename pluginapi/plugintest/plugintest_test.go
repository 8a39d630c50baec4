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

var fakeConfig = plugintest.Config{
	Plugin:  []byte(`{"region":"nowhere"}`),
	Invalid: []plugintest.InvalidConfig{{Config: []byte(`{"fail":"on purpose"}`), Key: "fail"}},
}

func TestFakeConforms(t *testing.T) {
	tests := map[string][]fake.Option{
		"instant boot": nil,
		"slow boot":    {fake.WithBootDelay(50 * time.Millisecond)},
	}
	for name, opts := range tests {
		t.Run(name, func(t *testing.T) {
			store := fake.NewStore()
			plugintest.Run(t, fakeFactory(store, opts...), fakeConfig)
			if left := store.Instances(); len(left) != 0 {
				t.Errorf("the suite left %d instances behind: %v", len(left), left)
			}
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
	results := plugintest.Check(context.Background(), factory, fakeConfig)

	if got, want := len(results), len(plugintest.Cases()); got != want {
		t.Fatalf("Check returned %d results, want one per case (%d)", got, want)
	}
	wantFail := map[string]*regexp.Regexp{
		plugintest.CaseIdempotentLaunch: regexp.MustCompile(
			`^launching cell pt-[0-9a-f]{6}-idempotent-launch-1 twice created 2 instances \(i-\d+, i-\d+\); Launch must be idempotent on the cell ID`),
		plugintest.CaseOwnInstances: regexp.MustCompile(
			`^List for cluster plugintest-[0-9a-f]{6} returned instance i-\d+ \(cell pt-[0-9a-f]{6}-own-instances-2\) of cluster plugintest-[0-9a-f]{6}-b; List must return only the configured cluster's instances`),
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
	if left := store.Instances(); len(left) != 0 {
		t.Errorf("Check left %d instances behind: %v", len(left), left)
	}
}

// Each variant of the fake breaks one more rule; Check must fail exactly the
// cases that rule belongs to and say why.
func TestCheckFailsTheCasesOfEachBrokenRule(t *testing.T) {
	tests := []struct {
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
				plugintest.CaseConcurrentLaunches: "did not reach running",
			},
		},
		{
			name: "unknown instance type",
			cfg:  func(c *plugintest.Config) { c.InstanceType = "fake.huge" },
			want: map[string]string{
				plugintest.CaseCatalog:            `instance type "fake.huge" is not in the catalog`,
				plugintest.CaseLaunch:             "cannot launch",
				plugintest.CaseIdempotentLaunch:   "cannot launch",
				plugintest.CaseOwnInstances:       "cannot launch",
				plugintest.CaseTerminateTwice:     "cannot launch",
				plugintest.CaseConcurrentLaunches: "cannot launch",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			store := fake.NewStore()
			cfg := fakeConfig
			if tt.cfg != nil {
				tt.cfg(&cfg)
			}
			factory := fakeFactory(store, tt.opts...)
			if tt.wrap != nil {
				factory = func(log *slog.Logger) pluginapi.Provider {
					return tt.wrap(fakeFactory(store, tt.opts...)(log).(*fake.Provider))
				}
			}
			results := plugintest.Check(context.Background(), factory, cfg)
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
			if left := store.Instances(); len(left) != 0 {
				t.Errorf("Check left %d instances behind: %v", len(left), left)
			}
		})
	}
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
	ctx := context.Background()

	if _, err := c.List(ctx, &pluginapi.ListRequest{}); err == nil || !strings.Contains(err.Error(), "not configured") {
		t.Errorf("List before Configure over gRPC = %v, want a not-configured error", err)
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

// invalidLauncher answers Launch with an instance of another cell.
type invalidLauncher struct{ *fake.Provider }

func (p invalidLauncher) Launch(ctx context.Context, req *pluginapi.LaunchRequest) (*pluginapi.LaunchResponse, error) {
	other := *req
	other.CellID = "someone-else"
	return p.Provider.Launch(ctx, &other)
}

func TestServeRejectsInvalidAnswers(t *testing.T) {
	c := plugintest.Client(t, invalidLauncher{fake.New()})
	ctx := context.Background()
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
	ctx := context.Background()
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
