package gce

import (
	"fmt"
	"testing"
	"time"

	"cloud.google.com/go/compute/apiv1/computepb"
	"google.golang.org/protobuf/proto"

	"github.com/kipcell/kip/pluginapi"
)

// Describe and List of many cells share one aggregatedList per snapshot
// age, across pages; other clusters' instances and instances that are not
// cells are left out; Describe of an unknown or malformed ID is empty.
func TestDescribeAndListShareOneSnapshot(t *testing.T) {
	f := newFakeCompute(t)
	f.pageSize = 2
	ctx := t.Context()
	p := configured(t, testConfig(f))
	var ids []string
	for i := range 5 {
		resp, err := p.Launch(ctx, launchRequest(fmt.Sprintf("kip-many-%d", i)))
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, resp.Instance.ID)
	}
	other := newProvider()
	if _, err := other.Configure(ctx, &pluginapi.ConfigureRequest{ClusterID: "other", Config: mustJSON(t, testConfig(f))}); err != nil {
		t.Fatal(err)
	}
	if _, err := other.Launch(ctx, launchRequest("kip-other")); err != nil {
		t.Fatal(err)
	}
	// An instance labelled with the cluster that is not a cell.
	f.mu.Lock()
	f.instances["us-central1-b/stray"] = &fakeInstance{zone: "us-central1-b", status: "RUNNING",
		body: map[string]any{"name": "stray", "labels": map[string]any{labelCluster: testCluster}}}
	f.mu.Unlock()

	p = configured(t, testConfig(f)) // a fresh view
	before := f.callCount("instances.aggregatedList")
	list, err := p.List(ctx, &pluginapi.ListRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Instances) != 5 {
		t.Errorf("List = %d instances, want this cluster's 5 cells", len(list.Instances))
	}
	desc, err := p.Describe(ctx, &pluginapi.DescribeRequest{IDs: append(ids, ids[0], "us-central1-a/kip-nothing", "malformed")})
	if err != nil {
		t.Fatal(err)
	}
	if len(desc.Instances) != 5 {
		t.Errorf("Describe = %d instances, want 5", len(desc.Instances))
	}
	// Three pages of two, for one snapshot.
	if n := f.callCount("instances.aggregatedList") - before; n != 3 {
		t.Errorf("%d aggregatedList requests, want one listing of 3 pages", n)
	}
	// Another cluster's instance, described by ID, is shown (the host
	// asked for it); it is not a cell of this cluster's List.
	got, err := p.Describe(ctx, &pluginapi.DescribeRequest{IDs: []string{"us-central1-a/kip-other"}})
	if err != nil || len(got.Instances) != 1 {
		t.Errorf("Describe of another cluster's cell = %+v, %v", got, err)
	}
}

