package sdktest

import (
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	compute "cloud.google.com/go/compute/apiv1"
	"cloud.google.com/go/compute/apiv1/computepb"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/api/iterator"
	"google.golang.org/api/option"
	"google.golang.org/protobuf/proto"

	gcesim "github.com/kipcell/kip/test/cloudsim/gce"
)

const apiBase = "https://www.googleapis.com/compute/v1/projects/"

// readClients are the SDK's REST clients of the read surface.
type readClients struct {
	machineTypes *compute.MachineTypesClient
	zones        *compute.ZonesClient
	regions      *compute.RegionsClient
	images       *compute.ImagesClient
	subnetworks  *compute.SubnetworksClient
	networks     *compute.NetworksClient
}

// startReadSim starts a simulator with opts and the read clients pointed
// at it; c holds the instances client.
func startReadSim(t *testing.T, opts gcesim.Options) (*gcesim.Server, clients, readClients) {
	t.Helper()
	sim, c := startSim(t, opts)
	ctx := t.Context()
	o := []option.ClientOption{option.WithEndpoint(sim.URL()), option.WithoutAuthentication()}
	var rc readClients
	var err error
	for _, mk := range []func() error{
		func() error { rc.machineTypes, err = compute.NewMachineTypesRESTClient(ctx, o...); return err },
		func() error { rc.zones, err = compute.NewZonesRESTClient(ctx, o...); return err },
		func() error { rc.regions, err = compute.NewRegionsRESTClient(ctx, o...); return err },
		func() error { rc.images, err = compute.NewImagesRESTClient(ctx, o...); return err },
		func() error { rc.subnetworks, err = compute.NewSubnetworksRESTClient(ctx, o...); return err },
		func() error { rc.networks, err = compute.NewNetworksRESTClient(ctx, o...); return err },
	} {
		if err := mk(); err != nil {
			t.Fatalf("creating a client: %v", err)
		}
	}
	t.Cleanup(func() {
		_ = rc.machineTypes.Close()
		_ = rc.zones.Close()
		_ = rc.regions.Close()
		_ = rc.images.Close()
		_ = rc.subnetworks.Close()
		_ = rc.networks.Close()
	})
	return sim, c, rc
}

// TestMachineTypesAggregatedList: the iterator walks every zone's types
// page by page, as the plugin's ListInstanceTypes reads them.
func TestMachineTypesAggregatedList(t *testing.T) {
	sim, _, rc := startReadSim(t, gcesim.Options{MachineTypes: []gcesim.MachineType{
		{Name: "e2-micro", GuestCPUs: 2, MemoryMiB: 1024, SharedCPU: true},
		{Name: "n2-standard-2", GuestCPUs: 2, MemoryMiB: 8192, Zones: []string{zoneB}},
		{Name: "g2-standard-4", GuestCPUs: 4, MemoryMiB: 16384, Accelerator: "nvidia-l4", AcceleratorCount: 1, Zones: []string{zoneA}},
		{Name: "t2a-standard-1", GuestCPUs: 1, MemoryMiB: 4096, Arch: "ARM64", Zones: []string{zoneA}},
	}})
	wantZones := map[string][]string{
		"zones/" + zoneA:      {"e2-micro", "g2-standard-4", "t2a-standard-1"},
		"zones/" + zoneB:      {"e2-micro", "n2-standard-2"},
		"zones/us-central1-c": {"e2-micro"},
	}
	for _, maxResults := range []uint32{0, 2} {
		sim.ResetCalls()
		req := &computepb.AggregatedListMachineTypesRequest{Project: project}
		if maxResults != 0 {
			req.MaxResults = proto.Uint32(maxResults)
		}
		got := map[string][]string{}
		var g2 *computepb.MachineType
		for _, pair := range all(t, rc.machineTypes.AggregatedList(t.Context(), req).Next) {
			for _, mt := range pair.Value.GetMachineTypes() {
				got[pair.Key] = append(got[pair.Key], mt.GetName())
				if mt.GetName() == "g2-standard-4" {
					g2 = mt
				}
			}
		}
		if diff := cmp.Diff(wantZones, got); diff != "" {
			t.Errorf("maxResults %d: types per zone (-want +got):\n%s", maxResults, diff)
		}
		wantPages := map[uint32]int{0: 1, 2: 3}[maxResults]
		if n := sim.Calls()["compute.machineTypes.aggregatedList"]; n != wantPages {
			t.Errorf("maxResults %d: %d aggregatedList calls, want %d", maxResults, n, wantPages)
		}
		if g2.GetGuestCpus() != 4 || g2.GetMemoryMb() != 16384 || g2.GetIsSharedCpu() || g2.GetZone() != zoneA ||
			len(g2.GetAccelerators()) != 1 || g2.GetAccelerators()[0].GetGuestAcceleratorType() != "nvidia-l4" ||
			g2.GetAccelerators()[0].GetGuestAcceleratorCount() != 1 || g2.GetDeprecated() != nil ||
			g2.GetSelfLink() != apiBase+project+"/zones/"+zoneA+"/machineTypes/g2-standard-4" {
			t.Errorf("g2-standard-4 = %v", g2)
		}
	}
}

