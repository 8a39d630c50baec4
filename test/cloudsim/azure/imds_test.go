package azuresim

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/kipcell/kip/test/cloudsim/simcells/cellstest"
)

// locatorCells is a CellStarter that wants each VM's metadata at
// <dir>/<name>.sock (simcells.IMDSLocator), as localcells does.
type locatorCells struct {
	*cellstest.FakeCells
	dir string
}

func (c locatorCells) IMDSSocket(id string) string { return filepath.Join(c.dir, id+".sock") }

// imdsVMBody is a VM whose NIC has a secondary IP configuration, with a
// Spot priority, tags and userData.
const imdsVMBody = `{"location":"eastus","zones":["2"],"tags":{"kip-cluster":"c1","kip-cell":"cell-1"},"properties":{
 "hardwareProfile":{"vmSize":"Standard_D2s_v3"},
 "storageProfile":{"imageReference":{"publisher":"Canonical","offer":"ubuntu-24_04-lts","sku":"server","version":"latest"},"osDisk":{"createOption":"FromImage","deleteOption":"Delete"}},
 "osProfile":{"computerName":"kip-md","adminUsername":"kip","linuxConfiguration":{"disablePasswordAuthentication":true,"ssh":{"publicKeys":[{"path":"/home/kip/.ssh/authorized_keys","keyData":"ssh-ed25519 AAAA"}]}}},
 "priority":"Spot","evictionPolicy":"Delete","billingProfile":{"maxPrice":-1},
 "networkProfile":{"networkApiVersion":"2020-11-01","networkInterfaceConfigurations":[{"name":"kip-md-nic","properties":{"primary":true,"deleteOption":"Delete",
  "ipConfigurations":[
   {"name":"ipconfig1","properties":{"primary":true,"subnet":{"id":"/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/kip-rg/providers/Microsoft.Network/virtualNetworks/kip-vnet/subnets/default"}}},
   {"name":"pod","properties":{"subnet":{"id":"/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/kip-rg/providers/Microsoft.Network/virtualNetworks/kip-vnet/subnets/default"}}}]}}]},
 "userData":"eyJjZWxsIjoia2lwLW1kIn0="}}`

// unixClient is an HTTP client whose every request goes to the unix
// socket sock.
func unixClient(sock string) *http.Client {
	return &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", sock)
	}}}
}

// getIMDS sends method pathAndQuery to the IMDS at sock with header and
// returns the status, the Content-Type and the body.
func getIMDS(t *testing.T, sock, method, pathAndQuery string, header map[string]string) (int, string, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, "http://169.254.169.254"+pathAndQuery, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := unixClient(sock).Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, pathAndQuery, err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("Content-Type"), string(b)
}

// waitFor polls cond for a few seconds.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("timed out waiting for %s", what)
}

// createIMDSVM creates kip-md from imdsVMBody with cells wanting its
// metadata in dir, waits for its cell's address and returns its socket.
func createIMDSVM(t *testing.T, dir string) (*testSim, string) {
	t.Helper()
	sim := startSim(t, Options{Cells: locatorCells{cellstest.NewFakeCells(), dir}})
	if status, _, body := sim.do("PUT", testVMPath+"kip-md"+api, imdsVMBody, false); status != http.StatusCreated {
		t.Fatalf("PUT: %d %v", status, body)
	}
	waitFor(t, "the cell's address", func() bool { vm, _ := sim.VM(DefaultResourceGroup, "kip-md"); return vm.Address != "" })
	sock, ok := sim.IMDSSocket(DefaultResourceGroup, "kip-md")
	if !ok {
		t.Fatal("no IMDS socket for a created VM")
	}
	if want := filepath.Join(dir, "kip-md.sock"); sock != want {
		t.Errorf("IMDS socket %s, want the locator's %s", sock, want)
	}
	return sim, sock
}

