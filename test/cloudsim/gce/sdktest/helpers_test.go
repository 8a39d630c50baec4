package sdktest

import (
	"context"
	"errors"
	"testing"
	"time"

	compute "cloud.google.com/go/compute/apiv1"
	"cloud.google.com/go/compute/apiv1/computepb"
	"github.com/googleapis/gax-go/v2/apierror"
	"google.golang.org/api/googleapi"
	"google.golang.org/api/option"
	"google.golang.org/protobuf/proto"

	gcesim "github.com/kipcell/kip/test/cloudsim/gce"
	"github.com/kipcell/kip/test/cloudsim/simcells/cellstest"
)

const (
	project = "kip-test"
	zoneA   = "us-central1-a"
	zoneB   = "us-central1-b"
)

// newClock is a manual clock for Options.Now.
func newClock() *cellstest.Clock {
	return cellstest.NewClock(time.Date(2026, 11, 24, 9, 0, 0, 0, time.UTC))
}

// clients are the SDK's REST clients, pointed at a simulator.
type clients struct {
	instances  *compute.InstancesClient
	operations *compute.ZoneOperationsClient
	global     *compute.GlobalOperationsClient
}

// startSim starts a simulator for project with opts and returns it with
// the SDK's clients pointed at it, as the plugin will point them
// (option.WithEndpoint, option.WithoutAuthentication).
func startSim(t *testing.T, opts gcesim.Options) (*gcesim.Server, clients) {
	t.Helper()
	opts.Project = project
	if opts.Subnetworks == nil {
		// insert's instances are in the kip subnetwork, as the plugin's.
		opts.Subnetworks = []gcesim.Subnetwork{{Name: "default"}, {Name: "kip", Network: "kip", IPCIDRRange: "10.10.0.0/20"}}
	}
	sim := gcesim.New(opts)
	url, err := sim.Start()
	if err != nil {
		t.Fatalf("starting the simulator: %v", err)
	}
	t.Cleanup(func() { _ = sim.Close() })
	ctx := t.Context()
	o := []option.ClientOption{option.WithEndpoint(url), option.WithoutAuthentication()}
	ic, err := compute.NewInstancesRESTClient(ctx, o...)
	if err != nil {
		t.Fatalf("creating the instances client: %v", err)
	}
	oc, err := compute.NewZoneOperationsRESTClient(ctx, o...)
	if err != nil {
		t.Fatalf("creating the zone operations client: %v", err)
	}
	gc, err := compute.NewGlobalOperationsRESTClient(ctx, o...)
	if err != nil {
		t.Fatalf("creating the global operations client: %v", err)
	}
	t.Cleanup(func() { _ = ic.Close(); _ = oc.Close(); _ = gc.Close() })
	return sim, clients{ic, oc, gc}
}

// spec is the instance a test inserts.
type spec struct {
	name, zone, machineType, requestID string
	labels                             map[string]string
}

func insert(ctx context.Context, c clients, s spec) (*compute.Operation, error) {
	req := &computepb.InsertInstanceRequest{
		Project: project, Zone: s.zone,
		InstanceResource: &computepb.Instance{
			Name:        proto.String(s.name),
			MachineType: proto.String("zones/" + s.zone + "/machineTypes/" + s.machineType),
			Labels:      s.labels,
			Scheduling: &computepb.Scheduling{
				ProvisioningModel:         proto.String("SPOT"),
				InstanceTerminationAction: proto.String("DELETE"),
			},
			NetworkInterfaces: []*computepb.NetworkInterface{{Subnetwork: proto.String("regions/us-central1/subnetworks/kip")}},
		},
	}
	if s.requestID != "" {
		req.RequestId = proto.String(s.requestID)
	}
	return c.instances.Insert(ctx, req)
}

// mustInsert inserts s and waits for its operation, which must succeed.
func mustInsert(t *testing.T, c clients, s spec) {
	t.Helper()
	ctx := t.Context()
	op, err := insert(ctx, c, s)
	if err != nil {
		t.Fatalf("inserting %s: %v", s.name, err)
	}
	if err := op.Wait(ctx); err != nil {
		t.Fatalf("waiting for the insert of %s: %v", s.name, err)
	}
	if e := op.Proto().GetError(); e != nil {
		t.Fatalf("insert of %s failed: %v", s.name, e)
	}
}

func get(ctx context.Context, c clients, zone, name string) (*computepb.Instance, error) {
	return c.instances.Get(ctx, &computepb.GetInstanceRequest{Project: project, Zone: zone, Instance: name})
}

// apiReason is the HTTP status and the first reason of an error from the
// client, as the plugin will read them; 0 and "" for another error.
func apiReason(err error) (int, string) {
	var ae *apierror.APIError
	if !errors.As(err, &ae) {
		return 0, ""
	}
	var ge *googleapi.Error
	reason := ""
	if errors.As(err, &ge) && len(ge.Errors) > 0 {
		reason = ge.Errors[0].Reason
	}
	return ae.HTTPCode(), reason
}