// A Spot instance that stops though the plugin did not delete it is
// described as preempted (Compute Engine says so only in an operation);
// one the plugin deletes, or an on-demand one that stops, is not.
func TestDescribePreemptedSpot(t *testing.T) {
	f := newFakeCompute(t)
	ctx := t.Context()
	p := configured(t, testConfig(f), func(p *provider) { p.SnapshotAge = time.Millisecond })
	launch := func(cell string, ct pluginapi.CapacityType) string {
		req := launchRequest(cell)
		req.CapacityType = ct
		resp, err := p.Launch(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		return resp.Instance.ID
	}
	preempted, deleted := launch("kip-preempted", pluginapi.CapacitySpot), launch("kip-deleted", pluginapi.CapacitySpot)
	stopped, running := launch("kip-stopped", pluginapi.CapacityOnDemand), launch("kip-running", pluginapi.CapacitySpot)
	if _, err := p.Terminate(ctx, &pluginapi.TerminateRequest{ID: deleted}); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{preempted, deleted, stopped} {
		f.set(id, func(in *fakeInstance) { in.status = "STOPPING" })
	}
	time.Sleep(2 * time.Millisecond) // past the snapshot's age
	want := map[string]string{
		preempted: preemptionReason + " (instance STOPPING)", deleted: "instance STOPPING", stopped: "instance STOPPING", running: "",
	}
	desc, err := p.Describe(ctx, &pluginapi.DescribeRequest{IDs: []string{preempted, deleted, stopped, running}})
	if err != nil {
		t.Fatal(err)
	}
	list, err := p.List(ctx, &pluginapi.ListRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for call, got := range map[string][]pluginapi.Instance{"Describe": desc.Instances, "List": list.Instances} {
		if len(got) != len(want) {
			t.Errorf("%s = %d instances, want %d", call, len(got), len(want))
		}
		for _, in := range got {
			if in.StateReason != want[in.ID] {
				t.Errorf("%s: %s has state reason %q, want %q", call, in.ID, in.StateReason, want[in.ID])
			}
		}
	}
}

// Compute Engine's statuses map to the contract's states.
func TestStates(t *testing.T) {
	for status, want := range map[string]pluginapi.InstanceState{
		"PROVISIONING": pluginapi.StatePending, "STAGING": pluginapi.StatePending, "REPAIRING": pluginapi.StatePending,
		"RUNNING": pluginapi.StateRunning, "STOPPING": pluginapi.StateTerminating, "SUSPENDING": pluginapi.StateTerminating,
		"SUSPENDED": pluginapi.StateTerminating, "TERMINATED": pluginapi.StateTerminating, "WHAT": pluginapi.StateUnknown,
	} {
		if got := stateFromGCE(status); got != want {
			t.Errorf("%s → %s, want %s", status, got, want)
		}
	}
}

// Terminate deletes the instance and answers it terminating; a second
// Terminate succeeds (the same requestId) or, once it is gone, is
// NotFound; an unknown or malformed ID is NotFound; another cluster's
// instance is refused.
func TestTerminate(t *testing.T) {
	f := newFakeCompute(t)
	ctx := t.Context()
	p := configured(t, testConfig(f))
	resp, err := p.Launch(ctx, launchRequest("kip-end"))
	if err != nil {
		t.Fatal(err)
	}
	id := resp.Instance.ID
	term, err := p.Terminate(ctx, &pluginapi.TerminateRequest{ID: id})
	if err != nil || term.Instance.State != pluginapi.StateTerminating || term.Instance.ID != id {
		t.Fatalf("Terminate = %+v, %v", term, err)
	}
	if _, err := p.Terminate(ctx, &pluginapi.TerminateRequest{ID: id}); err != nil {
		t.Errorf("a second Terminate = %v", err)
	}
	if q := f.query("instances.delete", 0); q != f.query("instances.delete", 1) || q == "" {
		t.Errorf("delete queries %q, %q: want the same requestId", q, f.query("instances.delete", 1))
	}
	p.SnapshotAge = 0
	list, _ := p.List(ctx, &pluginapi.ListRequest{})
	for _, inst := range list.Instances {
		if inst.ID == id && inst.State != pluginapi.StateTerminating {
			t.Errorf("List shows %s %s after Terminate", id, inst.State)
		}
	}
	f.finishDeletes()
	restarted := configured(t, testConfig(f))
	if _, err := restarted.Terminate(ctx, &pluginapi.TerminateRequest{ID: id}); !pluginapi.IsNotFound(err) {
		t.Errorf("Terminate of a deleted instance = %v, want NotFound", err)
	}
	for _, bad := range []string{"us-central1-a/kip-never", "malformed", "a/b/c"} {
		if _, err := restarted.Terminate(ctx, &pluginapi.TerminateRequest{ID: bad}); !pluginapi.IsNotFound(err) {
			t.Errorf("Terminate(%q) = %v, want NotFound", bad, err)
		}
	}

	other := newProvider()
	if _, err := other.Configure(ctx, &pluginapi.ConfigureRequest{ClusterID: "other", Config: mustJSON(t, testConfig(f))}); err != nil {
		t.Fatal(err)
	}
	theirs, err := other.Launch(ctx, launchRequest("kip-theirs"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := restarted.Terminate(ctx, &pluginapi.TerminateRequest{ID: theirs.Instance.ID}); err == nil || pluginapi.IsNotFound(err) {
		t.Errorf("Terminate of another cluster's instance = %v, want a refusal", err)
	}
	if n := f.callCount("instances.delete"); n != 2 {
		t.Errorf("%d deletes, want 2 (ours, twice)", n)
	}
}

// The pod address is nic0's first alias IP range of one IPv4 address; a
// wider range (a secondary range for something else) is none.
func TestPodAddress(t *testing.T) {
	for _, tt := range []struct {
		ranges []string
		want   string
	}{
		{ranges: []string{"10.128.1.9/32"}, want: "10.128.1.9"},
		{ranges: []string{"10.40.0.0/24", "10.128.1.9/32"}, want: "10.128.1.9"},
		{ranges: []string{"10.40.0.0/24"}},
		{ranges: []string{"/32"}},
		{},
	} {
		nic := &computepb.NetworkInterface{}
		for _, r := range tt.ranges {
			nic.AliasIpRanges = append(nic.AliasIpRanges, &computepb.AliasIpRange{IpCidrRange: proto.String(r)})
		}
		if got := podAddress(nic); got != tt.want {
			t.Errorf("podAddress(%v) = %q, want %q", tt.ranges, got, tt.want)
		}
	}
}
