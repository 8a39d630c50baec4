package gcesim

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// call sends one request to sim as the client would and decodes the JSON
// answer.
func call(t *testing.T, sim *Server, method, path, body string) (int, map[string]any) {
	t.Helper()
	req := httptest.NewRequest(method, "/compute/v1/projects/"+sim.opts.Project+"/"+path, strings.NewReader(body))
	rec := httptest.NewRecorder()
	sim.ServeHTTP(rec, req)
	var out map[string]any
	if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
		t.Fatalf("%s %s: answer %q is not JSON: %v", method, path, rec.Body.String(), err)
	}
	return rec.Code, out
}

func newTestSim(opts Options) *Server {
	opts.Logger = slog.New(slog.DiscardHandler)
	return New(opts)
}

// TestDefaultMachineTypesMatchTheCatalog keeps DefaultMachineTypes equal
// to the plugin's catalog (read as a file: the simulator does not import
// the plugin) in vCPUs, memory, shared core, GPUs and architecture.
func TestDefaultMachineTypesMatchTheCatalog(t *testing.T) {
	data, err := os.ReadFile("../../../plugins/gce/catalog/gce.json")
	if err != nil {
		t.Fatal(err)
	}
	var catalog struct {
		Types []struct {
			Name             string `json:"name"`
			VCPU             int    `json:"vcpu"`
			MemoryMiB        int    `json:"memoryMiB"`
			Arch             string `json:"arch"`
			BaselineMilliCPU int    `json:"baselineMilliCPU"`
			GPU              *struct {
				Count int `json:"count"`
			} `json:"gpu"`
		} `json:"types"`
	}
	if err := json.Unmarshal(data, &catalog); err != nil {
		t.Fatal(err)
	}
	type shape struct {
		CPUs, MiB, GPUs int
		Shared          bool
		Arch            string
	}
	want := map[string]shape{}
	for _, ct := range catalog.Types {
		s := shape{CPUs: ct.VCPU, MiB: ct.MemoryMiB, Shared: ct.BaselineMilliCPU > 0, Arch: map[string]string{"amd64": "X86_64", "arm64": "ARM64"}[ct.Arch]}
		if ct.GPU != nil {
			s.GPUs = ct.GPU.Count
		}
		want[ct.Name] = s
	}
	for _, mt := range DefaultMachineTypes {
		w, ok := want[mt.Name]
		if !ok {
			t.Errorf("%s is not in the catalog", mt.Name)
			continue
		}
		got := shape{CPUs: mt.GuestCPUs, MiB: mt.MemoryMiB, GPUs: mt.AcceleratorCount, Shared: mt.SharedCPU, Arch: cmpOrX86(mt.Arch)}
		if diff := cmp.Diff(w, got); diff != "" {
			t.Errorf("%s (-catalog +simulator):\n%s", mt.Name, diff)
		}
	}
}

func cmpOrX86(arch string) string {
	if arch == "" {
		return "X86_64"
	}
	return arch
}