// TestMachineTypesGetAndList: get resolves predefined and custom types in
// a zone; list pages through a zone's types with a filter.
func TestMachineTypesGetAndList(t *testing.T) {
	ctx := t.Context()
	_, _, rc := startReadSim(t, gcesim.Options{})
	tests := []struct {
		name       string
		wantCPUs   int32
		wantMiB    int32
		wantShared bool
		wantStatus int
	}{
		{name: "e2-medium", wantCPUs: 2, wantMiB: 4096, wantShared: true},
		{name: "n2-standard-4", wantCPUs: 4, wantMiB: 16384},
		{name: "custom-4-8192", wantCPUs: 4, wantMiB: 8192},
		{name: "e2-custom-2-6144", wantCPUs: 2, wantMiB: 6144},
		{name: "n2-custom-8-16384", wantCPUs: 8, wantMiB: 16384},
		{name: "e2-custom-2-100", wantStatus: http.StatusBadRequest},
		{name: "z9-standard-2", wantStatus: http.StatusNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mt, err := rc.machineTypes.Get(ctx, &computepb.GetMachineTypeRequest{Project: project, Zone: zoneA, MachineType: tt.name})
			if tt.wantStatus != 0 {
				if code, _ := apiReason(err); code != tt.wantStatus {
					t.Fatalf("get = %v, %v; want %d", mt, err, tt.wantStatus)
				}
				return
			}
			if err != nil {
				t.Fatalf("get: %v", err)
			}
			if mt.GetName() != tt.name || mt.GetGuestCpus() != tt.wantCPUs || mt.GetMemoryMb() != tt.wantMiB || mt.GetIsSharedCpu() != tt.wantShared {
				t.Errorf("get = %v; want %d vCPUs, %d MiB, shared %v", mt, tt.wantCPUs, tt.wantMiB, tt.wantShared)
			}
		})
	}

	var names []string
	it := rc.machineTypes.List(ctx, &computepb.ListMachineTypesRequest{Project: project, Zone: zoneA, Filter: proto.String("isSharedCpu = true"), MaxResults: proto.Uint32(2)})
	for _, mt := range all(t, it.Next) {
		names = append(names, mt.GetName())
	}
	if diff := cmp.Diff([]string{"e2-micro", "e2-small", "e2-medium", "f1-micro", "g1-small"}, names); diff != "" {
		t.Errorf("shared-core types (-want +got):\n%s", diff)
	}
}

// TestZonesAndRegion: ZonesClient.List and Get, RegionsClient.Get.
func TestZonesAndRegion(t *testing.T) {
	ctx := t.Context()
	_, _, rc := startReadSim(t, gcesim.Options{})
	var names []string
	for _, z := range all(t, rc.zones.List(ctx, &computepb.ListZonesRequest{Project: project}).Next) {
		if z.GetStatus() != "UP" || z.GetRegion() != apiBase+project+"/regions/us-central1" {
			t.Errorf("zone %s: status %s, region %s", z.GetName(), z.GetStatus(), z.GetRegion())
		}
		names = append(names, z.GetName())
	}
	if diff := cmp.Diff([]string{zoneA, zoneB, "us-central1-c"}, names); diff != "" {
		t.Errorf("zones (-want +got):\n%s", diff)
	}
	if z, err := rc.zones.Get(ctx, &computepb.GetZoneRequest{Project: project, Zone: zoneB}); err != nil || z.GetSelfLink() != apiBase+project+"/zones/"+zoneB {
		t.Errorf("zones.get = %v, %v", z, err)
	}
	if _, err := rc.zones.Get(ctx, &computepb.GetZoneRequest{Project: project, Zone: "mars-north1-a"}); !isStatus(err, http.StatusNotFound, "notFound") {
		t.Errorf("zones.get of an unknown zone = %v; want 404 notFound", err)
	}
	r, err := rc.regions.Get(ctx, &computepb.GetRegionRequest{Project: project, Region: "us-central1"})
	if err != nil || r.GetStatus() != "UP" || len(r.GetZones()) != 3 || r.GetZones()[0] != apiBase+project+"/zones/"+zoneA {
		t.Errorf("regions.get = %v, %v", r, err)
	}
}