// TestIMDSRules: what the IMDS answers, and refuses, as Azure's does.
func TestIMDSRules(t *testing.T) {
	sim, sock := createIMDSVM(t, t.TempDir())
	vm, _ := sim.VM(DefaultResourceGroup, "kip-md")
	md := map[string]string{"Metadata": "true"}
	const v = "?api-version=2021-02-01"
	badVersion := `{"error":"` + imdsBadAPIVersion + `","newest-versions":["2025-04-07","2024-07-17","2024-03-15"]}`
	tests := []struct {
		name, method, path string
		header             map[string]string
		status             int
		body               string // exact when set
		contentType        string // prefix, when set
	}{
		{"no Metadata header", "GET", "/metadata/instance" + v, nil, 400, `{"error":"` + imdsNoMetadataHeader + `"}`, "application/json"},
		{"Metadata: false", "GET", "/metadata/instance" + v, map[string]string{"Metadata": "false"}, 400, `{"error":"` + imdsNoMetadataHeader + `"}`, ""},
		{"Metadata: True", "GET", "/metadata/instance/compute/name" + v + "&format=text", map[string]string{"Metadata": "True"}, 200, "kip-md", ""},
		{"X-Forwarded-For", "GET", "/metadata/instance" + v, map[string]string{"Metadata": "true", "X-Forwarded-For": "10.0.0.9"}, 400, "", ""},
		{"POST", "POST", "/metadata/instance" + v, md, 405, "", ""},
		{"PUT", "PUT", "/metadata/instance" + v, md, 405, "", ""},
		{"no api-version", "GET", "/metadata/instance", md, 400,
			`{"error":"` + imdsNoAPIVersion + `","newest-versions":["2025-04-07","2024-07-17","2024-03-15"]}`, "application/json"},
		{"an unknown api-version", "GET", "/metadata/instance?api-version=2099-01-01", md, 400, badVersion, ""},
		{"an api-version before the instance category", "GET", "/metadata/instance?api-version=2017-03-01", md, 400, badVersion, ""},
		{"api-version twice", "GET", "/metadata/instance" + v + "&api-version=2021-02-01", md, 400, "", ""},
		{"a format IMDS lacks", "GET", "/metadata/instance" + v + "&format=xml", md, 400, "", ""},
		{"a leaf as text", "GET", "/metadata/instance/compute/vmId" + v + "&format=text", md, 200, vm.VMID, "text/plain"},
		{"a leaf as JSON", "GET", "/metadata/instance/compute/vmId" + v, md, 200, `"` + vm.VMID + `"`, "application/json"},
		{"a leaf with format=json", "GET", "/metadata/instance/compute/vmSize" + v + "&format=json", md, 200, `"Standard_D2s_v3"`, ""},
		{"a node that is not a leaf as text", "GET", "/metadata/instance/compute" + v + "&format=text", md, 400, "", ""},
		{"the document as text", "GET", "/metadata/instance" + v + "&format=text", md, 400, "", ""},
		{"tags", "GET", "/metadata/instance/compute/tags" + v + "&format=text", md, 200, "kip-cell:cell-1;kip-cluster:c1", ""},
		{"zone", "GET", "/metadata/instance/compute/zone" + v + "&format=text", md, 200, "2", ""},
		{"the primary address", "GET", "/metadata/instance/network/interface/0/ipv4/ipAddress/0/privateIpAddress" + v + "&format=text", md, 200, vm.Address, ""},
		{"the pod address", "GET", "/metadata/instance/network/interface/0/ipv4/ipAddress/1/privateIpAddress" + v + "&format=text", md, 200, vm.PodAddress, ""},
		{"an index past the list", "GET", "/metadata/instance/network/interface/0/ipv4/ipAddress/2" + v, md, 404, `{"error":"Not found"}`, ""},
		{"a trailing slash", "GET", "/metadata/instance/compute/name/" + v + "&format=text", md, 200, "kip-md", ""},
		{"userData", "GET", "/metadata/instance/compute/userData" + v + "&format=text", md, 200, "eyJjZWxsIjoia2lwLW1kIn0=", ""},
		{"userData as JSON", "GET", "/metadata/instance/compute/userData" + v, md, 200, `"eyJjZWxsIjoia2lwLW1kIn0="`, ""},
		{"userData before 2021-01-01", "GET", "/metadata/instance/compute/userData?api-version=2020-12-01&format=text", md, 404, "", ""},
		{"resourceId before 2019-03-11", "GET", "/metadata/instance/compute/resourceId?api-version=2019-02-01&format=text", md, 404, "", ""},
		{"a field IMDS lacks", "GET", "/metadata/instance/compute/nope" + v, md, 404, `{"error":"Not found"}`, ""},
		{"a token", "GET", "/metadata/identity/oauth2/token?api-version=2018-02-01&resource=https%3A%2F%2Fmanagement.azure.com%2F", md, 400,
			`{"error":"invalid_request","error_description":"Identity not found"}`, "application/json"},
		{"a token without resource", "GET", "/metadata/identity/oauth2/token?api-version=2018-02-01", md, 400,
			`{"error":"invalid_request","error_description":"Required query variable 'resource' is missing"}`, ""},
		{"a token without api-version", "GET", "/metadata/identity/oauth2/token?resource=x", md, 400, "", ""},
		{"a token without Metadata", "GET", "/metadata/identity/oauth2/token?api-version=2018-02-01&resource=x", nil, 400, `{"error":"` + imdsNoMetadataHeader + `"}`, ""},
		{"scheduled events", "GET", "/metadata/scheduledevents?api-version=2020-07-01", md, 404, "", ""},
		{"attested data", "GET", "/metadata/attested/document" + v, md, 404, "", ""},
		{"outside /metadata", "GET", "/latest/meta-data/instance-id", md, 404, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, ct, body := getIMDS(t, sock, tt.method, tt.path, tt.header)
			if status != tt.status || (tt.body != "" && body != tt.body) {
				t.Errorf("%s %s = %d %s; want %d %s", tt.method, tt.path, status, body, tt.status, tt.body)
			}
			if !strings.HasPrefix(ct, tt.contentType) {
				t.Errorf("Content-Type %q, want %s", ct, tt.contentType)
			}
			if status != http.StatusOK && !json.Valid([]byte(body)) {
				t.Errorf("error body %q is not JSON", body)
			}
		})
	}

	// /metadata/versions needs no api-version.
	status, _, body := getIMDS(t, sock, "GET", "/metadata/versions", md)
	var versions struct{ APIVersions []string }
	if err := json.Unmarshal([]byte(body), &versions); status != 200 || err != nil || len(versions.APIVersions) != len(imdsVersions) || versions.APIVersions[0] != "2017-03-01" {
		t.Errorf("versions: %d %s", status, body)
	}
}

