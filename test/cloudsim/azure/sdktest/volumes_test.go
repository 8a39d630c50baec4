package sdktest

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/kipcell/kip/pluginapi"
	"github.com/kipcell/kip/plugins/azure"
	azuresim "github.com/kipcell/kip/test/cloudsim/azure"
)

// configuredPlugin is a process of the azure plugin configured for the
// simulator at url, cluster c1, zone 1.
func configuredPlugin(t *testing.T, sim *azuresim.Server, url string) pluginapi.Provider {
	t.Helper()
	ca := filepath.Join(t.TempDir(), "arm-ca.pem")
	if err := os.WriteFile(ca, sim.CACert(), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := json.Marshal(map[string]any{
		"subscriptionID": azuresim.DefaultSubscription, "resourceGroup": azuresim.DefaultResourceGroup,
		"location": azuresim.DefaultLocation, "subnetID": subnetID, "zones": []string{"1"},
		"image":        map[string]any{"publisher": "Canonical", "offer": "ubuntu-24_04-lts", "sku": "server"},
		"sshPublicKey": "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKipKipKipKipKipKipKipKipKipKipKipKipKipKipKip kip-test",
		"endpoint":     url, "caBundle": ca, "withoutAuthentication": true,
	})
	if err != nil {
		t.Fatal(err)
	}
	p := azure.New(slog.New(slog.DiscardHandler))
	if _, err := p.Configure(t.Context(), &pluginapi.ConfigureRequest{ClusterID: "c1", Config: cfg}); err != nil {
		t.Fatalf("configuring the plugin: %v", err)
	}
	return p
}

// TestConcurrentAttachesLoseNoDisk attaches four disks to one VM at once
// from two processes of the plugin (two calls each): ARM takes one update
// of a VM at a time (409 Conflict while it is Updating) and a PATCH built
// on a stale read is refused (412 on If-Match), so every call must wait
// and read again; none may lose another's disk. Then it detaches them all
// at once. With no disk delay and no DiskStarter an update ends as it is
// accepted, and only If-Match keeps a PATCH built on a stale read from
// detaching another's disk.
func TestConcurrentAttachesLoseNoDisk(t *testing.T) {
	for _, tt := range []struct {
		name  string
		delay time.Duration
		cells bool
	}{{"updates that take time", 200 * time.Millisecond, true}, {"updates that end at once", 0, false}} {
		t.Run(tt.name, func(t *testing.T) {
			opts := azuresim.Options{DiskDelay: tt.delay, Logger: slog.New(slog.DiscardHandler)}
			if tt.cells {
				opts.Cells = newDiskCells()
			}
			concurrentAttaches(t, opts)
		})
	}
}

func concurrentAttaches(t *testing.T, opts azuresim.Options) {
	sim := azuresim.New(opts)
	url, err := sim.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sim.Close() })
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	procs := []pluginapi.Provider{configuredPlugin(t, sim, url), configuredPlugin(t, sim, url)}
	launched, err := procs[0].Launch(ctx, &pluginapi.LaunchRequest{
		CellID: "kip-vols", NodeName: "kip", PodUID: "uid-vols", PodNamespace: "default", PodName: "vols",
		InstanceType: "Standard_B2s", CapacityType: pluginapi.CapacityOnDemand, Zones: []string{"eastus-1"},
		Bootstrap: []byte(`{"cellID":"kip-vols"}`),
	})
	if err != nil {
		t.Fatalf("launching: %v", err)
	}
	vm := launched.Instance.ID
	disks := diskClient(t, sim, url)
	c := clients{disks: disks}
	var handles []string
	for i := range 4 {
		r, err := beginDisk(ctx, c, fmt.Sprintf("pv-c%d", i), "1", 1)
		if err != nil {
			t.Fatal(err)
		}
		handles = append(handles, str(r.ID))
	}

	var wg sync.WaitGroup
	devices := make([]string, len(handles))
	for i, h := range handles {
		wg.Go(func() {
			r, err := procs[i%2].(pluginapi.VolumeAttacher).AttachVolume(ctx, &pluginapi.AttachVolumeRequest{InstanceID: vm, Driver: "disk.csi.azure.com", VolumeHandle: h})
			if err != nil {
				t.Errorf("attaching %s: %v", h, err)
				return
			}
			devices[i] = r.Attachment.Device.Path
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	if got := slices.Compact(slices.Sorted(slices.Values(devices))); len(got) != len(handles) {
		t.Errorf("the attaches answered devices %q; want %d different ones", devices, len(handles))
	}
	attacher := procs[1].(pluginapi.VolumeAttacher)
	describe := func() map[string]pluginapi.VolumeAttachment {
		r, err := attacher.DescribeVolumeAttachments(ctx, &pluginapi.DescribeVolumeAttachmentsRequest{InstanceIDs: []string{vm}})
		if err != nil {
			t.Fatalf("describing: %v", err)
		}
		out := map[string]pluginapi.VolumeAttachment{}
		for _, a := range r.Attachments {
			out[a.VolumeHandle] = a
		}
		return out
	}
	eventually(t, "every disk to be attached", func() bool {
		as := describe()
		for _, h := range handles {
			if as[h].State != pluginapi.AttachmentAttached {
				return false
			}
		}
		return len(as) == len(handles)
	})
	as := describe()
	for i, h := range handles {
		if as[h].Device.Path != devices[i] {
			t.Errorf("disk %s attached at %s; AttachVolume answered %s", h, as[h].Device.Path, devices[i])
		}
		if d, _ := sim.Disk(rg, fmt.Sprintf("pv-c%d", i)); d.DiskState != azuresim.DiskAttached || d.VM != vm || azuresim.DevicePath(d.LUN) != devices[i] {
			t.Errorf("the simulator's disk %+v; want attached to %s at %s", d, vm, devices[i])
		}
	}

	for i, h := range handles {
		wg.Go(func() {
			if _, err := procs[i%2].(pluginapi.VolumeAttacher).DetachVolume(ctx, &pluginapi.DetachVolumeRequest{InstanceID: vm, Driver: "disk.csi.azure.com", VolumeHandle: h}); err != nil {
				t.Errorf("detaching %s: %v", h, err)
			}
		})
	}
	wg.Wait()
	eventually(t, "every disk to be detached", func() bool { return len(describe()) == 0 })
	for i := range handles {
		if d, _ := sim.Disk(rg, fmt.Sprintf("pv-c%d", i)); d.DiskState != azuresim.DiskUnattached {
			t.Errorf("the simulator's disk %+v; want Unattached", d)
		}
	}
	if _, err := attacher.DetachVolume(ctx, &pluginapi.DetachVolumeRequest{InstanceID: vm, Driver: "disk.csi.azure.com", VolumeHandle: handles[0]}); !pluginapi.IsNotFound(err) {
		t.Errorf("detaching a detached disk: %v; want NotFound", err)
	}
	t.Logf("ARM calls: %v", sim.Calls())
}
