package gce

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/kipcell/kip/pluginapi"
)

// Launch sends one instances.insert named after the cell, with the
// labels, the bootstrap and the tags in metadata, the zone's subnetwork and
// the image, and a requestId; it waits for the operation and answers the
// instance pending; Describe and List then show it running with its
// address and exactly the standard tags.
func TestLaunchInsertsTheCell(t *testing.T) {
	f := newFakeCompute(t)
	p := configured(t, with(with(testConfig(f), "networkTags", []string{"kip-cell"}), "serviceAccount", "cells@kip-test.iam.gserviceaccount.com"))
	ctx := t.Context()
	req := launchRequest("kip-cell-1")
	req.Tags = map[string]string{"kipcell.io/extra": "Some Value"}
	resp, err := p.Launch(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	inst := resp.Instance
	if inst.ID != "us-central1-a/kip-cell-1" || inst.CellID != "kip-cell-1" || inst.State != pluginapi.StatePending || inst.Zone != "us-central1-a" {
		t.Errorf("Launch answered %+v", inst)
	}
	if n := f.callCount("instances.insert"); n != 1 {
		t.Fatalf("%d inserts, want 1", n)
	}
	checkInsert(t, f.body("instances.insert", 0), req)
	if q := f.query("instances.insert", 0); !strings.HasPrefix(q, "requestId=") || !strings.Contains(q, requestID("instances.insert", fakeProject, "us-central1-a", "kip-cell-1", "e2-small", "on-demand")) {
		t.Errorf("insert query %q: want the cell's requestId", q)
	}

	p.SnapshotAge = 0
	got, err := p.Describe(ctx, &pluginapi.DescribeRequest{IDs: []string{inst.ID}})
	if err != nil || len(got.Instances) != 1 {
		t.Fatalf("Describe = %+v, %v", got, err)
	}
	d := got.Instances[0]
	if d.State != pluginapi.StateRunning || d.PrivateAddress() == "" || d.InstanceType != "e2-small" || d.LaunchedAt.IsZero() {
		t.Errorf("Describe answered %+v", d)
	}
	if pod := d.PodAddress(); pod == "" || pod == d.PrivateAddress() || !strings.HasPrefix(pod, "10.128.1.") {
		t.Errorf("Describe answered pod address %q (addresses %v), want the alias IP", pod, d.Addresses)
	}
	if diff := cmp.Diff(pluginapi.StandardTags(testCluster, req), d.Tags); diff != "" {
		t.Errorf("tags (-want +got):\n%s", diff)
	}
	list, err := p.List(ctx, &pluginapi.ListRequest{})
	if err != nil || len(list.Instances) != 1 || list.Instances[0].ID != inst.ID {
		t.Fatalf("List = %+v, %v", list, err)
	}
	if q := f.query("instances.aggregatedList", 0); !strings.Contains(q, "filter=labels.kip-cluster") {
		t.Errorf("aggregatedList query %q: want the cluster label filter", q)
	}
}

// Spot, GPUs and custom types shape the insert.
func TestLaunchShapes(t *testing.T) {
	for _, tc := range []struct {
		name, typ   string
		capacity    pluginapi.CapacityType
		volume      int32
		want        map[string]any // scheduling
		accelerator bool
		diskGB      string
	}{
		{name: "spot", typ: "e2-small", capacity: pluginapi.CapacitySpot,
			want: map[string]any{"provisioningModel": "SPOT", "instanceTerminationAction": "DELETE", "onHostMaintenance": "TERMINATE", "automaticRestart": false}},
		{name: "bundled GPUs", typ: "g2-standard-4", capacity: pluginapi.CapacityOnDemand,
			want: map[string]any{"provisioningModel": "STANDARD", "onHostMaintenance": "TERMINATE"}},
		{name: "custom type and volume", typ: "n2-custom-2-4096", capacity: pluginapi.CapacityOnDemand, volume: 30,
			want: map[string]any{"provisioningModel": "STANDARD"}, diskGB: "30"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeCompute(t)
			p := configured(t, testConfig(f))
			req := launchRequest("kip-shape")
			req.InstanceType, req.CapacityType, req.VolumeSizeGiB = tc.typ, tc.capacity, tc.volume
			resp, err := p.Launch(t.Context(), req)
			if err != nil {
				t.Fatal(err)
			}
			if resp.Instance.CapacityType != tc.capacity {
				t.Errorf("capacity type %s, want %s", resp.Instance.CapacityType, tc.capacity)
			}
			body := f.body("instances.insert", 0)
			if diff := cmp.Diff(tc.want, body["scheduling"]); diff != "" {
				t.Errorf("scheduling (-want +got):\n%s", diff)
			}
			if body["machineType"] != "zones/us-central1-a/machineTypes/"+tc.typ {
				t.Errorf("machineType %v", body["machineType"])
			}
			if _, ok := body["guestAccelerators"]; ok != tc.accelerator {
				t.Errorf("guestAccelerators %v, want present %v", body["guestAccelerators"], tc.accelerator)
			}
			init := body["disks"].([]any)[0].(map[string]any)["initializeParams"].(map[string]any)
			if got, _ := init["diskSizeGb"].(string); got != tc.diskGB {
				t.Errorf("diskSizeGb %q, want %q", got, tc.diskGB)
			}
		})
	}
}