func TestCustomMachineType(t *testing.T) {
	tests := []struct {
		name       string
		wantCustom bool
		want       MachineType
		wantWhy    string // a part of it; "" for a valid type
	}{
		{name: "e2-small"},
		{name: "custom-4-8192", wantCustom: true, want: MachineType{Name: "custom-4-8192", GuestCPUs: 4, MemoryMiB: 8192}},
		{name: "custom-1-1024", wantCustom: true, want: MachineType{Name: "custom-1-1024", GuestCPUs: 1, MemoryMiB: 1024}},
		{name: "e2-custom-2-4096", wantCustom: true, want: MachineType{Name: "e2-custom-2-4096", GuestCPUs: 2, MemoryMiB: 4096}},
		{name: "n2-custom-36-18432", wantCustom: true, want: MachineType{Name: "n2-custom-36-18432", GuestCPUs: 36, MemoryMiB: 18432}},
		{name: "n2-custom-2-32768-ext", wantCustom: true, want: MachineType{Name: "n2-custom-2-32768-ext", GuestCPUs: 2, MemoryMiB: 32768}},
		{name: "e2-custom-small-3072", wantCustom: true, want: MachineType{Name: "e2-custom-small-3072", GuestCPUs: 2, MemoryMiB: 3072, SharedCPU: true}},
		{name: "custom-4-8000", wantCustom: true, wantWhy: "multiple of 256MiB"},
		{name: "custom-3-6144", wantCustom: true, wantWhy: "Invalid number of vCPUs"},
		{name: "n2-custom-34-17408", wantCustom: true, wantWhy: "Invalid number of vCPUs"},
		{name: "e2-custom-2-32768", wantCustom: true, wantWhy: "between 1024MiB and 16384MiB"},
		{name: "n2-custom-2-32768", wantCustom: true, wantWhy: "between 1024MiB and 16384MiB"},
		{name: "e2-custom-32-262144", wantCustom: true, wantWhy: "at most 131072MiB"},
		{name: "c2-custom-4-8192", wantCustom: true, wantWhy: "not available for the C2"},
		{name: "n2-custom-small-2048", wantCustom: true, wantWhy: "E2's only"},
		{name: "e2-custom-micro-4096", wantCustom: true, wantWhy: "between 1024MiB and 2048MiB"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, isCustom, why := customMachineType(tt.name)
			if isCustom != tt.wantCustom {
				t.Fatalf("custom = %v, want %v", isCustom, tt.wantCustom)
			}
			if tt.wantWhy != "" {
				if !strings.Contains(why, tt.wantWhy) {
					t.Errorf("why = %q, want it to say %q", why, tt.wantWhy)
				}
				return
			}
			if why != "" {
				t.Fatalf("refused: %s", why)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("type (-want +got):\n%s", diff)
			}
		})
	}
}

// TestMachineTypesPerZone: a type answers only in the zones that offer
// it; a custom type where its series is offered.
func TestMachineTypesPerZone(t *testing.T) {
	sim := newTestSim(Options{Project: "p", MachineTypes: []MachineType{
		{Name: "e2-small", GuestCPUs: 2, MemoryMiB: 2048, SharedCPU: true},
		{Name: "n2-standard-2", GuestCPUs: 2, MemoryMiB: 8192, Zones: []string{"us-central1-b"}},
	}})
	tests := []struct {
		zone, name string
		wantStatus int
		wantReason string
	}{
		{zone: "us-central1-a", name: "e2-small", wantStatus: http.StatusOK},
		{zone: "us-central1-b", name: "n2-standard-2", wantStatus: http.StatusOK},
		{zone: "us-central1-a", name: "n2-standard-2", wantStatus: http.StatusNotFound, wantReason: "notFound"},
		{zone: "us-central1-a", name: "e2-custom-4-8192", wantStatus: http.StatusOK},
		{zone: "us-central1-a", name: "n2-custom-4-8192", wantStatus: http.StatusNotFound, wantReason: "notFound"},
		{zone: "us-central1-b", name: "n2-custom-4-8192", wantStatus: http.StatusOK},
		{zone: "us-central1-a", name: "custom-4-8192", wantStatus: http.StatusNotFound, wantReason: "notFound"},
		{zone: "us-central1-a", name: "e2-custom-4-100", wantStatus: http.StatusBadRequest, wantReason: "invalid"},
		{zone: "us-central1-a", name: "m1-ultramem-40", wantStatus: http.StatusNotFound, wantReason: "notFound"},
	}
	for _, tt := range tests {
		t.Run(tt.zone+"/"+tt.name, func(t *testing.T) {
			status, out := call(t, sim, http.MethodGet, "zones/"+tt.zone+"/machineTypes/"+tt.name, "")
			if status != tt.wantStatus || reasonOf(out) != tt.wantReason {
				t.Errorf("get = %d %q, want %d %q: %v", status, reasonOf(out), tt.wantStatus, tt.wantReason, out)
			}
		})
	}
	_, out := call(t, sim, http.MethodGet, "zones/us-central1-a/machineTypes", "")
	items, _ := out["items"].([]any)
	if len(items) != 1 {
		t.Errorf("list of us-central1-a has %d types, want e2-small only: %v", len(items), out)
	}
}

