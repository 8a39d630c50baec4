package aws

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/google/go-cmp/cmp"

	"github.com/kipcell/kip/pluginapi"
)

// cellTags are the tags of a cell of cluster.
func cellTags(cluster, cell string) map[string]string {
	return map[string]string{pluginapi.TagCluster: cluster, pluginapi.TagCell: cell, pluginapi.TagNode: "kip", pluginapi.TagPodUID: "uid-" + cell}
}

// List pages through DescribeInstances filtered by the cluster tag and
// returns exactly the cluster's cells.
func TestListFiltersByClusterAndPages(t *testing.T) {
	f := newFakeEC2(t)
	f.pageSize = 2
	var want []string
	for i := range 5 {
		want = append(want, f.add("running", cellTags(testCluster, fmt.Sprintf("cell-%d", i))))
	}
	f.add("running", cellTags("other-cluster", "cell-x"))
	f.add("running", map[string]string{pluginapi.TagCluster: testCluster}) // no cell tag: not a cell
	f.add("running", map[string]string{"Name": "bastion"})
	p := configured(t, testConfig(f))

	resp, err := p.List(t.Context(), &pluginapi.ListRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, inst := range resp.Instances {
		got = append(got, inst.ID)
		if err := pluginapi.ValidateInstance(&inst); err != nil {
			t.Errorf("List answered an invalid instance: %v", err)
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("List (-want +got):\n%s", diff)
	}
	reqs := f.requests("DescribeInstances")
	if len(reqs) != 3 {
		t.Errorf("%d DescribeInstances calls for 6 matching instances in pages of 2, want 3", len(reqs))
	}
	for i, r := range reqs {
		if r.Get("Filter.1.Name") != "tag:"+pluginapi.TagCluster || r.Get("Filter.1.Value.1") != testCluster || r.Get("Filter.2.Name") != "" {
			t.Errorf("request %d filters %v, want only tag:%s=%s", i, r, pluginapi.TagCluster, testCluster)
		}
		if wantToken := []string{"", "2", "4"}[i]; r.Get("NextToken") != wantToken {
			t.Errorf("request %d has NextToken %q, want %q", i, r.Get("NextToken"), wantToken)
		}
	}
}

// Describe answers the cluster's cells from the shared snapshot, and asks
// EC2 by instance-id only for the others, in batches of 200.
func TestDescribe(t *testing.T) {
	f := newFakeEC2(t)
	mine := f.add("running", cellTags(testCluster, "cell-1"))
	theirs := f.add("running", cellTags("other-cluster", "cell-2"))
	notACell := f.add("running", map[string]string{"Name": "bastion"})
	p := configured(t, testConfig(f))
	ctx := t.Context()

	unknown := make([]string, 250)
	for i := range unknown {
		unknown[i] = fmt.Sprintf("i-%017x", 0xdead0000+i)
	}
	ids := append([]string{mine, theirs, notACell, mine}, unknown...)
	resp, err := p.Describe(ctx, &pluginapi.DescribeRequest{IDs: ids})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, inst := range resp.Instances {
		got = append(got, inst.ID)
	}
	if diff := cmp.Diff([]string{mine, theirs}, got); diff != "" {
		t.Errorf("Describe (-want +got):\n%s", diff)
	}
	var byID [][]string
	for _, r := range f.requests("DescribeInstances") {
		if r.Get("Filter.1.Name") == "instance-id" {
			byID = append(byID, list(r, "Filter.1.Value"))
		}
	}
	if len(byID) != 2 || len(byID[0]) != 200 || len(byID[1]) != 52 {
		t.Errorf("Describe asked EC2 by instance-id %d times (sizes %v), want 2 batches of 200 and 52", len(byID), sizes(byID))
	}
	if slices.Contains(byID[0], mine) {
		t.Errorf("Describe asked EC2 for the cluster's own cell %s instead of using the snapshot", mine)
	}
}

func sizes(batches [][]string) []int {
	var out []int
	for _, b := range batches {
		out = append(out, len(b))
	}
	return out
}

// Many cells polling at once share one DescribeInstances call.
//
// A connection the Go transport closes under a read (a known race,
// aws-sdk-go-v2#2737) is retried by the SDK, in every test as in production
// (newProvider): the test counts operations, not HTTP requests, so a
// retried attempt is still one call.
func TestDescribeCoalesces(t *testing.T) {
	f := newFakeEC2(t)
	var ids []string
	for i := range 50 {
		ids = append(ids, f.add("running", cellTags(testCluster, fmt.Sprintf("cell-%d", i))))
	}
	rec := &recorder{ops: map[string]bool{}, counts: map[string]int{}}
	p := configured(t, testConfig(f), func(p *provider) {
		p.SnapshotAge = time.Minute
		p.apiOptions = append(p.apiOptions, rec.middleware)
	})
	var wg sync.WaitGroup
	for _, id := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := p.Describe(t.Context(), &pluginapi.DescribeRequest{IDs: []string{id}})
			if err != nil || len(resp.Instances) != 1 || resp.Instances[0].ID != id {
				t.Errorf("Describe(%s) = %v, %v", id, resp, err)
			}
		}()
	}
	wg.Wait()
	rec.mu.Lock()
	n := rec.counts["EC2:DescribeInstances"]
	rec.mu.Unlock()
	if n != 1 {
		t.Errorf("50 concurrent Describes made %d DescribeInstances calls, want 1", n)
	}
}