// TestImagesGetFromFamily: Debian's family in debian-cloud gives its
// newest image that is not deprecated; get reads a deprecated one.
func TestImagesGetFromFamily(t *testing.T) {
	ctx := t.Context()
	sim, _, rc := startReadSim(t, gcesim.Options{})
	im, err := rc.images.GetFromFamily(ctx, &computepb.GetFromFamilyImageRequest{Project: gcesim.DebianProject, Family: "debian-12"})
	if err != nil {
		t.Fatalf("getFromFamily: %v", err)
	}
	if im.GetName() != "debian-12-bookworm-v20261103" || im.GetFamily() != "debian-12" || im.GetStatus() != "READY" ||
		im.GetArchitecture() != "X86_64" || im.GetDeprecated() != nil ||
		im.GetSelfLink() != apiBase+"debian-cloud/global/images/debian-12-bookworm-v20261103" {
		t.Errorf("getFromFamily(debian-12) = %v", im)
	}
	arm, err := rc.images.GetFromFamily(ctx, &computepb.GetFromFamilyImageRequest{Project: gcesim.DebianProject, Family: "debian-12-arm64"})
	if err != nil || arm.GetArchitecture() != "ARM64" || !strings.HasPrefix(arm.GetName(), "debian-12-bookworm-arm64-v2026") {
		t.Errorf("getFromFamily(debian-12-arm64) = %v, %v", arm, err)
	}
	old, err := rc.images.Get(ctx, &computepb.GetImageRequest{Project: gcesim.DebianProject, Image: "debian-12-bookworm-v20260915"})
	if err != nil || old.GetDeprecated().GetState() != "DEPRECATED" || old.GetDeprecated().GetReplacement() != im.GetSelfLink() {
		t.Errorf("get of the deprecated image = %v, %v", old, err)
	}
	_, err = rc.images.GetFromFamily(ctx, &computepb.GetFromFamilyImageRequest{Project: gcesim.DebianProject, Family: "debian-99"})
	if !isStatus(err, http.StatusNotFound, "notFound") {
		t.Errorf("getFromFamily of an unknown family = %v; want 404 notFound", err)
	}
	want := map[string]int{"compute.images.getFromFamily": 3, "compute.images.get": 1}
	if diff := cmp.Diff(want, sim.Calls()); diff != "" {
		t.Errorf("calls (-want +got):\n%s", diff)
	}
}

// TestSubnetworksAndNetworksGet: the plugin reads its subnetwork's
// network and range.
func TestSubnetworksAndNetworksGet(t *testing.T) {
	ctx := t.Context()
	_, _, rc := startReadSim(t, gcesim.Options{})
	sn, err := rc.subnetworks.Get(ctx, &computepb.GetSubnetworkRequest{Project: project, Region: "us-central1", Subnetwork: "kip"})
	if err != nil {
		t.Fatalf("subnetworks.get: %v", err)
	}
	got := map[string]string{"network": sn.GetNetwork(), "ipCidrRange": sn.GetIpCidrRange(), "region": sn.GetRegion(), "gateway": sn.GetGatewayAddress()}
	want := map[string]string{"network": apiBase + project + "/global/networks/kip", "ipCidrRange": "10.10.0.0/20",
		"region": apiBase + project + "/regions/us-central1", "gateway": "10.10.0.1"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("subnetwork (-want +got):\n%s", diff)
	}
	_, err = rc.subnetworks.Get(ctx, &computepb.GetSubnetworkRequest{Project: project, Region: "us-central1", Subnetwork: "none"})
	if !isStatus(err, http.StatusNotFound, "notFound") {
		t.Errorf("subnetworks.get of an unknown subnetwork = %v; want 404 notFound", err)
	}
	n, err := rc.networks.Get(ctx, &computepb.GetNetworkRequest{Project: project, Network: "kip"})
	if err != nil || n.GetAutoCreateSubnetworks() || len(n.GetSubnetworks()) != 1 || n.GetSubnetworks()[0] != sn.GetSelfLink() {
		t.Errorf("networks.get = %v, %v", n, err)
	}
}

