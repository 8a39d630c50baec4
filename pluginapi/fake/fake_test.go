package fake_test

import (
	"context"
	"errors"
	"path/filepath"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/kipcell/kip/pluginapi"
	"github.com/kipcell/kip/pluginapi/fake"
)

func configured(t *testing.T, cluster string, opts ...fake.Option) *fake.Provider {
	t.Helper()
	p := fake.New(opts...)
	if _, err := p.Configure(t.Context(), &pluginapi.ConfigureRequest{ClusterID: cluster, NodeName: "node-1"}); err != nil {
		t.Fatalf("configuring fake for cluster %s: %v", cluster, err)
	}
	return p
}

func launchReq(cell string) *pluginapi.LaunchRequest {
	return &pluginapi.LaunchRequest{
		CellID: cell, NodeName: "node-1", PodUID: "uid-" + cell,
		InstanceType: "fake.small", Tags: map[string]string{"team": "a"},
	}
}

func TestConfigure(t *testing.T) {
	tests := []struct {
		name    string
		req     pluginapi.ConfigureRequest
		wantKey string // "" with wantErr false: accepted
		wantErr bool
	}{
		{name: "empty config", req: pluginapi.ConfigureRequest{ClusterID: "c"}},
		{name: "object config", req: pluginapi.ConfigureRequest{ClusterID: "c", Config: []byte(`{"region":"x"}`)}},
		{name: "empty cluster", req: pluginapi.ConfigureRequest{}, wantErr: true, wantKey: "clusterID"},
		{name: "fail key", req: pluginapi.ConfigureRequest{ClusterID: "c", Config: []byte(`{"fail":"please"}`)}, wantErr: true, wantKey: "fail"},
		{name: "null config", req: pluginapi.ConfigureRequest{ClusterID: "c", Config: []byte(`null`)}},
		{name: "blank config", req: pluginapi.ConfigureRequest{ClusterID: "c", Config: []byte(" \n")}},
		{name: "not an object", req: pluginapi.ConfigureRequest{ClusterID: "c", Config: []byte(`[1]`)}, wantErr: true, wantKey: "plugin.config"},
		{name: "a string", req: pluginapi.ConfigureRequest{ClusterID: "c", Config: []byte(`"abc"`)}, wantErr: true, wantKey: "plugin.config"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := fake.New().Configure(t.Context(), &tt.req)
			if !tt.wantErr {
				if err != nil {
					t.Fatalf("Configure(%+v) = %v, want success", tt.req, err)
				}
				return
			}
			var ic *pluginapi.InvalidConfigError
			if !errors.As(err, &ic) || ic.Key != tt.wantKey {
				t.Fatalf("Configure(%+v) = %v, want InvalidConfig with key %q", tt.req, err, tt.wantKey)
			}
		})
	}
}