// TestFamilyImage: getFromFamily is the newest image of the family that
// is not deprecated, in the project that publishes it.
func TestFamilyImage(t *testing.T) {
	day := func(d int) time.Time { return time.Date(2026, 11, d, 0, 0, 0, 0, time.UTC) }
	sim := newTestSim(Options{Project: "p", Images: []Image{
		{Project: "os", Name: "os-v1", Family: "os", Created: day(1)},
		{Project: "os", Name: "os-v3", Family: "os", Created: day(3)},
		{Project: "os", Name: "os-v4", Family: "os", Created: day(4), Deprecated: "DEPRECATED"},
		{Project: "os", Name: "os-v2", Family: "os", Created: day(2)},
		{Project: "other", Name: "os-v9", Family: "os", Created: day(9)},
		{Name: "mine", Family: "kip-cell", Created: day(5)},
	}})
	tests := []struct {
		path, want string
	}{
		{path: "projects/os/global/images/family/os", want: "os-v3"},
		{path: "projects/other/global/images/family/os", want: "os-v9"},
		{path: "projects/p/global/images/family/kip-cell", want: "mine"},
		{path: "projects/os/global/images/os-v4", want: "os-v4"},
		{path: "projects/os/global/images/family/none"},
		{path: "projects/p/global/images/family/os"},
		{path: "projects/os/global/images/mine"},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			req := httptest.NewRequest(http.MethodGet, "/compute/v1/"+tt.path, nil)
			rec := httptest.NewRecorder()
			sim.ServeHTTP(rec, req)
			var out map[string]any
			_ = json.Unmarshal(rec.Body.Bytes(), &out)
			if tt.want == "" {
				if rec.Code != http.StatusNotFound || reasonOf(out) != "notFound" {
					t.Errorf("got %d %v, want 404 notFound", rec.Code, out)
				}
				return
			}
			if out["name"] != tt.want {
				t.Errorf("got %d %v, want %s", rec.Code, out["name"], tt.want)
			}
		})
	}
	_, out := call(t, sim, http.MethodGet, "global/images/mine", "")
	if out["selfLink"] != apiBase+"projects/p/global/images/mine" {
		t.Errorf("selfLink %v", out["selfLink"])
	}
}

