package aws

import (
	"strings"
	"testing"

	"github.com/kipcell/kip/pluginapi"
)

func TestTerminate(t *testing.T) {
	f := newFakeEC2(t)
	p := configured(t, testConfig(f))
	ctx := t.Context()
	launched, err := p.Launch(ctx, launchRequest("cell-1"))
	if err != nil {
		t.Fatal(err)
	}
	id := launched.Instance.ID
	resp, err := p.Terminate(ctx, &pluginapi.TerminateRequest{ID: id})
	if err != nil || resp.Instance.ID != id || resp.Instance.CellID != "cell-1" || resp.Instance.State != pluginapi.StateTerminating {
		t.Fatalf("Terminate = %+v, %v; want cell-1's instance terminating", resp, err)
	}
	// Describe shows what Terminate did, even from a snapshot taken before.
	d, err := p.Describe(ctx, &pluginapi.DescribeRequest{IDs: []string{id}})
	if err != nil || len(d.Instances) != 1 || d.Instances[0].State != pluginapi.StateTerminating {
		t.Errorf("Describe after Terminate = %+v, %v; want terminating", d, err)
	}
	// Again: still fine (EC2 answers terminated instances as they are).
	if _, err := p.Terminate(ctx, &pluginapi.TerminateRequest{ID: id}); err != nil {
		t.Errorf("Terminate twice = %v", err)
	}
	// A restarted plugin (an empty view) terminates it as well.
	if _, err := configured(t, testConfig(f)).Terminate(ctx, &pluginapi.TerminateRequest{ID: id}); err != nil {
		t.Errorf("Terminate from a restarted plugin = %v", err)
	}
}

func TestTerminateUnknownIsNotFound(t *testing.T) {
	f := newFakeEC2(t)
	p := configured(t, testConfig(f))
	for _, id := range []string{"i-0000000000000dead", "not-an-id"} {
		if _, err := p.Terminate(t.Context(), &pluginapi.TerminateRequest{ID: id}); !pluginapi.IsNotFound(err) {
			t.Errorf("Terminate(%s) = %v, want NotFound", id, err)
		}
	}
	if n := f.callCount("TerminateInstances"); n != 0 {
		t.Errorf("%d TerminateInstances calls for instances that do not exist", n)
	}
	// Gone between Describe and Terminate: EC2's NotFound is NotFound.
	id := f.add("running", cellTags(testCluster, "cell-gone"))
	f.fail("TerminateInstances", codeInstanceNotFound, 400, 1)
	if _, err := p.Terminate(t.Context(), &pluginapi.TerminateRequest{ID: id}); !pluginapi.IsNotFound(err) {
		t.Errorf("Terminate of a vanished instance = %v, want NotFound", err)
	}
}

func TestTerminateRefusesAnotherClustersInstance(t *testing.T) {
	f := newFakeEC2(t)
	p := configured(t, testConfig(f))
	for _, tags := range []map[string]string{cellTags("other", "cell-1"), {"Name": "database"}} {
		id := f.add("running", tags)
		_, err := p.Terminate(t.Context(), &pluginapi.TerminateRequest{ID: id})
		if err == nil || !strings.Contains(err.Error(), "refusing") {
			t.Errorf("Terminate of an instance tagged %v = %v, want a refusal", tags, err)
		}
		if got := f.instance(id).state; got != "running" {
			t.Errorf("instance is %s, want running", got)
		}
	}
}