func TestCallsBeforeConfigureFail(t *testing.T) {
	p := fake.New()
	ctx := t.Context()
	if _, err := p.GetInfo(ctx, &pluginapi.GetInfoRequest{}); err != nil {
		t.Errorf("GetInfo before Configure = %v, want success", err)
	}
	calls := map[string]func() error{
		"ListInstanceTypes": func() error { _, err := p.ListInstanceTypes(ctx, &pluginapi.ListInstanceTypesRequest{}); return err },
		"Launch":            func() error { _, err := p.Launch(ctx, launchReq("c-1")); return err },
		"Describe":          func() error { _, err := p.Describe(ctx, &pluginapi.DescribeRequest{IDs: []string{"i-1"}}); return err },
		"List":              func() error { _, err := p.List(ctx, &pluginapi.ListRequest{}); return err },
		"Terminate":         func() error { _, err := p.Terminate(ctx, &pluginapi.TerminateRequest{ID: "i-1"}); return err },
		"WatchEvents": func() error {
			return p.WatchEvents(ctx, &pluginapi.WatchEventsRequest{}, func(*pluginapi.Event) error { return nil })
		},
		"RegistryAuth": func() error {
			_, err := p.RegistryAuth(ctx, &pluginapi.RegistryAuthRequest{Image: fake.RegistryServer + "/x"})
			return err
		},
		"AttachVolume": func() error {
			_, err := p.AttachVolume(ctx, &pluginapi.AttachVolumeRequest{InstanceID: "i-1", Driver: fake.VolumeDriver, VolumeHandle: "vol-1"})
			return err
		},
		"DetachVolume": func() error {
			_, err := p.DetachVolume(ctx, &pluginapi.DetachVolumeRequest{InstanceID: "i-1", Driver: fake.VolumeDriver, VolumeHandle: "vol-1"})
			return err
		},
		"DescribeVolumeAttachments": func() error {
			_, err := p.DescribeVolumeAttachments(ctx, &pluginapi.DescribeVolumeAttachmentsRequest{InstanceIDs: []string{"i-1"}})
			return err
		},
	}
	for name, call := range calls {
		if err := call(); !errors.Is(err, fake.ErrNotConfigured) || !pluginapi.IsNotConfigured(err) {
			t.Errorf("%s before Configure = %v, want an error wrapping ErrNotConfigured, a NotConfiguredError", name, err)
		}
	}
}

func TestLaunchIsIdempotentAndTagged(t *testing.T) {
	p := configured(t, "cl-1")
	ctx := t.Context()
	first, err := p.Launch(ctx, launchReq("c-1"))
	if err != nil {
		t.Fatalf("launching cell c-1: %v", err)
	}
	second, err := p.Launch(ctx, launchReq("c-1"))
	if err != nil {
		t.Fatalf("launching cell c-1 again: %v", err)
	}
	if first.Instance.ID != second.Instance.ID {
		t.Errorf("launching cell c-1 twice gave instances %s and %s, want one", first.Instance.ID, second.Instance.ID)
	}
	want := map[string]string{
		pluginapi.TagCluster: "cl-1", pluginapi.TagNode: "node-1", pluginapi.TagCell: "c-1",
		pluginapi.TagPodUID: "uid-c-1", "team": "a",
	}
	if !reflect.DeepEqual(first.Instance.Tags, want) {
		t.Errorf("tags = %v, want %v", first.Instance.Tags, want)
	}
	if first.Instance.State != pluginapi.StateRunning || first.Instance.PrivateAddress() == "" {
		t.Errorf("without boot delay the instance is %s at %q, want running with a private address",
			first.Instance.State, first.Instance.PrivateAddress())
	}
	if first.Instance.Zone != fake.DefaultZone || first.Instance.CapacityType != pluginapi.CapacityOnDemand {
		t.Errorf("instance in zone %q as %q, want %q on-demand", first.Instance.Zone, first.Instance.CapacityType, fake.DefaultZone)
	}
	if err := pluginapi.ValidateInstance(&first.Instance); err != nil {
		t.Errorf("launched instance is invalid: %v", err)
	}
	list, err := p.List(ctx, &pluginapi.ListRequest{})
	if err != nil || len(list.Instances) != 1 {
		t.Fatalf("List after two launches of one cell = %v, %v; want one instance", list, err)
	}
}