// With a snapshot age of zero, every call gets a refresh that started
// after it arrived: never an answer older than the question.
func TestDescribeIsNeverStalerThanAsked(t *testing.T) {
	f := newFakeEC2(t)
	id := f.add("pending", cellTags(testCluster, "cell-1"))
	clock := newFakeClock()
	p := configured(t, testConfig(f), func(p *provider) { p.Now, p.SnapshotAge = clock.Now, 0 })
	ctx := t.Context()
	for _, want := range []pluginapi.InstanceState{pluginapi.StatePending, pluginapi.StateRunning} {
		clock.Advance(time.Millisecond)
		resp, err := p.Describe(ctx, &pluginapi.DescribeRequest{IDs: []string{id}})
		if err != nil || len(resp.Instances) != 1 || resp.Instances[0].State != want {
			t.Fatalf("Describe = %+v, %v; want %s", resp, err, want)
		}
	}
}

// Right after RunInstances, EC2 may not show the instance yet: Describe and
// List report it as launched, and Terminate retries NotFound.
func TestEventualConsistencyAfterLaunch(t *testing.T) {
	f := newFakeEC2(t)
	p := configured(t, testConfig(f), func(p *provider) {
		p.SnapshotAge = 0
		p.Sleep = func(context.Context, time.Duration) error { return nil }
	})
	ctx := t.Context()
	launched, err := p.Launch(ctx, launchRequest("cell-1"))
	if err != nil {
		t.Fatal(err)
	}
	id := launched.Instance.ID
	f.mu.Lock()
	f.hide[id] = 3 // absent from the next 3 DescribeInstances and TerminateInstances
	f.mu.Unlock()
	resp, err := p.Describe(ctx, &pluginapi.DescribeRequest{IDs: []string{id}})
	if err != nil || len(resp.Instances) != 1 || resp.Instances[0].State != pluginapi.StatePending || resp.Instances[0].CellID != "cell-1" {
		t.Errorf("Describe right after launch = %+v, %v; want the launched instance, pending", resp, err)
	}
	list, err := p.List(ctx, &pluginapi.ListRequest{})
	if err != nil || len(list.Instances) != 1 {
		t.Errorf("List right after launch = %+v, %v; want the launched instance", list, err)
	}
	if _, err := p.Terminate(ctx, &pluginapi.TerminateRequest{ID: id}); err != nil {
		t.Errorf("Terminate right after launch = %v; want it to retry until EC2 shows the instance", err)
	}
	if got := f.instance(id).state; got != "shutting-down" {
		t.Errorf("instance is %s, want shutting-down", got)
	}
}

// After a launch whose answer was lost, List asks EC2 again rather than
// trust its snapshot, and finds the instance.
func TestListAfterUncertainLaunch(t *testing.T) {
	f := newFakeEC2(t)
	p := configured(t, testConfig(f), func(p *provider) { p.SnapshotAge = time.Hour })
	ctx := t.Context()
	if list, err := p.List(ctx, &pluginapi.ListRequest{}); err != nil || len(list.Instances) != 0 {
		t.Fatalf("List = %v, %v", list, err)
	}
	f.fail("RunInstances", "InternalError", 500, 1) // the fake launches nothing: a lost launch is as good
	f.add("pending", cellTags(testCluster, "cell-lost"))
	if _, err := p.Launch(ctx, launchRequest("cell-lost")); !pluginapi.IsTransient(err) {
		t.Fatalf("Launch = %v, want Transient", err)
	}
	list, err := p.List(ctx, &pluginapi.ListRequest{})
	if err != nil || len(list.Instances) != 1 || list.Instances[0].CellID != "cell-lost" {
		t.Errorf("List after a failed launch = %+v, %v; want the instance EC2 shows", list, err)
	}
}

