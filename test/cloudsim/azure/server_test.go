package azuresim

import (
	"crypto/tls"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/kipcell/kip/test/cloudsim/simcells/cellstest"
)

const testVMPath = "/subscriptions/" + DefaultSubscription + "/resourceGroups/" + DefaultResourceGroup + "/providers/Microsoft.Compute/virtualMachines/"

// testSim is a started simulator and a raw HTTPS client of it.
type testSim struct {
	*Server
	t   *testing.T
	url string
	c   *http.Client
}

func startSim(t *testing.T, opts Options) *testSim {
	t.Helper()
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	s := New(opts)
	url, err := s.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	// A client that trusts CACert, as the plugin's CA bundle will.
	c := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: s.CertPool(), MinVersion: tls.VersionTLS12}}}
	return &testSim{Server: s, t: t, url: url, c: c}
}

// do sends a request with a bearer token unless noAuth, and returns the
// status, headers and decoded JSON body.
func (s *testSim) do(method, pathAndQuery, body string, noAuth bool) (int, http.Header, map[string]any) {
	s.t.Helper()
	req, err := http.NewRequest(method, s.url+pathAndQuery, strings.NewReader(body))
	if err != nil {
		s.t.Fatal(err)
	}
	if !noAuth {
		req.Header.Set("Authorization", "Bearer t")
	}
	resp, err := s.c.Do(req)
	if err != nil {
		s.t.Fatalf("%s %s: %v", method, pathAndQuery, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var out map[string]any
	if len(b) > 0 {
		if err := json.Unmarshal(b, &out); err != nil {
			s.t.Fatalf("%s %s: answer %q is not JSON: %v", method, pathAndQuery, b, err)
		}
	}
	return resp.StatusCode, resp.Header, out
}

func errCode(body map[string]any) string {
	e, _ := body["error"].(map[string]any)
	c, _ := e["code"].(string)
	return c
}

const api = "?api-version=2026-04-01"

// vmJSONBody is a VM as the plugin sends it.
const vmJSONBody = `{"location":"eastus","zones":["1"],"tags":{"kip-cluster":"c1"},"properties":{
 "hardwareProfile":{"vmSize":"Standard_D2s_v3"},
 "storageProfile":{"imageReference":{"publisher":"Canonical","offer":"o","sku":"s","version":"latest"},"osDisk":{"createOption":"FromImage","deleteOption":"Delete"}},
 "osProfile":{"computerName":"kip-raw","adminUsername":"kip","adminPassword":"secret"},
 "networkProfile":{"networkApiVersion":"2020-11-01","networkInterfaceConfigurations":[{"name":"kip-raw-nic","properties":{"primary":true,"deleteOption":"Delete",
  "ipConfigurations":[{"name":"ipconfig1","properties":{"subnet":{"id":"/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/kip-rg/providers/Microsoft.Network/virtualNetworks/kip-vnet/subnets/default"}}}]}}]},
 "userData":"e30="}}`

// TestStrictness: what ARM refuses before it looks at a request.
func TestStrictness(t *testing.T) {
	sim := startSim(t, Options{})
	tests := []struct {
		name, method, path string
		noAuth             bool
		status             int
		code               string
	}{
		{"no api-version", "GET", testVMPath + "x", false, 400, "MissingApiVersionParameter"},
		{"no token", "GET", testVMPath + "x" + api, true, 401, "AuthenticationFailed"},
		{"another subscription", "GET", strings.Replace(testVMPath, DefaultSubscription, "11111111-1111-1111-1111-111111111111", 1) + "x" + api, false, 404, "SubscriptionNotFound"},
		{"another resource group", "GET", strings.Replace(testVMPath, DefaultResourceGroup, "nope", 1) + "x" + api, false, 404, "ResourceGroupNotFound"},
		{"a VM that does not exist", "GET", testVMPath + "x" + api, false, 404, "ResourceNotFound"},
		{"a resource type not served", "GET", "/subscriptions/" + DefaultSubscription + "/providers/Microsoft.Storage/storageAccounts" + api, false, 404, "NoRegisteredProviderFound"},
		{"an operation that does not exist", "GET", "/subscriptions/" + DefaultSubscription + "/providers/Microsoft.Compute/locations/eastus/operations/nope" + api, false, 404, "ResourceNotFound"},
		{"a body that is not JSON", "PUT", testVMPath + "x" + api, false, 400, "InvalidRequestContent"},
		{"a $expand ARM does not know", "GET", testVMPath + "x" + api + "&$expand=everything", false, 400, "InvalidParameter"},
		{"a resourceSkus filter ARM does not take", "GET", "/subscriptions/" + DefaultSubscription + "/providers/Microsoft.Compute/skus" + api + "&$filter=name%20eq%20%27x%27", false, 400, "InvalidFilter"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, _, body := sim.do(tt.method, tt.path, "{", tt.noAuth)
			if status != tt.status || errCode(body) != tt.code {
				t.Errorf("%d %v; want %d %s", status, body, tt.status, tt.code)
			}
		})
	}

	// Plain HTTP is refused: ARM is TLS only.
	plain := httptest.NewServer(sim.Server)
	defer plain.Close()
	resp, err := http.Get(plain.URL + testVMPath + "x" + api)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Errorf("plain HTTP: %d, want 400", resp.StatusCode)
	}
	if block := sim.CACert(); !strings.HasPrefix(string(block), "-----BEGIN CERTIFICATE-----") {
		t.Errorf("CACert %q is not a PEM certificate", block)
	}
}