func TestLaunchErrors(t *testing.T) {
	unavailable := fake.DefaultInstanceTypes()
	unavailable[0].Offerings[0].Available = false
	tests := []struct {
		name  string
		opts  []fake.Option
		req   func(*pluginapi.LaunchRequest)
		check func(error) bool
		want  string
	}{
		{
			name: "unknown type", req: func(r *pluginapi.LaunchRequest) { r.InstanceType = "huge" },
			check: func(err error) bool {
				var ic *pluginapi.InvalidConfigError
				return errors.As(err, &ic) && ic.Key == "instanceType"
			},
			want: `InvalidConfig key "instanceType"`,
		},
		{
			name: "empty cell", req: func(r *pluginapi.LaunchRequest) { r.CellID = "" },
			check: pluginapi.IsInvalidConfig, want: "InvalidConfig",
		},
		{
			name: "spot without capability", req: func(r *pluginapi.LaunchRequest) { r.CapacityType = pluginapi.CapacitySpot },
			check: unsupported(pluginapi.FieldCapacityType), want: "Unsupported capacity_type",
		},
		{
			name: "security groups without capability", req: func(r *pluginapi.LaunchRequest) { r.SecurityGroups = []string{"sg"} },
			check: unsupported(pluginapi.FieldSecurityGroups), want: "Unsupported security_groups",
		},
		{
			name: "instance profile without capability", req: func(r *pluginapi.LaunchRequest) { r.InstanceProfile = "p" },
			check: unsupported(pluginapi.FieldInstanceProfile), want: "Unsupported instance_profile",
		},
		{
			name: "volume size without capability", req: func(r *pluginapi.LaunchRequest) { r.VolumeSizeGiB = 50 },
			check: unsupported(pluginapi.FieldVolumeSizeGiB), want: "Unsupported volume_size_gib",
		},
		{
			name: "unavailable offering", opts: []fake.Option{fake.WithInstanceTypes(unavailable)},
			check: pluginapi.IsInsufficientCapacity, want: "InsufficientCapacity",
		},
		{
			name: "zone not offered", req: func(r *pluginapi.LaunchRequest) { r.Zones = []string{"elsewhere"} },
			check: pluginapi.IsInsufficientCapacity, want: "InsufficientCapacity",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := configured(t, "cl", tt.opts...)
			req := launchReq("c-1")
			if tt.req != nil {
				tt.req(req)
			}
			_, err := p.Launch(t.Context(), req)
			if !tt.check(err) {
				t.Fatalf("Launch(%+v) = %v, want %s", req, err, tt.want)
			}
			if got := p.Store().Instances(); len(got) != 0 {
				t.Errorf("a refused launch left instances %v", got)
			}
		})
	}
}

func TestBootDelay(t *testing.T) {
	var mu sync.Mutex
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	p := configured(t, "cl", fake.WithBootDelay(time.Minute), fake.WithClock(clock))
	ctx := t.Context()
	l, err := p.Launch(ctx, launchReq("c-1"))
	if err != nil {
		t.Fatalf("launching: %v", err)
	}
	if l.Instance.State != pluginapi.StatePending || len(l.Instance.Addresses) != 0 {
		t.Fatalf("just launched with a boot delay: %s %v, want pending without addresses", l.Instance.State, l.Instance.Addresses)
	}
	if !l.Instance.LaunchedAt.Equal(now) {
		t.Errorf("LaunchedAt = %v, want the clock's %v", l.Instance.LaunchedAt, now)
	}
	describe := func() pluginapi.Instance {
		t.Helper()
		d, err := p.Describe(ctx, &pluginapi.DescribeRequest{IDs: []string{l.Instance.ID, "i-unknown"}})
		if err != nil || len(d.Instances) != 1 {
			t.Fatalf("Describe(%s, i-unknown) = %v, %v; want just the one instance", l.Instance.ID, d, err)
		}
		return d.Instances[0]
	}
	mu.Lock()
	now = now.Add(59 * time.Second)
	mu.Unlock()
	if got := describe(); got.State != pluginapi.StatePending {
		t.Errorf("59s into a 1m boot: %s, want pending", got.State)
	}
	mu.Lock()
	now = now.Add(time.Second)
	mu.Unlock()
	if got := describe(); got.State != pluginapi.StateRunning || got.PrivateAddress() == "" {
		t.Errorf("after the boot delay: %s at %q, want running with a private address", got.State, got.PrivateAddress())
	}
}

