package sdktest

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	compute "cloud.google.com/go/compute/apiv1"
	"cloud.google.com/go/compute/apiv1/computepb"

	"github.com/kipcell/kip/pluginapi/plugintest"
	"github.com/kipcell/kip/plugins/gce"
	gcesim "github.com/kipcell/kip/test/cloudsim/gce"
)

// TestGCEPluginConformance runs the plugin conformance suite on the gce
// plugin against the simulator: the real compute v1.74.0 clients over
// HTTP, GCE's states, operations, idempotency and validation.
func TestGCEPluginConformance(t *testing.T) {
	sim := gcesim.New(gcesim.Options{Project: project, BootDelay: 200 * time.Millisecond, OperationDelay: 50 * time.Millisecond,
		Logger: slog.New(slog.DiscardHandler)})
	url, err := sim.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sim.Close() })
	dc := diskClient(t, sim)
	var disks atomic.Int64
	config := func(edit func(map[string]any)) []byte {
		c := map[string]any{
			// One zone: the volume cases attach a disk of one instance's
			// zone to another instance, and the plugin spreads cells
			// without a zone over its zones.
			"project": project, "region": "us-central1", "zones": []string{zoneA}, "subnetwork": "default",
			"image":    map[string]any{"project": "debian-cloud", "family": "debian-12"},
			"endpoint": url, "withoutAuthentication": true,
		}
		if edit != nil {
			edit(c)
		}
		data, err := json.Marshal(c)
		if err != nil {
			t.Fatal(err)
		}
		return data
	}
	createVolume := func(ctx context.Context, zone string) (string, error) {
		name := fmt.Sprintf("kip-disk-%d", disks.Add(1))
		op, err := insertDisk(ctx, dc, zone, name)
		if err == nil {
			err = op.Wait(ctx)
		}
		if err != nil {
			return "", err
		}
		return "projects/" + project + "/zones/" + zone + "/disks/" + name, nil
	}
	plugintest.Run(t, gce.New, plugintest.Config{
		Plugin: config(nil),
		Invalid: []plugintest.InvalidConfig{
			{Config: config(func(c map[string]any) { delete(c, "project") }), Key: "project"},
			{Config: config(func(c map[string]any) { c["subnetwork"] = "nowhere" }), Key: "subnetwork"},
			{Config: config(func(c map[string]any) {
				c["image"] = map[string]any{"project": "debian-cloud", "family": "debian-99"}
			}), Key: "image.family"},
			{Config: config(func(c map[string]any) { c["zones"] = []string{"us-central1-a", "europe-west1-b"} }), Key: "zones[1]"},
		},
		// Real disks through the SDK: disks.insert, then its operation;
		// deleted with disks.delete once the suite's instances let go of
		// them (resourceInUseByAnotherResource until then).
		OtherZone:    zoneB,
		CreateVolume: createVolume,
		// insertDisk's disks are pd-balanced, which no N4 machine takes.
		IncompatibleInstanceType: "n4-standard-2",
		IncompatibleVolume:       func(ctx context.Context, zone, _ string) (string, error) { return createVolume(ctx, zone) },
		DeleteVolume:             func(ctx context.Context, handle string) error { return deleteDisk(ctx, dc, handle) },
		InstanceType:             "e2-small",
		ReadyTimeout:             30 * time.Second,
		UnknownInstanceID:        "us-central1-a/kip-never-launched",
	})
	for _, in := range sim.Instances() {
		if in.Status != "STOPPING" && in.Status != "TERMINATED" && !in.Gone {
			t.Errorf("the suite left instance %s/%s %s", in.Zone, in.Name, in.Status)
		}
		// Every instance that got an address has the pod's alias IP.
		if in.Address != "" && in.AliasIP == "" {
			t.Errorf("instance %s/%s at %s has no alias IP (the pod's)", in.Zone, in.Name, in.Address)
		}
	}
	for i := range disks.Load() {
		for _, zone := range []string{zoneA, zoneB} {
			if d, ok := sim.Disk(zone, fmt.Sprintf("kip-disk-%d", i+1)); ok && !d.Gone && d.Status != "DELETING" {
				t.Errorf("the suite left disk %s/%s %s, used by %v", zone, d.Name, d.Status, d.Users)
			}
		}
	}
	t.Logf("Compute calls: %v", sim.Calls())
}

// deleteDisk deletes the disk of a PD CSI handle and waits for it,
// retrying while an instance the suite deleted still holds it (Compute
// Engine lets go of a deleted instance's disks once it is TERMINATED).
func deleteDisk(ctx context.Context, dc *compute.DisksClient, handle string) error {
	parts := strings.Split(handle, "/") // projects/p/zones/z/disks/d
	if len(parts) != 6 {
		return fmt.Errorf("disk handle %q is not projects/<p>/zones/<z>/disks/<d>", handle)
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		op, err := dc.Delete(ctx, &computepb.DeleteDiskRequest{Project: parts[1], Zone: parts[3], Disk: parts[5]})
		if err == nil {
			return op.Wait(ctx)
		}
		if !isStatus(err, http.StatusBadRequest, "resourceInUseByAnotherResource") {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("deleting disk %s: %w (last: %w)", handle, ctx.Err(), err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}