// TestGetSerialPortOutput: the boot log once the instance runs, read in
// two steps with start and next.
func TestGetSerialPortOutput(t *testing.T) {
	ctx := t.Context()
	clk := newClock()
	_, c, _ := startReadSim(t, gcesim.Options{Now: clk.Now, BootDelay: 10 * time.Second})
	mustInsert(t, c, spec{name: "cell-a", zone: zoneA, machineType: "e2-small"})
	read := func(start int64) *computepb.SerialPortOutput {
		t.Helper()
		out, err := c.instances.GetSerialPortOutput(ctx, &computepb.GetSerialPortOutputInstanceRequest{Project: project, Zone: zoneA, Instance: "cell-a", Port: proto.Int32(1), Start: proto.Int64(start)})
		if err != nil {
			t.Fatalf("getSerialPortOutput: %v", err)
		}
		return out
	}
	if out := read(0); out.GetContents() != "" || out.GetNext() != 0 {
		t.Errorf("before the boot: %v, want nothing", out)
	}
	clk.Advance(10 * time.Second)
	first := read(0)
	if !strings.Contains(first.GetContents(), "Linux version") || first.GetNext() != int64(len(first.GetContents())) {
		t.Errorf("after the boot: %v", first)
	}
	again := read(first.GetNext())
	if again.GetContents() != "" || again.GetStart() != first.GetNext() || again.GetNext() != first.GetNext() {
		t.Errorf("from next: %v, want nothing new", again)
	}
	_, err := c.instances.GetSerialPortOutput(ctx, &computepb.GetSerialPortOutputInstanceRequest{Project: project, Zone: zoneA, Instance: "none"})
	if !isStatus(err, http.StatusNotFound, "notFound") {
		t.Errorf("serial port of an unknown instance = %v; want 404 notFound", err)
	}
}

// TestInsertChecksReferencesWithTheSDK: the errors the plugin meets when
// its configuration names what does not exist.
func TestInsertChecksReferencesWithTheSDK(t *testing.T) {
	ctx := t.Context()
	_, c, _ := startReadSim(t, gcesim.Options{})
	tests := []struct {
		name       string
		mutate     func(*computepb.Instance)
		wantStatus int
		wantReason string
	}{
		{name: "debian family", mutate: func(in *computepb.Instance) {}},
		{name: "custom machine type", mutate: func(in *computepb.Instance) {
			in.MachineType = proto.String("zones/" + zoneA + "/machineTypes/e2-custom-4-8192")
		}},
		{name: "unknown machine type", wantStatus: http.StatusBadRequest, wantReason: "invalid", mutate: func(in *computepb.Instance) {
			in.MachineType = proto.String("zones/" + zoneA + "/machineTypes/e2-standard-3")
		}},
		{name: "unknown subnetwork", wantStatus: http.StatusNotFound, wantReason: "notFound", mutate: func(in *computepb.Instance) {
			in.NetworkInterfaces[0].Subnetwork = proto.String("regions/us-central1/subnetworks/cellz")
		}},
		{name: "unknown image family", wantStatus: http.StatusNotFound, wantReason: "notFound", mutate: func(in *computepb.Instance) {
			in.Disks[0].InitializeParams.SourceImage = proto.String("projects/debian-cloud/global/images/family/debian-10")
		}},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := &computepb.Instance{
				Name:              proto.String("cell-" + string(rune('a'+i))),
				MachineType:       proto.String("zones/" + zoneA + "/machineTypes/e2-small"),
				NetworkInterfaces: []*computepb.NetworkInterface{{Subnetwork: proto.String("regions/us-central1/subnetworks/kip")}},
				Disks: []*computepb.AttachedDisk{{Boot: proto.Bool(true), AutoDelete: proto.Bool(true), InitializeParams: &computepb.AttachedDiskInitializeParams{
					SourceImage: proto.String("projects/debian-cloud/global/images/family/debian-12"),
				}}},
			}
			tt.mutate(in)
			op, err := c.instances.Insert(ctx, &computepb.InsertInstanceRequest{Project: project, Zone: zoneA, InstanceResource: in})
			if tt.wantStatus != 0 {
				if !isStatus(err, tt.wantStatus, tt.wantReason) {
					t.Errorf("insert = %v; want %d %s", err, tt.wantStatus, tt.wantReason)
				}
				return
			}
			if err != nil {
				t.Fatalf("insert: %v", err)
			}
			if err := op.Wait(ctx); err != nil {
				t.Fatalf("wait: %v", err)
			}
		})
	}
}

// isStatus reports whether err is the client's error with this HTTP
// status and reason.
func isStatus(err error, status int, reason string) bool {
	code, r := apiReason(err)
	return code == status && r == reason
}

// all reads an SDK iterator to its end (next is its Next method).
func all[T any](t *testing.T, next func() (T, error)) []T {
	t.Helper()
	var out []T
	for {
		v, err := next()
		if errors.Is(err, iterator.Done) {
			return out
		}
		if err != nil {
			t.Fatalf("listing: %v", err)
		}
		out = append(out, v)
	}
}