// TestIMDSDocument: /metadata/instance is the VM as Azure describes it,
// without userData, each field from the api-version that introduced it.
func TestIMDSDocument(t *testing.T) {
	sim, sock := createIMDSVM(t, t.TempDir())
	vm, _ := sim.VM(DefaultResourceGroup, "kip-md")
	status, _, body := getIMDS(t, sock, "GET", "/metadata/instance?api-version=2021-02-01", map[string]string{"Metadata": "true"})
	if status != http.StatusOK {
		t.Fatalf("GET /metadata/instance: %d %s", status, body)
	}
	var got map[string]any
	if err := json.Unmarshal([]byte(body), &got); err != nil {
		t.Fatal(err)
	}
	tagsList := []any{
		map[string]any{"name": "kip-cell", "value": "cell-1"},
		map[string]any{"name": "kip-cluster", "value": "c1"},
	}
	osProfile := map[string]any{"adminUsername": "kip", "computerName": "kip-md", "disablePasswordAuthentication": "true"}
	want := map[string]any{
		"compute": map[string]any{
			"azEnvironment": "AzurePublicCloud", "evictionPolicy": "Delete", "location": "eastus", "name": "kip-md",
			"offer": "ubuntu-24_04-lts", "osType": "Linux", "platformFaultDomain": "0", "platformUpdateDomain": "0",
			"osProfile": osProfile, "priority": "Spot",
			"provider": "Microsoft.Compute", "publisher": "Canonical", "resourceGroupName": DefaultResourceGroup,
			"resourceId": testVMPath + "kip-md", "sku": "server", "subscriptionId": DefaultSubscription,
			"tags": "kip-cell:cell-1;kip-cluster:c1", "tagsList": tagsList,
			"version": "latest", "vmId": vm.VMID, "vmSize": "Standard_D2s_v3", "zone": "2",
		},
		"network": map[string]any{"interface": []any{map[string]any{
			"ipv4": map[string]any{
				"ipAddress": []any{
					map[string]any{"privateIpAddress": vm.Address, "publicIpAddress": ""},
					map[string]any{"privateIpAddress": vm.PodAddress, "publicIpAddress": ""},
				},
				"subnet": []any{map[string]any{"address": "10.0.0.0", "prefix": "24"}},
			},
			"ipv6":       map[string]any{"ipAddress": []any{}},
			"macAddress": "000D3A000001",
		}}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("document (-want +got):\n%s", diff)
	}
	if vm.Address == "" || vm.PodAddress == "" {
		t.Errorf("addresses %q, %q: want both", vm.Address, vm.PodAddress)
	}

	// An older api-version leaves out what came later.
	_, _, body = getIMDS(t, sock, "GET", "/metadata/instance/compute?api-version=2017-08-01", map[string]string{"Metadata": "true"})
	var old map[string]any
	if err := json.Unmarshal([]byte(body), &old); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"azEnvironment", "resourceId", "zone", "tagsList", "priority", "osProfile"} {
		if _, ok := old[k]; ok {
			t.Errorf("compute at 2017-08-01 has %s", k)
		}
	}
	if old["resourceGroupName"] != DefaultResourceGroup || old["vmId"] != vm.VMID {
		t.Errorf("compute at 2017-08-01: %v", old)
	}
}

