package gce

import (
	"bufio"
	"maps"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/auth"
	"github.com/google/go-cmp/cmp"

	"github.com/kipcell/kip/pluginapi"
)

// rolePath is the plugin's custom IAM role, which operators create with
// gcloud iam roles create --file.
const rolePath = "../../deploy/gce/role.yaml"

// permissions are the IAM permissions of every Compute Engine method the
// plugin calls (the Compute Engine API reference, "IAM Permissions" of
// each method; instances.insert's depend on what the instance carries:
// https://cloud.google.com/compute/docs/instances/create-start-instance,
// "Required permissions").
var permissions = map[string][]string{
	"instances.insert": {
		"compute.instances.create", "compute.disks.create", "compute.disks.setLabels", "compute.images.useReadOnly",
		"compute.subnetworks.use", "compute.instances.setMetadata", "compute.instances.setLabels",
		"compute.instances.setTags", "compute.instances.setServiceAccount", "iam.serviceAccounts.actAs",
	},
	"instances.get": {"compute.instances.get"},
	// compute.disks.use for a READ_WRITE disk, useReadOnly for READ_ONLY
	// (https://cloud.google.com/compute/docs/disks/add-persistent-disk,
	// "Required roles").
	"instances.attachDisk":          {"compute.instances.attachDisk", "compute.disks.use", "compute.disks.useReadOnly"},
	"instances.detachDisk":          {"compute.instances.detachDisk"},
	"instances.delete":              {"compute.instances.delete"},
	"instances.aggregatedList":      {"compute.instances.list"},
	"instances.getSerialPortOutput": {"compute.instances.getSerialPortOutput"},
	"zoneOperations.wait":           {"compute.zoneOperations.get"},
	"zoneOperations.list":           {"compute.zoneOperations.list"},
	"machineTypes.aggregatedList":   {"compute.machineTypes.list"},
	"images.get":                    {"compute.images.get"},
	"images.getFromFamily":          {"compute.images.getFromFamily"},
	"subnetworks.get":               {"compute.subnetworks.get"},
	"regions.get":                   {"compute.regions.get"},
}

// impliedPermissions are needed for no API call: the token RegistryAuth
// hands to the cells pulls images with kip's identity.
var impliedPermissions = []string{"artifactregistry.repositories.downloadArtifacts"}

// loadRole reads the role's fields and its includedPermissions.
func loadRole(t *testing.T) (fields map[string]string, perms []string) {
	t.Helper()
	file, err := os.Open(rolePath)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = file.Close() }()
	fields = map[string]string{}
	inList := false
	for sc := bufio.NewScanner(file); sc.Scan(); {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "#") || strings.TrimSpace(line) == "":
		case strings.HasPrefix(line, "- ") && inList:
			perms = append(perms, strings.TrimPrefix(line, "- "))
		case strings.Contains(line, ":") && !strings.HasPrefix(line, " "):
			k, v, _ := strings.Cut(line, ":")
			fields[k] = strings.TrimSpace(v)
			inList = k == "includedPermissions"
		default:
			t.Fatalf("%s: a line this test does not read: %q", rolePath, line)
		}
	}
	return fields, perms
}

// The role is in gcloud's --file format and grants exactly the
// permissions of the methods in permissions, sorted, each once.
func TestRoleMatchesTheCalls(t *testing.T) {
	fields, perms := loadRole(t)
	for _, k := range []string{"title", "description", "stage"} {
		if fields[k] == "" {
			t.Errorf("%s has no %s", rolePath, k)
		}
	}
	if fields["stage"] != "GA" {
		t.Errorf("stage %q, want GA", fields["stage"])
	}
	if !slices.IsSorted(perms) || len(slices.Compact(slices.Clone(perms))) != len(perms) {
		t.Errorf("%s: includedPermissions are not sorted and unique", rolePath)
	}
	want := slices.Clone(impliedPermissions)
	for _, ps := range permissions {
		want = append(want, ps...)
	}
	slices.Sort(want)
	want = slices.Compact(want)
	if diff := cmp.Diff(want, perms); diff != "" {
		t.Errorf("%s grants other permissions than the plugin's calls need (-calls +role):\n%s", rolePath, diff)
	}
}