// An N1 type with a GPU gets it as a guest accelerator.
func TestGuestAccelerators(t *testing.T) {
	if got := acceleratorName("t4"); got != "nvidia-tesla-t4" {
		t.Errorf("t4 → %s", got)
	}
	if got := acceleratorName("l4"); got != "nvidia-l4" {
		t.Errorf("l4 → %s", got)
	}
}

// A retried Launch starts nothing: the same process answers from its view,
// a restarted one finds the cell with its one aggregatedList.
func TestLaunchIsIdempotent(t *testing.T) {
	f := newFakeCompute(t)
	p := configured(t, testConfig(f))
	ctx := t.Context()
	first, err := p.Launch(ctx, launchRequest("kip-idem"))
	if err != nil {
		t.Fatal(err)
	}
	again, err := p.Launch(ctx, launchRequest("kip-idem"))
	if err != nil || again.Instance.ID != first.Instance.ID {
		t.Fatalf("second Launch = %+v, %v", again, err)
	}
	restarted := configured(t, testConfig(f))
	third, err := restarted.Launch(ctx, launchRequest("kip-idem"))
	if err != nil || third.Instance.ID != first.Instance.ID || third.Instance.State != pluginapi.StateRunning {
		t.Fatalf("Launch after a restart = %+v, %v", third, err)
	}
	if n := f.callCount("instances.insert"); n != 1 {
		t.Errorf("%d inserts, want 1", n)
	}

}

// A replayed insert whose instance is gone answers it terminated; an
// alreadyExists answers our own instance, and refuses another cluster's.
func TestLaunchReplayAndAlreadyExists(t *testing.T) {
	f := newFakeCompute(t)
	ctx := t.Context()
	p := configured(t, testConfig(f))
	if _, err := p.Launch(ctx, launchRequest("kip-gone")); err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	delete(f.instances, "us-central1-a/kip-gone")
	f.mu.Unlock()
	f.insertDone = true
	// A restarted plugin does not see it; the requestId replays the DONE
	// operation; the instance is gone: terminated, nothing started.
	resp, err := configured(t, testConfig(f)).Launch(ctx, launchRequest("kip-gone"))
	if err != nil || resp.Instance.State != pluginapi.StateTerminated || resp.Instance.ID != "us-central1-a/kip-gone" {
		t.Fatalf("Launch of a deleted cell = %+v, %v; want it terminated", resp, err)
	}
	if f.callCount("instances.get") != 1 || len(f.instances) != 0 {
		t.Errorf("gets %d, instances %d; want one get and nothing started", f.callCount("instances.get"), len(f.instances))
	}

	// Another cluster's instance of the name.
	f.insertDone = false
	other := configured(t, testConfig(f))
	if _, err := other.Launch(ctx, launchRequest("kip-taken")); err != nil {
		t.Fatal(err)
	}
	mine := newProvider()
	if _, err := mine.Configure(ctx, &pluginapi.ConfigureRequest{ClusterID: "another-cluster", Config: mustJSON(t, testConfig(f))}); err != nil {
		t.Fatal(err)
	}
	_, err = mine.Launch(ctx, launchRequest("kip-taken"))
	if err == nil || !strings.Contains(err.Error(), "already has an instance named kip-taken") {
		t.Errorf("Launch of another cluster's name = %v", err)
	}
}