func TestTerminate(t *testing.T) {
	p := configured(t, "cl")
	ctx := t.Context()
	l, err := p.Launch(ctx, launchReq("c-1"))
	if err != nil {
		t.Fatalf("launching: %v", err)
	}
	term, err := p.Terminate(ctx, &pluginapi.TerminateRequest{ID: l.Instance.ID})
	if err != nil || term.Instance.State != pluginapi.StateTerminated || term.Instance.ID != l.Instance.ID {
		t.Fatalf("first Terminate = %+v, %v; want the instance terminated", term, err)
	}
	if _, err := p.Terminate(ctx, &pluginapi.TerminateRequest{ID: l.Instance.ID}); !pluginapi.IsNotFound(err) {
		t.Errorf("second Terminate = %v, want NotFound", err)
	}
	if list, _ := p.List(ctx, &pluginapi.ListRequest{}); len(list.Instances) != 0 {
		t.Errorf("List after Terminate = %v, want empty", list.Instances)
	}
	again, err := p.Launch(ctx, launchReq("c-1"))
	if err != nil || again.Instance.ID != l.Instance.ID || again.Instance.State != pluginapi.StateTerminated {
		t.Errorf("relaunching a terminated cell = %+v, %v; want its instance %s, terminated", again, err, l.Instance.ID)
	}
}

func TestClustersAreSeparate(t *testing.T) {
	store := fake.NewStore()
	a := configured(t, "cl-a", fake.WithStore(store))
	b := configured(t, "cl-b", fake.WithStore(store))
	ctx := t.Context()
	la, err := a.Launch(ctx, launchReq("c-1"))
	if err != nil {
		t.Fatal(err)
	}
	lb, err := b.Launch(ctx, launchReq("c-1"))
	if err != nil {
		t.Fatal(err)
	}
	if la.Instance.ID == lb.Instance.ID {
		t.Fatalf("cell c-1 of two clusters got one instance %s, want one each", la.Instance.ID)
	}
	for _, tc := range []struct {
		p          *fake.Provider
		own, other string
	}{{a, la.Instance.ID, lb.Instance.ID}, {b, lb.Instance.ID, la.Instance.ID}} {
		list, err := tc.p.List(ctx, &pluginapi.ListRequest{})
		if err != nil || len(list.Instances) != 1 || list.Instances[0].ID != tc.own {
			t.Errorf("List = %v, %v; want only %s", list, err, tc.own)
		}
		d, _ := tc.p.Describe(ctx, &pluginapi.DescribeRequest{IDs: []string{tc.other}})
		if len(d.Instances) != 0 {
			t.Errorf("Describe of the other cluster's %s = %v, want absent", tc.other, d.Instances)
		}
		if _, err := tc.p.Terminate(ctx, &pluginapi.TerminateRequest{ID: tc.other}); !pluginapi.IsNotFound(err) {
			t.Errorf("Terminate of the other cluster's %s = %v, want NotFound", tc.other, err)
		}
	}
	if got := len(store.Instances()); got != 2 {
		t.Errorf("store holds %d instances, want 2", got)
	}
}

func TestConcurrentDuplicateLaunches(t *testing.T) {
	p := configured(t, "cl")
	var wg sync.WaitGroup
	ids := make([]string, 16)
	for i := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l, err := p.Launch(t.Context(), launchReq("c-1"))
			if err != nil {
				t.Errorf("launch %d: %v", i, err)
				return
			}
			ids[i] = l.Instance.ID
		}()
	}
	wg.Wait()
	for _, id := range ids {
		if id != ids[0] {
			t.Fatalf("concurrent launches of one cell gave IDs %v, want one", ids)
		}
	}
	if got := p.Calls("Launch"); got != 16 {
		t.Errorf("Calls(Launch) = %d, want 16", got)
	}
}