func TestInstanceFromEC2(t *testing.T) {
	launch := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	tests := []struct {
		name string
		in   types.Instance
		want pluginapi.Instance
	}{
		{
			name: "running spot",
			in: types.Instance{InstanceId: aws.String("i-1"), InstanceType: "c5.large", InstanceLifecycle: types.InstanceLifecycleTypeSpot,
				State: &types.InstanceState{Name: types.InstanceStateNameRunning}, Placement: &types.Placement{AvailabilityZone: aws.String("us-east-1a")},
				PrivateIpAddress: aws.String("10.0.0.5"), PublicIpAddress: aws.String("3.3.3.3"), LaunchTime: &launch,
				Tags: []types.Tag{{Key: aws.String(pluginapi.TagCell), Value: aws.String("cell-1")}}},
			want: pluginapi.Instance{ID: "i-1", CellID: "cell-1", InstanceType: "c5.large", CapacityType: pluginapi.CapacitySpot, Zone: "us-east-1a",
				State: pluginapi.StateRunning, LaunchedAt: launch, Tags: map[string]string{pluginapi.TagCell: "cell-1"},
				Addresses: []pluginapi.Address{{Type: pluginapi.AddressPrivate, Address: "10.0.0.5"}, {Type: pluginapi.AddressPublic, Address: "3.3.3.3"}}},
		},
		{
			name: "pod address: the primary interface's secondary address",
			in: types.Instance{InstanceId: aws.String("i-5"), State: &types.InstanceState{Name: types.InstanceStateNameRunning},
				PrivateIpAddress: aws.String("10.0.0.5"),
				NetworkInterfaces: []types.InstanceNetworkInterface{
					{Attachment: &types.InstanceNetworkInterfaceAttachment{DeviceIndex: aws.Int32(1)}, PrivateIpAddresses: []types.InstancePrivateIpAddress{
						{PrivateIpAddress: aws.String("10.0.9.1"), Primary: aws.Bool(true)}, {PrivateIpAddress: aws.String("10.0.9.2"), Primary: aws.Bool(false)}}},
					{Attachment: &types.InstanceNetworkInterfaceAttachment{DeviceIndex: aws.Int32(0)}, PrivateIpAddresses: []types.InstancePrivateIpAddress{
						{PrivateIpAddress: aws.String("10.0.0.5"), Primary: aws.Bool(true)}, {PrivateIpAddress: aws.String("10.0.0.6"), Primary: aws.Bool(false)}}},
				}},
			want: pluginapi.Instance{ID: "i-5", CapacityType: pluginapi.CapacityOnDemand, State: pluginapi.StateRunning, Tags: map[string]string{},
				Addresses: []pluginapi.Address{{Type: pluginapi.AddressPrivate, Address: "10.0.0.5"}, {Type: pluginapi.AddressPod, Address: "10.0.0.6"}}},
		},
		{
			name: "no secondary address: no pod address",
			in: types.Instance{InstanceId: aws.String("i-6"), State: &types.InstanceState{Name: types.InstanceStateNameRunning},
				PrivateIpAddress: aws.String("10.0.0.7"),
				NetworkInterfaces: []types.InstanceNetworkInterface{{Attachment: &types.InstanceNetworkInterfaceAttachment{DeviceIndex: aws.Int32(0)},
					PrivateIpAddresses: []types.InstancePrivateIpAddress{{PrivateIpAddress: aws.String("10.0.0.7"), Primary: aws.Bool(true)}}}}},
			want: pluginapi.Instance{ID: "i-6", CapacityType: pluginapi.CapacityOnDemand, State: pluginapi.StateRunning, Tags: map[string]string{},
				Addresses: []pluginapi.Address{{Type: pluginapi.AddressPrivate, Address: "10.0.0.7"}}},
		},
		{
			name: "spot interruption",
			in: types.Instance{InstanceId: aws.String("i-2"), State: &types.InstanceState{Name: types.InstanceStateNameShuttingDown},
				StateReason: &types.StateReason{Code: aws.String("Server.SpotInstanceTermination"), Message: aws.String("Server.SpotInstanceTermination: Spot instance termination")}},
			want: pluginapi.Instance{ID: "i-2", CapacityType: pluginapi.CapacityOnDemand, State: pluginapi.StateTerminating,
				StateReason: "spot interruption (Server.SpotInstanceTermination)", Tags: map[string]string{}},
		},
		{
			name: "stopped counts as terminating",
			in: types.Instance{InstanceId: aws.String("i-3"), State: &types.InstanceState{Name: types.InstanceStateNameStopped},
				StateReason: &types.StateReason{Code: aws.String("Client.UserInitiatedShutdown"), Message: aws.String("Client.UserInitiatedShutdown: User initiated shutdown")}},
			want: pluginapi.Instance{ID: "i-3", CapacityType: pluginapi.CapacityOnDemand, State: pluginapi.StateTerminating,
				StateReason: "instance stopped: Client.UserInitiatedShutdown: User initiated shutdown", Tags: map[string]string{}},
		},
		{
			name: "no state",
			in:   types.Instance{InstanceId: aws.String("i-4")},
			want: pluginapi.Instance{ID: "i-4", CapacityType: pluginapi.CapacityOnDemand, State: pluginapi.StateUnknown, Tags: map[string]string{}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, instanceFromEC2(tt.in)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
	for name, want := range map[types.InstanceStateName]pluginapi.InstanceState{
		"pending": pluginapi.StatePending, "running": pluginapi.StateRunning, "shutting-down": pluginapi.StateTerminating,
		"terminated": pluginapi.StateTerminated, "stopping": pluginapi.StateTerminating, "stopped": pluginapi.StateTerminating, "": pluginapi.StateUnknown,
	} {
		if got := stateFromEC2(name); got != want {
			t.Errorf("state %q = %s, want %s", name, got, want)
		}
	}
}