// TestInsertChecksReferences: insert refuses a machine type, network,
// subnetwork or image that does not exist as GCE refuses it.
func TestInsertChecksReferences(t *testing.T) {
	tests := []struct {
		name       string
		body       string
		wantStatus int
		wantReason string
	}{
		{name: "all known", wantStatus: http.StatusOK,
			body: `{"name":"a","machineType":"zones/us-central1-a/machineTypes/e2-small","networkInterfaces":[{"network":"global/networks/default","subnetwork":"regions/us-central1/subnetworks/default"}],"disks":[{"boot":true,"initializeParams":{"sourceImage":"projects/debian-cloud/global/images/family/debian-12"}}]}`},
		{name: "custom type, full URLs", wantStatus: http.StatusOK,
			body: `{"name":"a","machineType":"https://www.googleapis.com/compute/v1/projects/p/zones/us-central1-a/machineTypes/e2-custom-4-8192","networkInterfaces":[{"subnetwork":"https://www.googleapis.com/compute/v1/projects/p/regions/us-central1/subnetworks/default"}],"disks":[{"initializeParams":{"sourceImage":"https://www.googleapis.com/compute/v1/projects/debian-cloud/global/images/debian-12-bookworm-v20260915"}}]}`},
		{name: "unknown machine type", wantStatus: http.StatusBadRequest, wantReason: "invalid",
			body: `{"name":"a","machineType":"zones/us-central1-a/machineTypes/e2-huge"}`},
		{name: "custom type outside its limits", wantStatus: http.StatusBadRequest, wantReason: "invalid",
			body: `{"name":"a","machineType":"zones/us-central1-a/machineTypes/custom-3-3072"}`},
		{name: "unknown subnetwork", wantStatus: http.StatusNotFound, wantReason: "notFound",
			body: `{"name":"a","machineType":"zones/us-central1-a/machineTypes/e2-small","networkInterfaces":[{"subnetwork":"regions/us-central1/subnetworks/none"}]}`},
		{name: "subnetwork of another project", wantStatus: http.StatusNotFound, wantReason: "notFound",
			body: `{"name":"a","machineType":"zones/us-central1-a/machineTypes/e2-small","networkInterfaces":[{"subnetwork":"projects/host/regions/us-central1/subnetworks/default"}]}`},
		{name: "unknown network", wantStatus: http.StatusNotFound, wantReason: "notFound",
			body: `{"name":"a","machineType":"zones/us-central1-a/machineTypes/e2-small","networkInterfaces":[{"network":"global/networks/none"}]}`},
		{name: "unknown image family", wantStatus: http.StatusNotFound, wantReason: "notFound",
			body: `{"name":"a","machineType":"zones/us-central1-a/machineTypes/e2-small","disks":[{"initializeParams":{"sourceImage":"projects/debian-cloud/global/images/family/debian-99"}}]}`},
		{name: "image of the project that does not exist", wantStatus: http.StatusNotFound, wantReason: "notFound",
			body: `{"name":"a","machineType":"zones/us-central1-a/machineTypes/e2-small","disks":[{"initializeParams":{"sourceImage":"global/images/debian-12-bookworm-v20261103"}}]}`},
		{name: "obsolete image", wantStatus: http.StatusBadRequest, wantReason: "invalid",
			body: `{"name":"a","machineType":"zones/us-central1-a/machineTypes/e2-small","disks":[{"initializeParams":{"sourceImage":"projects/debian-cloud/global/images/debian-11-bullseye-v20250101"}}]}`},
		{name: "arm64 image on an x86 type", wantStatus: http.StatusBadRequest, wantReason: "invalid",
			body: `{"name":"a","machineType":"zones/us-central1-a/machineTypes/e2-small","disks":[{"boot":true,"initializeParams":{"sourceImage":"projects/debian-cloud/global/images/family/debian-12-arm64"}}]}`},
		{name: "x86 image on an arm64 type", wantStatus: http.StatusBadRequest, wantReason: "invalid",
			body: `{"name":"a","machineType":"zones/us-central1-a/machineTypes/t2a-standard-1","disks":[{"boot":true,"initializeParams":{"sourceImage":"projects/debian-cloud/global/images/family/debian-12"}}]}`},
		{name: "arm64 image on an arm64 type", wantStatus: http.StatusOK,
			body: `{"name":"a","machineType":"zones/us-central1-a/machineTypes/t2a-standard-1","disks":[{"boot":true,"initializeParams":{"sourceImage":"projects/debian-cloud/global/images/family/debian-12-arm64"}}]}`},
		{name: "alias IP of one address", wantStatus: http.StatusOK, body: `{"name":"a","machineType":"zones/us-central1-a/machineTypes/e2-small","networkInterfaces":[{"subnetwork":"regions/us-central1/subnetworks/default","aliasIpRanges":[{"ipCidrRange":"/32"}]}]}`},
		{name: "alias IP range not a range", wantStatus: http.StatusBadRequest, wantReason: "invalid", body: `{"name":"a","machineType":"zones/us-central1-a/machineTypes/e2-small","networkInterfaces":[{"subnetwork":"regions/us-central1/subnetworks/default","aliasIpRanges":[{"ipCidrRange":"ten"}]}]}`},
		{name: "alias IP netmask out of range", wantStatus: http.StatusBadRequest, wantReason: "invalid", body: `{"name":"a","machineType":"zones/us-central1-a/machineTypes/e2-small","networkInterfaces":[{"subnetwork":"regions/us-central1/subnetworks/default","aliasIpRanges":[{"ipCidrRange":"/33"}]}]}`},
		{name: "alias IP of a secondary range", wantStatus: http.StatusBadRequest, wantReason: "invalid", body: `{"name":"a","machineType":"zones/us-central1-a/machineTypes/e2-small","networkInterfaces":[{"subnetwork":"regions/us-central1/subnetworks/default","aliasIpRanges":[{"ipCidrRange":"/32","subnetworkRangeName":"pods"}]}]}`},
		{name: "malformed image", wantStatus: http.StatusBadRequest, wantReason: "invalid",
			body: `{"name":"a","machineType":"zones/us-central1-a/machineTypes/e2-small","disks":[{"initializeParams":{"sourceImage":"debian-12"}}]}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			images := append([]Image{{Project: DebianProject, Name: "debian-11-bullseye-v20250101", Family: "debian-11", Deprecated: "OBSOLETE"}}, DefaultImages...)
			sim := newTestSim(Options{Project: "p", Images: images})
			status, out := call(t, sim, http.MethodPost, "zones/us-central1-a/instances", tt.body)
			if status != tt.wantStatus || reasonOf(out) != tt.wantReason {
				t.Errorf("insert = %d %q, want %d %q: %v", status, reasonOf(out), tt.wantStatus, tt.wantReason, out)
			}
			if created := len(sim.Instances()) == 1; created != (tt.wantStatus == http.StatusOK) {
				t.Errorf("instance created = %v, want %v", created, tt.wantStatus == http.StatusOK)
			}
		})
	}
}

// TestSerialPortOutput: nothing before the instance runs, then the boot
// log with the startup script's lines; start and next page through it.
func TestSerialPortOutput(t *testing.T) {
	// The calls are synchronous (ServeHTTP): the clock needs no lock.
	now := time.Date(2026, 11, 24, 9, 0, 0, 0, time.UTC)
	sim := newTestSim(Options{Project: "p", Now: func() time.Time { return now }, BootDelay: 20 * time.Second})
	body := `{"name":"cell-a","machineType":"zones/us-central1-a/machineTypes/e2-small",` +
		`"metadata":{"items":[{"key":"startup-script","value":"#!/bin/sh\nexec kip-cell --bootstrap /run/kip/bootstrap.json\n"}]}}`
	if status, out := call(t, sim, http.MethodPost, "zones/us-central1-a/instances", body); status != http.StatusOK {
		t.Fatalf("insert: %d %v", status, out)
	}
	serial := func(query string) (int, map[string]any) {
		return call(t, sim, http.MethodGet, "zones/us-central1-a/instances/cell-a/serialPort"+query, "")
	}
	_, out := serial("")
	if out["contents"] != "" || out["start"] != "0" || out["next"] != "0" {
		t.Errorf("while PROVISIONING: %v, want nothing", out)
	}
	now = now.Add(20 * time.Second)
	_, out = serial("?port=1")
	all, _ := out["contents"].(string)
	for _, want := range []string{"Linux version", "Found startup-script in metadata.", "kip-cell boot:", "cell-a login:"} {
		if !strings.Contains(all, want) {
			t.Errorf("boot log does not say %q:\n%s", want, all)
		}
	}
	if out["kind"] != "compute#serialPortOutput" || out["next"] != strconv.Itoa(len(all)) {
		t.Errorf("kind %v, next %v; want compute#serialPortOutput, %d", out["kind"], out["next"], len(all))
	}
	tests := []struct {
		query, wantStart, wantContents string
	}{
		{query: "?start=10", wantStart: "10", wantContents: all[10:]},
		{query: "?start=-5", wantStart: strconv.Itoa(len(all) - 5), wantContents: all[len(all)-5:]},
		{query: "?start=" + strconv.Itoa(len(all)+100), wantStart: strconv.Itoa(len(all))},
		{query: "?port=2", wantStart: "0"},
	}
	for _, tt := range tests {
		_, out := serial(tt.query)
		if out["start"] != tt.wantStart || out["contents"] != tt.wantContents {
			t.Errorf("%s: start %v, contents %q; want %s, %q", tt.query, out["start"], out["contents"], tt.wantStart, tt.wantContents)
		}
	}
	if status, out := serial("?port=5"); status != http.StatusBadRequest || reasonOf(out) != "invalid" {
		t.Errorf("port 5 = %d %v, want 400 invalid", status, out)
	}
	if status, out := call(t, sim, http.MethodGet, "zones/us-central1-a/instances/none/serialPort", ""); status != http.StatusNotFound {
		t.Errorf("serial port of an unknown instance = %d %v, want 404", status, out)
	}
}

// TestZonesRegionsNetworks: zones, the region, networks and subnetworks
// as GCE writes them; unknown ones are notFound.
func TestZonesRegionsNetworks(t *testing.T) {
	sim := newTestSim(Options{Project: "p", Region: "europe-west1", Zones: []string{"europe-west1-b", "europe-west1-c"},
		Subnetworks: []Subnetwork{{Name: "cells", Network: "kip", IPCIDRRange: "10.20.0.0/16"}}})
	base := apiBase + "projects/p/"
	tests := []struct {
		path       string
		wantStatus int
		want       map[string]any // fields that must have these values
	}{
		{path: "zones/europe-west1-b", wantStatus: http.StatusOK, want: map[string]any{"status": "UP", "region": base + "regions/europe-west1", "selfLink": base + "zones/europe-west1-b"}},
		{path: "zones/us-central1-a", wantStatus: http.StatusNotFound},
		{path: "regions/europe-west1", wantStatus: http.StatusOK, want: map[string]any{"status": "UP", "zones": []any{base + "zones/europe-west1-b", base + "zones/europe-west1-c"}}},
		{path: "regions/us-central1", wantStatus: http.StatusNotFound},
		{path: "regions/europe-west1/subnetworks/cells", wantStatus: http.StatusOK, want: map[string]any{
			"network": base + "global/networks/kip", "ipCidrRange": "10.20.0.0/16", "gatewayAddress": "10.20.0.1",
			"region": base + "regions/europe-west1", "selfLink": base + "regions/europe-west1/subnetworks/cells"}},
		{path: "regions/europe-west1/subnetworks/default", wantStatus: http.StatusNotFound},
		{path: "global/networks/kip", wantStatus: http.StatusOK, want: map[string]any{
			"autoCreateSubnetworks": false, "subnetworks": []any{base + "regions/europe-west1/subnetworks/cells"}}},
		{path: "global/networks/default", wantStatus: http.StatusOK, want: map[string]any{"autoCreateSubnetworks": true}},
		{path: "global/networks/none", wantStatus: http.StatusNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			status, out := call(t, sim, http.MethodGet, tt.path, "")
			if status != tt.wantStatus {
				t.Fatalf("status %d, want %d: %v", status, tt.wantStatus, out)
			}
			got := map[string]any{}
			for k := range tt.want {
				got[k] = out[k]
			}
			if diff := cmp.Diff(tt.want, got); diff != "" && tt.want != nil {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
	wantCalls := map[string]int{"compute.zones.get": 2, "compute.regions.get": 2, "compute.subnetworks.get": 2, "compute.networks.get": 3}
	if diff := cmp.Diff(wantCalls, sim.Calls()); diff != "" {
		t.Errorf("calls (-want +got):\n%s", diff)
	}
}

// TestLinkNIC: an instance's interface answers with full URLs, the
// network taken from the subnetwork and the other way round.
func TestLinkNIC(t *testing.T) {
	sim := newTestSim(Options{Project: "p", Subnetworks: []Subnetwork{{Name: "default"}, {Name: "cells", Network: "kip"}}})
	base := apiBase + "projects/p/"
	tests := []struct {
		name                string
		nic                 map[string]any
		wantNet, wantSubnet string
	}{
		{name: "neither", nic: map[string]any{}, wantNet: "default", wantSubnet: "default"},
		{name: "subnetwork", nic: map[string]any{"subnetwork": "regions/us-central1/subnetworks/cells"}, wantNet: "kip", wantSubnet: "cells"},
		{name: "network", nic: map[string]any{"network": base + "global/networks/kip"}, wantNet: "kip", wantSubnet: "cells"},
		{name: "both", nic: map[string]any{"network": "global/networks/kip", "subnetwork": "projects/p/regions/us-central1/subnetworks/cells"}, wantNet: "kip", wantSubnet: "cells"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sim.linkNIC(tt.nic)
			want := map[string]any{"network": base + "global/networks/" + tt.wantNet, "subnetwork": base + "regions/us-central1/subnetworks/" + tt.wantSubnet}
			if diff := cmp.Diff(want, tt.nic); diff != "" {
				t.Errorf("interface (-want +got):\n%s", diff)
			}
		})
	}
}

// reasonOf is the reason of the error body's first error.
func reasonOf(out map[string]any) string {
	r, _ := reason(out)
	return r
}