// Every method in permissions is one the plugin really calls, and it calls
// no other: a run through every Provider method (with networkTags and a
// service account, so that the insert needs every permission listed) calls
// exactly those methods. With the test above, the role is exactly what a
// running plugin needs.
func TestEveryCalledMethodHasItsPermissions(t *testing.T) {
	f := newFakeCompute(t)
	ctx := t.Context()
	cfg := with(with(testConfig(f), "networkTags", []string{"kip-cell"}), "serviceAccount", "cells@kip-test.iam.gserviceaccount.com")
	p := configured(t, cfg, func(p *provider) { p.SnapshotAge = time.Millisecond })
	configured(t, with(cfg, "image", map[string]any{"name": "kip-cell-1"}))
	if _, err := p.ListInstanceTypes(ctx, &pluginapi.ListInstanceTypesRequest{}); err != nil {
		t.Fatal(err)
	}
	// Two launches at once: their operations are waited for with a
	// wait, then a list.
	for _, err := range launchTogether(t, p, f, "kip-iam", "kip-iam-2") {
		if err != nil {
			t.Fatal(err)
		}
	}
	id := "us-central1-a/kip-iam"
	if _, err := p.List(ctx, &pluginapi.ListRequest{}); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Describe(ctx, &pluginapi.DescribeRequest{IDs: []string{id, "us-central1-b/kip-elsewhere"}}); err != nil {
		t.Fatal(err)
	}
	f.set(id, func(in *fakeInstance) {
		in.body["resourceStatus"] = map[string]any{"upcomingMaintenance": map[string]any{"type": "SCHEDULED", "windowStartTime": "2026-12-01T03:00:00Z"}}
	})
	waitEvent(t, watch(t, p), "maintenance", func(e *pluginapi.Event) bool { return e.Type == pluginapi.EventMaintenance })
	p.cfg.Load().creds = auth.NewCredentials(&auth.CredentialsOptions{TokenProvider: fakeToken{}})
	if _, err := p.RegistryAuth(ctx, &pluginapi.RegistryAuthRequest{Image: "us-docker.pkg.dev/kip-test/cells/app"}); err != nil {
		t.Fatal(err)
	}
	if _, err := p.ConsoleOutput(ctx, &pluginapi.ConsoleOutputRequest{InstanceID: id}); err != nil {
		t.Fatal(err)
	}
	disk := f.addDisk("us-central1-a", "kip-iam-disk")
	if _, err := p.AttachVolume(ctx, &pluginapi.AttachVolumeRequest{InstanceID: id, Driver: VolumeDriver, VolumeHandle: disk, ReadOnly: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := p.DescribeVolumeAttachments(ctx, &pluginapi.DescribeVolumeAttachmentsRequest{InstanceIDs: []string{id}}); err != nil {
		t.Fatal(err)
	}
	if _, err := p.DetachVolume(ctx, &pluginapi.DetachVolumeRequest{InstanceID: id, Driver: VolumeDriver, VolumeHandle: disk}); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Terminate(ctx, &pluginapi.TerminateRequest{ID: id}); err != nil {
		t.Fatal(err)
	}
	// A replayed insert gets its instance (instances.get): Describe above
	// called it too.
	f.mu.Lock()
	var called []string
	for m, n := range f.calls {
		if n > 0 {
			called = append(called, m)
		}
	}
	f.mu.Unlock()
	slices.Sort(called)
	if diff := cmp.Diff(slices.Sorted(maps.Keys(permissions)), called); diff != "" {
		t.Errorf("methods called differ from the permissions table (-table +called):\n%s", diff)
	}
	body := f.body("instances.insert", 0)
	for _, k := range []string{"labels", "metadata", "tags", "serviceAccounts", "disks", "networkInterfaces"} {
		if body[k] == nil {
			t.Errorf("the insert has no %s: the test does not exercise its permission", k)
		}
	}
	if labels := body["disks"].([]any)[0].(map[string]any)["initializeParams"].(map[string]any)["labels"]; labels == nil {
		t.Error("the boot disk has no labels: compute.disks.setLabels is not needed")
	}
}

// The SDK interfaces (sdk.go) name exactly the methods of permissions:
// a method added to an interface without its permissions, or a
// permission left for a method no longer callable, fails here.
func TestSDKInterfacesAreThePermissions(t *testing.T) {
	var got []string
	for collection, api := range map[string]reflect.Type{
		"instances":      reflect.TypeFor[instancesAPI](),
		"zoneOperations": reflect.TypeFor[zoneOperationsAPI](),
		"regions":        reflect.TypeFor[regionsAPI](),
		"machineTypes":   reflect.TypeFor[machineTypesAPI](),
		"images":         reflect.TypeFor[imagesAPI](),
		"subnetworks":    reflect.TypeFor[subnetworksAPI](),
	} {
		for i := range api.NumMethod() {
			name := api.Method(i).Name
			if name == "Close" {
				continue
			}
			got = append(got, collection+"."+strings.ToLower(name[:1])+name[1:])
		}
	}
	slices.Sort(got)
	if diff := cmp.Diff(slices.Sorted(maps.Keys(permissions)), got); diff != "" {
		t.Errorf("sdk.go's methods differ from permissions (-permissions +sdk.go):\n%s", diff)
	}
}