// Launch after Terminate answers the terminated instance and starts
// nothing, in the same process and after a restart.
func TestLaunchAfterTerminate(t *testing.T) {
	f := newFakeCompute(t)
	ctx := t.Context()
	p := configured(t, testConfig(f))
	first, err := p.Launch(ctx, launchRequest("kip-ended"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Terminate(ctx, &pluginapi.TerminateRequest{ID: first.Instance.ID}); err != nil {
		t.Fatal(err)
	}
	again, err := p.Launch(ctx, launchRequest("kip-ended"))
	if err != nil || again.Instance.ID != first.Instance.ID || (again.Instance.State != pluginapi.StateTerminating && again.Instance.State != pluginapi.StateTerminated) {
		t.Fatalf("Launch after Terminate = %+v, %v", again, err)
	}
	f.finishDeletes()
	f.insertDone = true // what Compute Engine answers a known requestId: its DONE operation
	restarted, err := configured(t, testConfig(f)).Launch(ctx, launchRequest("kip-ended"))
	if err != nil || restarted.Instance.State != pluginapi.StateTerminated {
		t.Fatalf("Launch after Terminate and a restart = %+v, %v", restarted, err)
	}
	if n := f.callCount("instances.insert"); n != 2 || len(f.instances) != 0 {
		t.Errorf("%d inserts (want 2: the launch and its replay), %d instances (want 0)", n, len(f.instances))
	}
}

// A cell ID that is no instance name is refused before any call.
func TestLaunchRefusesBadCellIDs(t *testing.T) {
	f := newFakeCompute(t)
	p := configured(t, testConfig(f))
	for _, id := range []string{"", "Kip-upper", "kip_under", "1kip", strings.Repeat("k", 64), "kip-"} {
		req := launchRequest("x")
		req.CellID = id
		if _, err := p.Launch(t.Context(), req); err == nil {
			t.Errorf("cell ID %q launched", id)
		}
	}
	req := launchRequest("kip-zone")
	req.Zones = []string{"europe-west1-b"}
	if _, err := p.Launch(t.Context(), req); !pluginapi.IsInsufficientCapacity(err) {
		t.Errorf("a zone not configured = %v, want InsufficientCapacity", err)
	}
	if n := f.callCount("instances.insert"); n != 0 {
		t.Errorf("%d inserts", n)
	}
}

// checkInsert checks the insert of TestLaunchInsertsTheCell: name, type,
// labels, metadata, network, boot disk, scheduling, network tags and
// service account.
func checkInsert(t *testing.T, body map[string]any, req *pluginapi.LaunchRequest) {
	t.Helper()
	if body["name"] != "kip-cell-1" || body["machineType"] != "zones/us-central1-a/machineTypes/e2-small" {
		t.Errorf("insert name %v, machineType %v", body["name"], body["machineType"])
	}
	labels := body["labels"].(map[string]any)
	wantLabels := map[string]any{"kip-cluster": "test-cluster", "kip-node": "kip", "kip-cell": "kip-cell-1", "kip-pod-uid": "uid-kip-cell-1"}
	if diff := cmp.Diff(wantLabels, labels); diff != "" {
		t.Errorf("labels (-want +got):\n%s", diff)
	}
	meta := map[string]string{}
	for _, it := range body["metadata"].(map[string]any)["items"].([]any) {
		m := it.(map[string]any)
		meta[m["key"].(string)] = m["value"].(string)
	}
	if meta[metadataBootstrap] != string(req.Bootstrap) || !strings.Contains(meta[metadataTags], `"kipcell.io/extra":"Some Value"`) {
		t.Errorf("metadata = %v", meta)
	}
	if _, ok := meta[metadataStartup]; ok {
		t.Error("a startup-script without startupScript")
	}
	nic := body["networkInterfaces"].([]any)[0].(map[string]any)
	if !strings.HasSuffix(nic["subnetwork"].(string), "/regions/us-central1/subnetworks/cells") || nic["accessConfigs"] != nil ||
		fmt.Sprint(nic["aliasIpRanges"]) != "[map[ipCidrRange:/32]]" {
		t.Errorf("network interface %v, want the cells' subnetwork, no external address and one alias IP (the pod's)", nic)
	}
	disk := body["disks"].([]any)[0].(map[string]any)
	init := disk["initializeParams"].(map[string]any)
	if disk["boot"] != true || disk["autoDelete"] != true || !strings.HasSuffix(init["sourceImage"].(string), "/global/images/kip-cell-1") ||
		init["diskType"] != "zones/us-central1-a/diskTypes/pd-balanced" {
		t.Errorf("boot disk %v", disk)
	}
	sched := body["scheduling"].(map[string]any)
	if sched["provisioningModel"] != "STANDARD" || sched["instanceTerminationAction"] != nil {
		t.Errorf("scheduling %v", sched)
	}
	if tags := body["tags"].(map[string]any)["items"].([]any); len(tags) != 1 || tags[0] != "kip-cell" {
		t.Errorf("network tags %v", tags)
	}
	sa := body["serviceAccounts"].([]any)[0].(map[string]any)
	if sa["email"] != "cells@kip-test.iam.gserviceaccount.com" || sa["scopes"].([]any)[0] != defaultScope {
		t.Errorf("service account %v", sa)
	}
}

// A request's image is an image name in the cells' project or an image
// URL; anything else is refused.
func TestRequestedImage(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"kip-cell-2", "projects/kip-test/global/images/kip-cell-2"},
		{"projects/debian-cloud/global/images/family/debian-12", "projects/debian-cloud/global/images/family/debian-12"},
		{"https://www.googleapis.com/compute/v1/projects/p/global/images/img-1", "https://www.googleapis.com/compute/v1/projects/p/global/images/img-1"},
		{"global/images/img-1", "global/images/img-1"},
		{"Ami_0abc", ""}, {"projects/p/global/images/", ""}, {"gs://bucket/image.tar.gz", ""},
	} {
		got, err := requestedImage(fakeProject, tc.in)
		if got != tc.want || (err != nil) != (tc.want == "") {
			t.Errorf("requestedImage(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
}

// A wait that answers the operation still running is waited again, after
// a pause; a failed listing of the view does not fail the launch.
func TestLaunchWaitsAndGoesOnWithoutTheView(t *testing.T) {
	f := newFakeCompute(t)
	var pauses []time.Duration
	p := configured(t, testConfig(f), func(p *provider) {
		p.Sleep = func(ctx context.Context, d time.Duration) error { pauses = append(pauses, d); return nil }
	})
	f.waitsPending = 2
	f.failHTTP("instances.aggregatedList", 500, "internalError", "injected", 1)
	resp, err := p.Launch(t.Context(), launchRequest("kip-slow"))
	if err != nil || resp.Instance.State != pluginapi.StatePending {
		t.Fatalf("Launch = %+v, %v", resp, err)
	}
	if n := f.callCount("zoneOperations.wait"); n != 3 {
		t.Errorf("%d waits, want 3", n)
	}
	if want := []time.Duration{250 * time.Millisecond, 500 * time.Millisecond}; !slices.Equal(pauses, want) {
		t.Errorf("pauses %v, want %v", pauses, want)
	}
	if n := f.callCount("instances.insert"); n != 1 {
		t.Errorf("%d inserts, want 1", n)
	}
}

// launchTogether launches cells at once while the fake holds every
// operation running: the first alone (its operation waited for with
// zoneOperations.wait), then the others, until one zoneOperations.list
// asks for all of them; then it lets the operations end and returns the
// launches' errors.
func launchTogether(t *testing.T, p *provider, f *fakeCompute, cells ...string) []error {
	t.Helper()
	f.mu.Lock()
	f.holdOps = true
	f.mu.Unlock()
	errs := make([]chan error, len(cells))
	for i, cell := range cells {
		errs[i] = make(chan error, 1)
		go func() {
			_, err := p.Launch(t.Context(), launchRequest(cell))
			errs[i] <- err
		}()
		if i == 0 {
			eventuallyFake(t, f, "a wait for the first operation", func() bool { return f.calls["zoneOperations.wait"] > 0 })
		}
	}
	eventuallyFake(t, f, "a list of every operation", func() bool {
		q := f.queries["zoneOperations.list"]
		return len(q) > 0 && strings.Count(q[len(q)-1], "name") == len(cells)
	})
	f.mu.Lock()
	f.holdOps = false
	f.mu.Unlock()
	out := make([]error, len(cells))
	for i := range cells {
		out[i] = <-errs[i]
	}
	return out
}

// eventuallyFake waits until cond, called with f.mu held, holds.
func eventuallyFake(t *testing.T, f *fakeCompute, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		f.mu.Lock()
		ok := cond()
		f.mu.Unlock()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("waiting for %s: timed out", what)
		}
	}
}

// Launches of a zone under way together share their operations' calls:
// one alone is waited for with zoneOperations.wait, several with one
// zoneOperations.list of all their names, and the held wait of the first
// gives way as soon as a second joins.
func TestConcurrentLaunchesShareOperationCalls(t *testing.T) {
	f := newFakeCompute(t)
	p := configured(t, testConfig(f), func(p *provider) {
		p.Sleep = func(ctx context.Context, d time.Duration) error { time.Sleep(time.Millisecond); return ctx.Err() }
	})
	cells := []string{"kip-a", "kip-b", "kip-c"}
	for i, err := range launchTogether(t, p, f, cells...) {
		if err != nil {
			t.Errorf("Launch %s: %v", cells[i], err)
		}
	}
	waitsBefore := f.callCount("zoneOperations.wait")
	if n := f.callCount("instances.insert"); n != 3 {
		t.Errorf("%d inserts, want 3", n)
	}
	// Every launch is answered from the lists: after the first list, no
	// wait. The last list named all three operations.
	q := f.query("zoneOperations.list", f.callCount("zoneOperations.list")-1)
	for _, op := range []string{"operation-1", "operation-2", "operation-3"} {
		if !strings.Contains(q, op) {
			t.Errorf("the last zoneOperations.list (%s) does not ask for %s", q, op)
		}
	}
	// One launch alone again: one wait, no list.
	lists := f.callCount("zoneOperations.list")
	if _, err := p.Launch(t.Context(), launchRequest("kip-d")); err != nil {
		t.Fatal(err)
	}
	if n := f.callCount("zoneOperations.wait") - waitsBefore; n != 1 {
		t.Errorf("a launch alone made %d waits, want 1", n)
	}
	if n := f.callCount("zoneOperations.list"); n != lists {
		t.Errorf("a launch alone listed operations (%d lists, want %d)", n, lists)
	}
}

// A launch whose ctx ends stops waiting, and the zone's poller ends with
// the last waiter; an operation the lists stop showing fails its launch
// with a transient error (the host's retry replays the insert).
func TestOperationWaitsEnd(t *testing.T) {
	f := newFakeCompute(t)
	p := configured(t, testConfig(f), func(p *provider) {
		p.Sleep = func(ctx context.Context, d time.Duration) error { time.Sleep(time.Millisecond); return ctx.Err() }
	})
	f.mu.Lock()
	f.holdOps = true
	f.mu.Unlock()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		_, err := p.Launch(ctx, launchRequest("kip-cancelled"))
		done <- err
	}()
	eventuallyFake(t, f, "a wait", func() bool { return f.calls["zoneOperations.wait"] > 0 })
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("Launch after its ctx ended: %v, want context.Canceled", err)
	}
	ops := p.cfg.Load().ops
	eventuallyFake(t, f, "the poller's end", func() bool {
		ops.mu.Lock()
		defer ops.mu.Unlock()
		return len(ops.zones) == 0
	})

	// Two launches listed together; then the second's operation is
	// gone from Compute Engine's answers.
	errs := make(chan error, 2)
	for _, cell := range []string{"kip-kept", "kip-lost"} {
		go func() {
			_, err := p.Launch(t.Context(), launchRequest(cell))
			errs <- err
		}()
	}
	eventuallyFake(t, f, "a list of both operations", func() bool {
		q := f.queries["zoneOperations.list"]
		return len(q) > 0 && strings.Count(q[len(q)-1], "name") == 2
	})
	f.mu.Lock()
	var lost string
	for name, op := range f.ops {
		if strings.HasSuffix(op["targetLink"].(string), "/kip-lost") {
			lost = name
		}
	}
	delete(f.ops, lost)
	f.mu.Unlock()
	err := <-errs
	if !pluginapi.IsTransient(err) || !strings.Contains(err.Error(), lost) {
		t.Errorf("Launch whose operation is no longer listed: %v, want a transient error naming %s", err, lost)
	}
	f.mu.Lock()
	f.holdOps = false
	f.mu.Unlock()
	if err := <-errs; err != nil {
		t.Errorf("the other launch: %v", err)
	}
}