// TestLongRunningHeaders: the headers and answers of the LRO protocol, as
// ARM writes them: PUT 201 with Azure-AsyncOperation and Retry-After, the
// operation InProgress then Succeeded; DELETE 202 with Location too, its
// operationResults 202 then 204; DELETE of what does not exist 204.
func TestLongRunningHeaders(t *testing.T) {
	clock := cellstest.NewClock(time.Date(2026, 11, 24, 9, 0, 0, 0, time.UTC))
	sim := startSim(t, Options{Now: clock.Now, BootDelay: time.Minute, ShutdownDelay: time.Minute, RetryAfter: 3 * time.Second})
	status, h, body := sim.do("PUT", testVMPath+"kip-raw"+api, vmJSONBody, false)
	if status != http.StatusCreated || h.Get("Retry-After") != "3" || !strings.HasPrefix(h.Get("Azure-AsyncOperation"), sim.url+"/subscriptions/"+DefaultSubscription+"/providers/Microsoft.Compute/locations/eastus/operations/") ||
		!strings.HasSuffix(h.Get("Azure-AsyncOperation"), api) {
		t.Fatalf("PUT: %d %v", status, h)
	}
	props := body["properties"].(map[string]any)
	if props["provisioningState"] != "Creating" || props["userData"] != nil || props["osProfile"].(map[string]any)["adminPassword"] != nil {
		t.Errorf("PUT's body: %v; want Creating, no userData, no password", props)
	}
	opPath := strings.TrimPrefix(h.Get("Azure-AsyncOperation"), sim.url)
	poll := func(path string) (int, http.Header, map[string]any) { return sim.do("GET", path, "", false) }
	if status, h, op := poll(opPath); status != 200 || op["status"] != "InProgress" || h.Get("Retry-After") != "3" {
		t.Errorf("operation: %d %v %v; want InProgress with Retry-After", status, op, h)
	}
	clock.Advance(time.Minute)
	if _, _, op := poll(opPath); op["status"] != "Succeeded" || op["endTime"] == nil {
		t.Errorf("operation after the boot: %v; want Succeeded", op)
	}

	status, h, _ = sim.do("DELETE", testVMPath+"kip-raw"+api, "", false)
	loc := strings.TrimPrefix(h.Get("Location"), sim.url)
	if status != http.StatusAccepted || !strings.Contains(loc, "/operationResults/") || h.Get("Azure-AsyncOperation") == "" {
		t.Fatalf("DELETE: %d %v", status, h)
	}
	if status, h, _ := poll(loc); status != http.StatusAccepted || h.Get("Location") == "" {
		t.Errorf("operationResults while deleting: %d %v; want 202 with Location", status, h)
	}
	clock.Advance(time.Minute)
	if status, _, _ := poll(loc); status != http.StatusNoContent {
		t.Errorf("operationResults once gone: %d, want 204", status)
	}
	if status, _, _ := sim.do("DELETE", testVMPath+"kip-raw"+api, "", false); status != http.StatusNoContent {
		t.Errorf("DELETE of what does not exist: %d, want 204", status)
	}
	want := map[string]int{"VirtualMachines_CreateOrUpdate": 1, "Operations_Get": 2, "VirtualMachines_Delete": 2, "OperationResults_Get": 2}
	if diff := cmp.Diff(want, sim.Calls()); diff != "" {
		t.Errorf("calls (-want +got):\n%s", diff)
	}
}

// TestDefaultSizesAreTheCatalogs keeps DefaultSizes equal to the plugin's
// catalog (read as a file: the simulator does not import the plugin).
func TestDefaultSizesAreTheCatalogs(t *testing.T) {
	data, err := os.ReadFile("../../../plugins/azure/catalog/azure.json")
	if err != nil {
		t.Fatal(err)
	}
	var catalog struct {
		Types []struct {
			Name      string `json:"name"`
			VCPU      int    `json:"vcpu"`
			MemoryMiB int    `json:"memoryMiB"`
			GPU       *struct {
				Count int `json:"count"`
			} `json:"gpu"`
		} `json:"types"`
	}
	if err := json.Unmarshal(data, &catalog); err != nil {
		t.Fatal(err)
	}
	var want []Size
	for _, ct := range catalog.Types {
		s := Size{Name: ct.Name, VCPUs: ct.VCPU, MemoryMiB: ct.MemoryMiB}
		if ct.GPU != nil {
			s.GPUs = ct.GPU.Count
		}
		want = append(want, s)
	}
	if diff := cmp.Diff(want, DefaultSizes); diff != "" {
		t.Errorf("DefaultSizes (-catalog +simulator):\n%s", diff)
	}
	for _, s := range DefaultSizes {
		if Family(s.Name) == "" {
			t.Errorf("%s has no family", s.Name)
		}
	}
}

func TestFamily(t *testing.T) {
	tests := map[string]string{
		"Standard_D2s_v3":    "standardDSv3Family",
		"Standard_D2_v3":     "standardDv3Family",
		"Standard_D4ds_v4":   "standardDDSv4Family",
		"Standard_D8as_v4":   "standardDASv4Family",
		"Standard_E4-2s_v3":  "standardESv3Family",
		"Standard_F2s_v2":    "standardFSv2Family",
		"Standard_NC24rs_v3": "standardNCSv3Family",
		"Standard_B2ms":      "standardBSFamily",
		"Basic_A0":           "",
	}
	for size, want := range tests {
		if got := Family(size); got != want {
			t.Errorf("Family(%s) = %q, want %q", size, got, want)
		}
	}
}