// TestIMDSLifecycle: a VM's metadata is served from its create until its
// cell stopped, at the socket the CellStarter wants, and Close ends it.
func TestIMDSLifecycle(t *testing.T) {
	dir := t.TempDir()
	sim, sock := createIMDSVM(t, dir)
	md := map[string]string{"Metadata": "true"}
	if status, _, _ := getIMDS(t, sock, "GET", "/metadata/instance/compute/name?api-version=2021-02-01&format=text", md); status != 200 {
		t.Fatalf("before the delete: %d", status)
	}
	if status, _, body := sim.do("DELETE", testVMPath+"kip-md"+api, "", false); status != http.StatusAccepted {
		t.Fatalf("DELETE: %d %v", status, body)
	}
	waitFor(t, "the IMDS to stop", func() bool { _, ok := sim.IMDSSocket(DefaultResourceGroup, "kip-md"); return !ok })
	if vm, _ := sim.VM(DefaultResourceGroup, "kip-md"); !vm.Gone {
		t.Errorf("the IMDS stopped before the VM was gone: %+v", vm)
	}
	if _, err := os.Stat(sock); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the socket is left behind: %v", err)
	}
	conn, err := net.Dial("unix", sock)
	if err == nil {
		_ = conn.Close()
		t.Error("the deleted VM's IMDS still accepts connections")
	}

	// A VM whose allocation fails gets no IMDS.
	sim.InjectAllocationFailure("Standard_D2s_v3", "", "")
	if status, _, body := sim.do("PUT", testVMPath+"kip-fail"+api, strings.ReplaceAll(imdsVMBody, "kip-md", "kip-fail"), false); status != http.StatusCreated {
		t.Fatalf("PUT: %d %v", status, body)
	}
	if _, ok := sim.IMDSSocket(DefaultResourceGroup, "kip-fail"); ok {
		t.Error("a VM whose allocation fails serves metadata")
	}
	if _, ok := sim.IMDSSocket(DefaultResourceGroup, "nope"); ok {
		t.Error("a VM that does not exist serves metadata")
	}
}

// TestIMDSWithoutLocator: without an IMDSLocator, the sockets are in the
// server's own directory, which Close removes.
func TestIMDSWithoutLocator(t *testing.T) {
	sim := startSim(t, Options{})
	if status, _, body := sim.do("PUT", testVMPath+"kip-raw"+api, vmJSONBody, false); status != http.StatusCreated {
		t.Fatalf("PUT: %d %v", status, body)
	}
	sock, ok := sim.IMDSSocket(DefaultResourceGroup, "KIP-RAW") // names are case-insensitive
	if !ok || !strings.Contains(sock, "azuresim-imds-") {
		t.Fatalf("IMDS socket %q, %v; want one in the server's directory", sock, ok)
	}
	vm, _ := sim.VM(DefaultResourceGroup, "kip-raw")
	status, _, body := getIMDS(t, sock, "GET", "/metadata/instance/network/interface/0/ipv4/ipAddress/0/privateIpAddress?api-version=2021-02-01&format=text", map[string]string{"Metadata": "true"})
	if status != 200 || body != vm.Address || vm.Address == "" {
		t.Errorf("private address: %d %q, want %q", status, body, vm.Address)
	}
	if err := sim.Close(); err != nil {
		t.Fatal(err)
	}
	if _, ok := sim.IMDSSocket(DefaultResourceGroup, "kip-raw"); ok {
		t.Error("the IMDS serves after Close")
	}
	if _, err := os.Stat(filepath.Dir(sock)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the socket directory is left behind: %v", err)
	}
}