func TestStateFileSurvivesRestart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.json")
	ctx := t.Context()
	p := configured(t, "cl", fake.WithStateFile(path))
	l1, err := p.Launch(ctx, launchReq("c-1"))
	if err != nil {
		t.Fatal(err)
	}
	l2, err := p.Launch(ctx, launchReq("c-2"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Terminate(ctx, &pluginapi.TerminateRequest{ID: l1.Instance.ID}); err != nil {
		t.Fatal(err)
	}

	// A new process: a new provider on a new store, reading the same file.
	restarted := configured(t, "cl", fake.WithStateFile(path))
	list, err := restarted.List(ctx, &pluginapi.ListRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Instances) != 1 || !reflect.DeepEqual(list.Instances[0].Tags, l2.Instance.Tags) || list.Instances[0].ID != l2.Instance.ID {
		t.Fatalf("after restart List = %+v, want just %+v", list.Instances, l2.Instance)
	}
	again, err := restarted.Launch(ctx, launchReq("c-2"))
	if err != nil || again.Instance.ID != l2.Instance.ID {
		t.Errorf("relaunching c-2 after restart = %v, %v; want the old %s", again, err, l2.Instance.ID)
	}
	l3, err := restarted.Launch(ctx, launchReq("c-3"))
	if err != nil || l3.Instance.ID == l1.Instance.ID || l3.Instance.ID == l2.Instance.ID {
		t.Errorf("a new cell after restart got %v, %v; want a fresh ID", l3, err)
	}
}

func TestStateFileUnreadable(t *testing.T) {
	p := fake.New(fake.WithStateFile(t.TempDir())) // a directory: reading fails
	if _, err := p.Configure(t.Context(), &pluginapi.ConfigureRequest{ClusterID: "cl"}); err == nil {
		t.Fatal("Configure with an unreadable state file succeeded, want the load error")
	}
}

func TestRecordingAndInjection(t *testing.T) {
	p := configured(t, "cl")
	ctx := t.Context()
	boom := errors.New("boom")
	p.FailNext("Launch", boom)
	p.FailNext("Launch", pluginapi.NewThrottled(time.Second, "slow down"))
	if _, err := p.Launch(ctx, launchReq("c-1")); !errors.Is(err, boom) {
		t.Errorf("first Launch after FailNext = %v, want boom", err)
	}
	if _, err := p.Launch(ctx, launchReq("c-1")); !pluginapi.IsThrottled(err) {
		t.Errorf("second Launch after two FailNext = %v, want Throttled", err)
	}
	if _, err := p.Launch(ctx, launchReq("c-1")); err != nil {
		t.Errorf("third Launch = %v, want success", err)
	}
	if n := len(p.Store().Instances()); n != 1 {
		t.Errorf("failed launches created instances: store holds %d, want 1", n)
	}
	if got := p.Calls("Launch"); got != 3 {
		t.Errorf("Calls(Launch) = %d, want 3", got)
	}
	reqs := p.Requests()
	if len(reqs) != 4 || reqs[0].Method != "Configure" || reqs[3].Method != "Launch" {
		t.Fatalf("Requests() = %+v, want Configure then 3 Launch", reqs)
	}
	if lr, ok := reqs[3].Request.(*pluginapi.LaunchRequest); !ok || lr.CellID != "c-1" {
		t.Errorf("recorded Launch request = %#v, want *LaunchRequest for c-1", reqs[3].Request)
	}
	p.FailNext("List", boom)
	p.Reset()
	if got := p.Calls("Launch"); got != 0 || len(p.Requests()) != 0 {
		t.Errorf("after Reset Calls(Launch) = %d and %d requests, want none", got, len(p.Requests()))
	}
	if _, err := p.List(ctx, &pluginapi.ListRequest{}); err != nil {
		t.Errorf("List after Reset = %v; Reset must drop pending failures", err)
	}
}

func TestCancelledContext(t *testing.T) {
	p := configured(t, "cl")
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := p.Launch(ctx, launchReq("c-1")); !errors.Is(err, context.Canceled) {
		t.Errorf("Launch with a cancelled ctx = %v, want context.Canceled", err)
	}
	if n := len(p.Store().Instances()); n != 0 {
		t.Errorf("a cancelled launch created %d instances", n)
	}
}

func TestWatchEvents(t *testing.T) {
	store := fake.NewStore()
	p := configured(t, "cl", fake.WithStore(store), fake.WithBootDelay(30*time.Millisecond))
	other := configured(t, "other", fake.WithStore(store))
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	events := make(chan pluginapi.Event, 16)
	done := make(chan error, 1)
	go func() {
		done <- p.WatchEvents(ctx, &pluginapi.WatchEventsRequest{}, func(e *pluginapi.Event) error {
			events <- *e
			return nil
		})
	}()
	// Wait until the watcher is subscribed: poke a probe instance until its
	// event arrives, then drop it.
	probe, err := p.Launch(ctx, launchReq("probe"))
	if err != nil {
		t.Fatal(err)
	}
	subscribed := false
	for !subscribed {
		if err := store.SetState(probe.Instance.ID, pluginapi.StateRunning, "probe"); err != nil {
			t.Fatal(err)
		}
		select {
		case e := <-events:
			subscribed = e.InstanceID == probe.Instance.ID
		case <-time.After(10 * time.Millisecond):
		case <-ctx.Done():
			t.Fatal("WatchEvents never delivered the probe's event")
		}
	}
	if _, err := p.Terminate(ctx, &pluginapi.TerminateRequest{ID: probe.Instance.ID}); err != nil {
		t.Fatal(err)
	}
	for drained := false; !drained; {
		select {
		case e := <-events:
			drained = e.InstanceID == probe.Instance.ID && e.State == pluginapi.StateTerminated
		case <-ctx.Done():
			t.Fatal("no terminated event for the probe")
		}
	}
	if _, err := other.Launch(ctx, launchReq("x-1")); err != nil {
		t.Fatal(err)
	}
	l, err := p.Launch(ctx, launchReq("c-1"))
	if err != nil {
		t.Fatal(err)
	}
	want := []pluginapi.InstanceState{pluginapi.StatePending, pluginapi.StateRunning}
	for _, state := range want {
		select {
		case e := <-events:
			if e.Type != pluginapi.EventStateChange || e.InstanceID != l.Instance.ID || e.CellID != "c-1" || e.State != state {
				t.Errorf("event = %+v, want state-change of %s (c-1) to %s", e, l.Instance.ID, state)
			}
		case <-ctx.Done():
			t.Fatalf("no %s event for %s", state, l.Instance.ID)
		}
	}
	if _, err := p.Terminate(ctx, &pluginapi.TerminateRequest{ID: l.Instance.ID}); err != nil {
		t.Fatal(err)
	}
	select {
	case e := <-events:
		if e.State != pluginapi.StateTerminated || e.InstanceID != l.Instance.ID {
			t.Errorf("event = %+v, want %s terminated", e, l.Instance.ID)
		}
	case <-ctx.Done():
		t.Fatal("no terminated event")
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("WatchEvents after cancel = %v, want context.Canceled", err)
	}
}

func TestSetState(t *testing.T) {
	p := configured(t, "cl")
	ctx := t.Context()
	l, err := p.Launch(ctx, launchReq("c-1"))
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Store().SetState(l.Instance.ID, pluginapi.StateTerminated, "spot interruption"); err != nil {
		t.Fatal(err)
	}
	d, err := p.Describe(ctx, &pluginapi.DescribeRequest{IDs: []string{l.Instance.ID}})
	if err != nil || len(d.Instances) != 1 || d.Instances[0].State != pluginapi.StateTerminated || d.Instances[0].StateReason != "spot interruption" {
		t.Errorf("Describe after SetState = %+v, %v; want terminated by spot interruption", d, err)
	}
	if err := p.Store().SetState("i-nope", pluginapi.StateRunning, ""); !pluginapi.IsNotFound(err) {
		t.Errorf("SetState of an unknown ID = %v, want NotFound", err)
	}
}

func TestRegistryAuth(t *testing.T) {
	p := configured(t, "cl")
	ctx := t.Context()
	got, err := p.RegistryAuth(ctx, &pluginapi.RegistryAuthRequest{Image: fake.RegistryServer + "/app:1"})
	if err != nil || got.Server != fake.RegistryServer || got.Password == "" {
		t.Errorf("RegistryAuth of a known image = %+v, %v; want credentials", got, err)
	}
	if _, err := p.RegistryAuth(ctx, &pluginapi.RegistryAuthRequest{Image: "docker.io/library/nginx"}); !pluginapi.IsNotFound(err) {
		t.Errorf("RegistryAuth of a foreign image = %v, want NotFound", err)
	}
}

func TestGetInfoAndCatalogAreValid(t *testing.T) {
	p := configured(t, "cl", fake.WithName("other"), fake.WithVersion("1.2.3"), fake.WithCapabilities(pluginapi.CapabilitySpot))
	info, err := p.GetInfo(t.Context(), &pluginapi.GetInfoRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if err := pluginapi.ValidateInfo(info); err != nil {
		t.Errorf("GetInfo answer is invalid: %v", err)
	}
	if info.Name != "other" || info.Version != "1.2.3" || !reflect.DeepEqual(info.Capabilities, []pluginapi.Capability{pluginapi.CapabilitySpot}) {
		t.Errorf("GetInfo = %+v, want the configured name, version and capabilities", info)
	}
	types, err := p.ListInstanceTypes(t.Context(), &pluginapi.ListInstanceTypesRequest{})
	if err != nil || len(types.InstanceTypes) != 3 {
		t.Fatalf("ListInstanceTypes = %v, %v; want the 3 default types", types, err)
	}
	if err := pluginapi.ValidateInstanceTypes(types.InstanceTypes); err != nil {
		t.Errorf("default catalog is invalid: %v", err)
	}
	types.InstanceTypes[0].Offerings[0].HourlyPrice = 99
	again, _ := p.ListInstanceTypes(t.Context(), &pluginapi.ListInstanceTypesRequest{})
	if again.InstanceTypes[0].Offerings[0].HourlyPrice == 99 {
		t.Error("changing a returned catalog changed the provider's catalog")
	}
}

// unsupported checks for an UnsupportedError naming field.
func unsupported(field string) func(error) bool {
	return func(err error) bool {
		var u *pluginapi.UnsupportedError
		return errors.As(err, &u) && u.Field == field
	}
}

// A terminated cell stays terminated across a restart of the plugin
// process: its Launch answers the old instance.
func TestTerminatedCellSurvivesRestart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.json")
	ctx := t.Context()
	p := configured(t, "cl", fake.WithStateFile(path))
	l, err := p.Launch(ctx, launchReq("c-1"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Terminate(ctx, &pluginapi.TerminateRequest{ID: l.Instance.ID}); err != nil {
		t.Fatal(err)
	}
	restarted := configured(t, "cl", fake.WithStateFile(path))
	again, err := restarted.Launch(ctx, launchReq("c-1"))
	if err != nil || again.Instance.ID != l.Instance.ID || again.Instance.State != pluginapi.StateTerminated {
		t.Errorf("after a restart, launching terminated cell c-1 = %+v, %v; want its instance %s, terminated", again, err, l.Instance.ID)
	}
	if got := restarted.Store().Instances(); len(got) != 0 {
		t.Errorf("after a restart the store holds %v, want nothing live", got)
	}
}

func TestConsoleOutput(t *testing.T) {
	ctx := t.Context()
	p := configured(t, "c1")
	resp, err := p.Launch(ctx, launchReq("cell-1"))
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Store().SetConsoleOutput(resp.Instance.ID, "cloud-init: boot failed\n"); err != nil {
		t.Fatal(err)
	}
	got, err := p.ConsoleOutput(ctx, &pluginapi.ConsoleOutputRequest{InstanceID: resp.Instance.ID})
	if err != nil || got.Output != "cloud-init: boot failed\n" {
		t.Errorf("ConsoleOutput = %+v, %v; want the output set", got, err)
	}
	if _, err := p.ConsoleOutput(ctx, &pluginapi.ConsoleOutputRequest{InstanceID: "i-none"}); !pluginapi.IsNotFound(err) {
		t.Errorf("ConsoleOutput of an unknown instance = %v, want NotFound", err)
	}
}
