package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	azfake "github.com/Azure/azure-sdk-for-go/sdk/azcore/fake"

	"github.com/kipcell/kip/pluginapi/catalog"
)

// ----- a fake Azure Retail Prices API -----

// meterItem is one item as the Retail Prices API writes it: a Linux
// pay-as-you-go meter unless edit changes it.
func meterItem(region, armSku string, price float64, edit func(m map[string]any)) map[string]any {
	short := strings.ReplaceAll(strings.TrimPrefix(armSku, "Standard_"), "_", " ")
	m := map[string]any{
		"currencyCode":         "USD",
		"tierMinimumUnits":     0.0,
		"retailPrice":          price,
		"unitPrice":            price,
		"armRegionName":        region,
		"location":             "somewhere",
		"effectiveStartDate":   "2024-01-01T00:00:00Z",
		"meterId":              "meter-" + armSku,
		"meterName":            short,
		"productId":            "DZH318Z0BQPS",
		"skuId":                "DZH318Z0BQPS/00J1",
		"productName":          "Virtual Machines Series",
		"skuName":              short,
		"serviceName":          "Virtual Machines",
		"serviceId":            "DZH313Z7MMC8",
		"serviceFamily":        "Compute",
		"unitOfMeasure":        "1 Hour",
		"type":                 "Consumption",
		"isPrimaryMeterRegion": true,
		"armSkuName":           armSku,
	}
	if edit != nil {
		edit(m)
	}
	return m
}

func spot(m map[string]any) {
	m["skuName"] = m["skuName"].(string) + " Spot"
	m["meterName"] = m["meterName"].(string) + " Spot"
	m["meterId"] = m["meterId"].(string) + "-spot"
}

func set(kv ...any) func(map[string]any) {
	return func(m map[string]any) {
		for i := 0; i < len(kv); i += 2 {
			m[kv[i].(string)] = kv[i+1]
		}
	}
}

// pricePages are the pages the fake serves, by region.
var pricePages = map[string][][]map[string]any{
	"eastus": {
		{
			meterItem("eastus", "Standard_D2s_v3", 0.096, nil),
			meterItem("eastus", "Standard_D2s_v3", 0.0192, spot),
			meterItem("eastus", "Standard_D2s_v3", 0.188, set("productName", "Virtual Machines DSv3 Series Windows", "meterId", "w")),
			meterItem("eastus", "Standard_D2s_v3", 0.04, func(m map[string]any) { spot(m); m["productName"] = "Virtual Machines DSv3 Series Windows" }),
			meterItem("eastus", "Standard_D2s_v3", 0.0192, set("skuName", "D2s v3 Low Priority", "meterName", "D2s v3 Low Priority")),
			meterItem("eastus", "Standard_D2s_v3", 0.05, set("type", "DevTestConsumption")),
		},
		{
			// Two on-demand meters: the newer one wins.
			meterItem("eastus", "Standard_D4s_v3", 0.2, set("effectiveStartDate", "2020-01-01T00:00:00Z", "meterId", "old")),
			meterItem("eastus", "Standard_D4s_v3", 0.192, set("effectiveStartDate", "2023-01-01T00:00:00Z", "meterId", "new")),
			// Two spot meters of one date: the cheaper one wins.
			meterItem("eastus", "Standard_D4s_v3", 0.05, func(m map[string]any) { spot(m); m["meterId"] = "a" }),
			meterItem("eastus", "Standard_D4s_v3", 0.04, func(m map[string]any) { spot(m); m["meterId"] = "b" }),
			// A size specs.csv lacks.
			meterItem("eastus", "Standard_D2s_v5", 0.096, nil),
			meterItem("eastus", "Standard_D2s_v5", 0.02, spot),
		},
		{
			meterItem("eastus", "Standard_D8s_v3", 0.3, set("currencyCode", "EUR")),
			meterItem("eastus", "Standard_D8s_v3", 800, set("type", "Reservation", "unitOfMeasure", "1 Hour", "reservationTerm", "1 Year")),
			meterItem("eastus", "Standard_D8s_v3", 0.384, set("isPrimaryMeterRegion", false)),
			meterItem("eastus", "Standard_D16s_v3", 0.768, set("effectiveStartDate", "2099-01-01T00:00:00Z")),
			meterItem("eastus", "Standard_E4s_v3", 0.252, set("effectiveEndDate", "2025-01-01T00:00:00Z")),
			meterItem("eastus", "Standard_B2s", 0.0416, nil),
			meterItem("eastus", "Standard_B2s", 1, set("unitOfMeasure", "1/Month")),
		},
	},
	"westeurope": {{
		meterItem("westeurope", "Standard_D2s_v3", 0.11, nil),
		meterItem("westeurope", "Standard_D2s_v3", 0.022, spot),
	}},
	"nowhere": {{}},
}

var filterRegion = regexp.MustCompile(`^serviceName eq 'Virtual Machines' and priceType eq 'Consumption' and armRegionName eq '([a-z0-9]+)'$`)

// pricesAPI serves pricePages as the Retail Prices API does: a region's
// filter in, pages out, each but the last with a NextPageLink that adds
// $skip to the query. Its first throttle answers are HTTP 429.
func pricesAPI(t *testing.T, throttle int32) *httptest.Server {
	t.Helper()
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) <= throttle {
			w.Header().Set("Retry-After", "0")
			http.Error(w, "slow down", http.StatusTooManyRequests)
			return
		}
		q := r.URL.Query()
		m := filterRegion.FindStringSubmatch(q.Get("$filter"))
		if r.URL.Path != "/api/retail/prices" || q.Get("api-version") != pricesAPIVersion || q.Get("meterRegion") != "'primary'" || m == nil {
			http.Error(w, "unexpected request "+r.URL.String(), http.StatusBadRequest)
			return
		}
		pages := pricePages[m[1]]
		if pages == nil {
			pages = [][]map[string]any{{}}
		}
		skip, _ := strconv.Atoi(q.Get("$skip"))
		page := map[string]any{
			"BillingCurrency":    "USD",
			"CustomerEntityId":   "Default",
			"CustomerEntityType": "Retail",
			"Items":              pages[skip],
			"NextPageLink":       nil,
			"Count":              len(pages[skip]),
		}
		if skip+1 < len(pages) {
			q.Set("$skip", strconv.Itoa(skip+1))
			page["NextPageLink"] = "http://" + r.Host + r.URL.Path + "?" + q.Encode()
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(page)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// ----- a fake Azure Resource Manager, for Resource SKUs list -----

type sku struct {
	name, resourceType string
	caps               map[string]string
}

func vm(name string, kv ...string) sku {
	s := sku{name: name, resourceType: "virtualMachines", caps: map[string]string{}}
	for i := 0; i < len(kv); i += 2 {
		s.caps[kv[i]] = kv[i+1]
	}
	return s
}

// skuPages are the pages the fake serves, by location.
var skuPages = map[string][][]sku{
	"eastus": {
		{
			vm("Standard_D2s_v3", "vCPUs", "2", "vCPUsAvailable", "2", "MemoryGB", "8", "CpuArchitectureType", "x64"),
			vm("Standard_D2ps_v5", "vCPUs", "2", "MemoryGB", "8", "CpuArchitectureType", "Arm64"),
			vm("Standard_D2s_v5", "vCPUs", "2", "MemoryGB", "8", "CpuArchitectureType", "x64"),
			{name: "Premium_LRS", resourceType: "disks", caps: map[string]string{"MaxSizeGiB": "4"}},
		},
		{
			vm("Standard_B2s", "vCPUs", "2", "MemoryGB", "4", "CpuArchitectureType", "x64"),
			vm("Standard_B2ts_v2", "vCPUs", "2", "MemoryGB", "1", "CpuArchitectureType", "x64"),
			vm("Standard_B1ls", "vCPUs", "1", "MemoryGB", "0.5", "CpuArchitectureType", "x64"),
			vm("Standard_NC6s_v3", "vCPUs", "6", "MemoryGB", "112", "GPUs", "1", "CpuArchitectureType", "x64"),
			vm("Standard_ND96asr_v4", "vCPUs", "96", "MemoryGB", "900", "GPUs", "8", "CpuArchitectureType", "x64"),
			vm("Standard_E4-2s_v3", "vCPUs", "4", "vCPUsAvailable", "2", "MemoryGB", "32", "CpuArchitectureType", "x64"),
			vm("Standard_X1", "vCPUs", "1", "MemoryGB", "1"),
			vm("Standard_Y1", "vCPUs", "1", "CpuArchitectureType", "x64"),
		},
	},
	"westeurope": {{
		vm("Standard_D2s_v3", "vCPUs", "2", "vCPUsAvailable", "2", "MemoryGB", "8", "CpuArchitectureType", "x64"),
		vm("Standard_D2s_v5", "vCPUs", "2", "MemoryGB", "16", "CpuArchitectureType", "x64"),
	}},
}

const subscription = "00000000-0000-0000-0000-000000000001"

// armAPI serves skuPages as ARM does (value and nextLink), to the real
// armcompute client, and checks the bearer token and api-version.
func armAPI(t *testing.T, status int) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		loc := strings.TrimSuffix(strings.TrimPrefix(q.Get("$filter"), "location eq '"), "'")
		switch {
		case r.URL.Path != "/subscriptions/"+subscription+"/providers/Microsoft.Compute/skus" || r.Method != http.MethodGet:
			http.Error(w, `{"error":{"code":"NotFound","message":"unexpected `+r.URL.Path+`"}}`, http.StatusNotFound)
			return
		case r.Header.Get("Authorization") != "Bearer fake_token":
			http.Error(w, `{"error":{"code":"AuthenticationFailed","message":"no token"}}`, http.StatusUnauthorized)
			return
		case q.Get("api-version") != resourceSKUsAPIVersion:
			http.Error(w, `{"error":{"code":"InvalidApiVersion","message":"api-version `+q.Get("api-version")+`"}}`, http.StatusBadRequest)
			return
		case status != http.StatusOK:
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(status)
			_, _ = w.Write([]byte(`{"error":{"code":"AuthorizationFailed","message":"the client has no authorization to read Microsoft.Compute/skus"}}`))
			return
		}
		pages := skuPages[loc]
		if pages == nil {
			pages = [][]sku{{}}
		}
		i, _ := strconv.Atoi(q.Get("$skiptoken"))
		var value []map[string]any
		for _, s := range pages[i] {
			var caps []map[string]string
			for k, v := range s.caps {
				caps = append(caps, map[string]string{"name": k, "value": v})
			}
			value = append(value, map[string]any{
				"resourceType": s.resourceType, "name": s.name, "tier": "Standard",
				"locations": []string{loc}, "capabilities": caps, "restrictions": []any{},
			})
		}
		page := map[string]any{"value": value}
		if i+1 < len(pages) {
			q.Set("$skiptoken", strconv.Itoa(i+1))
			page["nextLink"] = "http://" + r.Host + r.URL.Path + "?" + q.Encode()
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(page)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// testWorld reaches the fakes with a fake credential and env as the
// environment.
func testWorld(env map[string]string, cred azcore.TokenCredential) world {
	return world{
		getenv:     func(k string) string { return env[k] },
		client:     &http.Client{Timeout: 10 * time.Second},
		credential: func() (azcore.TokenCredential, error) { return cred, nil },
	}
}

const now = "2026-11-30T12:34:56Z"

func genLive(t *testing.T, w world, args ...string) (*catalog.Catalog, string, error) {
	t.Helper()
	out := filepath.Join(t.TempDir(), "azure.json")
	args = append([]string{"-source", filepath.Join("..", "source"), "-out", out, "-now", now}, args...)
	var stdout, stderr bytes.Buffer
	if err := runIn(t.Context(), w, args, &stdout, &stderr); err != nil {
		return nil, stdout.String(), err
	}
	// Regenerating from the same answers gives the same bytes.
	if err := runIn(t.Context(), w, append(args, "-check"), &bytes.Buffer{}, &stderr); err != nil {
		t.Errorf("-check after a live build: %v", err)
	}
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	c, err := catalog.Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	return c, stdout.String(), nil
}

func usd(v float64) *float64 { return &v }

func TestLivePrices(t *testing.T) {
	prices := pricesAPI(t, 0)
	c, out, err := genLive(t, testWorld(nil, nil), "-live-prices", "-regions", "eastus, westeurope", "-prices-url", prices.URL+"/api/retail/prices")
	if err != nil {
		t.Fatal(err)
	}
	want := []catalog.Region{
		{Name: "eastus", Prices: map[string]catalog.Price{
			"Standard_B2s":    {OnDemand: usd(0.0416)},
			"Standard_D2s_v3": {OnDemand: usd(0.096), Spot: usd(0.0192)},
			"Standard_D4s_v3": {OnDemand: usd(0.192), Spot: usd(0.04)},
		}},
		{Name: "westeurope", Prices: map[string]catalog.Price{
			"Standard_D2s_v3": {OnDemand: usd(0.11), Spot: usd(0.022)},
		}},
	}
	if !reflect.DeepEqual(c.Regions, want) {
		got, _ := json.Marshal(c.Regions)
		t.Errorf("regions %s", got)
	}
	if len(c.Types) != 132 {
		t.Errorf("%d types, want specs.csv's 132", len(c.Types))
	}
	if want := time.Date(2026, 11, 30, 12, 34, 56, 0, time.UTC); !c.GeneratedAt.Equal(want) {
		t.Errorf("generatedAt %v, want -now %v", c.GeneratedAt, want)
	}
	last := c.Sources[len(c.Sources)-1]
	wantSrc := catalog.Source{
		Name:   "Azure Retail Prices API (Virtual Machines, Linux, Consumption: pay-as-you-go and spot)",
		Ref:    prices.URL + "/api/retail/prices?api-version=" + pricesAPIVersion,
		Date:   time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC),
		Covers: "on-demand and spot prices: eastus, westeurope",
	}
	if !reflect.DeepEqual(last, wantSrc) || len(c.Sources) != len(sources)+1 {
		t.Errorf("sources %+v, want specs.csv's and %+v", c.Sources, wantSrc)
	}
	for _, s := range []string{
		"132 types, regions eastus, westeurope, 7 priced offerings (4 on-demand, 3 spot)\n",
		"prices: 21 meters read in 2 regions, 10 left out (Low Priority 1, Windows 2, expired 1, not Consumption 2, not USD 1, not per hour 1, not the primary meter region 1, not yet in effect 1 ...",
		"; 2 conflicts, 2 of them with different prices (kept the newest effectiveStartDate, then the lowest price)",
		"; skipped 2 price rows for 1 types without specs (Standard_D2s_v5)\n",
	} {
		s = strings.TrimSuffix(s, " ...")
		if !strings.Contains(out, s) {
			t.Errorf("report %q\nlacks %q", out, s)
		}
	}
}

func TestLivePricesRetriesThrottling(t *testing.T) {
	for _, tc := range []struct {
		retries string
		want    string // the error, or "" for none
	}{{"2", ""}, {"1", "HTTP 429 Too Many Requests: slow down"}} {
		prices := pricesAPI(t, 2)
		_, _, err := genLive(t, testWorld(nil, nil), "-live-prices", "-retries", tc.retries, "-regions", "westeurope", "-prices-url", prices.URL+"/api/retail/prices")
		if (tc.want == "" && err != nil) || (tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want))) {
			t.Errorf("-retries %s after two HTTP 429s: error %v, want %q", tc.retries, err, tc.want)
		}
	}
}

func TestLivePricesErrors(t *testing.T) {
	prices := pricesAPI(t, 0)
	var calls atomic.Int32
	failing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		calls.Add(1)
		http.Error(w, "upstream trouble", http.StatusInternalServerError)
	}))
	t.Cleanup(failing.Close)
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"HTTP 500", []string{"-live-prices", "-retries", "0", "-regions", "eastus", "-prices-url", failing.URL}, "reading the Azure Retail Prices API for eastus (page 1): GET " + failing.URL},
		{"HTTP 500 body", []string{"-live-prices", "-retries", "0", "-regions", "eastus", "-prices-url", failing.URL}, "HTTP 500 Internal Server Error: upstream trouble"},
		{"an unknown region", []string{"-live-prices", "-regions", "eastus,nowhere", "-prices-url", prices.URL + "/api/retail/prices"}, `no Virtual Machines prices in "nowhere" (is it an Azure region name`},
		{"a bad region", []string{"-live-prices", "-regions", "East US", "-prices-url", prices.URL}, `parsing -regions: "East US" is not an Azure region name`},
		{"a bad URL", []string{"-live-prices", "-prices-url", "ftp://x"}, `parsing -prices-url: "ftp://x" is not an http(s) URL`},
		{"a bad -now", []string{"-live-prices", "-now", "yesterday"}, "parsing -now: "},
		{"-regions alone", []string{"-regions", "eastus"}, "-regions needs -live-prices or -live-specs"},
		{"-date with a live build", []string{"-live-prices", "-date", "2026-01-01"}, "-date is for offline builds"},
		{"-prices-url without -live-prices", []string{"-live-specs", "-prices-url", prices.URL}, "-prices-url needs -live-prices"},
		{"-subscription without -live-specs", []string{"-live-prices", "-subscription", "x"}, "-subscription needs -live-specs"},
		{"negative -retries", []string{"-live-prices", "-retries", "-1"}, "-retries -1 is negative"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "azure.json")
			args := append([]string{"-source", filepath.Join("..", "source"), "-out", out}, tc.args...)
			err := runIn(t.Context(), testWorld(nil, nil), args, &bytes.Buffer{}, &bytes.Buffer{})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one containing %q", err, tc.want)
			}
			if _, serr := os.Stat(out); serr == nil {
				t.Error("wrote a catalog despite the error")
			}
		})
	}
	if n := calls.Load(); n != 2 {
		t.Errorf("the failing API was called %d times, want once a case with -retries 0", n)
	}
}

func TestLiveSpecs(t *testing.T) {
	armSrv := armAPI(t, http.StatusOK)
	prices := pricesAPI(t, 0)
	w := testWorld(map[string]string{"AZURE_SUBSCRIPTION_ID": subscription}, &azfake.TokenCredential{})
	c, out, err := genLive(t, w, "-live-specs", "-live-prices", "-regions", "eastus,westeurope",
		"-arm-endpoint", armSrv.URL, "-prices-url", prices.URL+"/api/retail/prices")
	if err != nil {
		t.Fatal(err)
	}
	wantTypes := []catalog.Type{
		{Name: "Standard_B2s", VCPU: 2, MemoryMiB: 4096, Arch: "amd64", BaselineMilliCPU: 400},
		{Name: "Standard_D2ps_v5", VCPU: 2, MemoryMiB: 8192, Arch: "arm64"},
		{Name: "Standard_D2s_v3", VCPU: 2, MemoryMiB: 8192, Arch: "amd64"},
		{Name: "Standard_D2s_v5", VCPU: 2, MemoryMiB: 8192, Arch: "amd64"},
		{Name: "Standard_E4-2s_v3", VCPU: 2, MemoryMiB: 32768, Arch: "amd64"},
		{Name: "Standard_NC6s_v3", VCPU: 6, MemoryMiB: 114688, Arch: "amd64", GPU: &catalog.GPU{Count: 1, Kind: "v100", MemoryMiB: 16384}},
		{Name: "Standard_ND96asr_v4", VCPU: 96, MemoryMiB: 921600, Arch: "amd64", GPU: &catalog.GPU{Count: 8}},
	}
	if !reflect.DeepEqual(c.Types, wantTypes) {
		got, _ := json.MarshalIndent(c.Types, "", " ")
		t.Errorf("types %s", got)
	}
	var names []string
	for _, s := range c.Sources {
		names = append(names, s.Name)
	}
	wantNames := []string{
		"Azure Resource Manager Microsoft.Compute/skus (Resource SKUs list, virtualMachines)",
		baselineSource.Name,
		ncv3Source.Name,
		"Azure Retail Prices API (Virtual Machines, Linux, Consumption: pay-as-you-go and spot)",
	}
	if !reflect.DeepEqual(names, wantNames) {
		t.Errorf("sources %q, want %q", names, wantNames)
	}
	if got, want := c.Sources[0].Ref, armSrv.URL+" (api-version 2021-07-01, armcompute/v8 v8.3.0)"; got != want {
		t.Errorf("size source ref %q, want %q", got, want)
	}
	if got, want := c.Sources[0].Date, time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC); !got.Equal(want) {
		t.Errorf("size source date %v, want %v", got, want)
	}
	// Standard_D2s_v5 has a size now, so its prices are kept.
	east, _ := c.Region("eastus")
	if p := east.Prices["Standard_D2s_v5"]; p.OnDemand == nil || *p.OnDemand != 0.096 || p.Spot == nil || *p.Spot != 0.02 {
		t.Errorf("eastus Standard_D2s_v5 prices %+v", p)
	}
	for _, s := range []string{
		"7 types, regions eastus, westeurope,",
		"specs: 9 virtual machine sizes from Azure Resource Manager in 2 regions",
		"; left out 2 B-series sizes without a specs.csv baseline (Standard_B1ls, Standard_B2ts_v2)",
		"; left out 1 sizes without MemoryGB (Standard_Y1)",
		"; left out 1 sizes without a known CpuArchitectureType (Standard_X1)",
		"; 1 sizes differ between regions, kept the first region's figures (Standard_D2s_v5)",
		"; 129 specs.csv sizes not listed",
		// Standard_D4s_v3 is in specs.csv but not in the fake's list.
		"; skipped 2 price rows for 1 types without specs (Standard_D4s_v3)",
	} {
		if !strings.Contains(out, s) {
			t.Errorf("report %q\nlacks %q", out, s)
		}
	}
}

func TestLiveSpecsErrors(t *testing.T) {
	ok := armAPI(t, http.StatusOK)
	forbidden := armAPI(t, http.StatusForbidden)
	env := map[string]string{"AZURE_SUBSCRIPTION_ID": subscription}
	noCred := &azfake.TokenCredential{}
	noCred.SetError(errors.New("DefaultAzureCredential: failed to acquire a token"))
	for _, tc := range []struct {
		name string
		env  map[string]string
		cred azcore.TokenCredential
		args []string
		want string
	}{
		{"no subscription", nil, &azfake.TokenCredential{}, []string{"-arm-endpoint", ok.URL},
			"-live-specs needs an Azure subscription: pass -subscription ID or set AZURE_SUBSCRIPTION_ID"},
		{"no credential", env, noCred, []string{"-arm-endpoint", ok.URL},
			"-live-specs: no usable Azure credential (it signs in with azidentity's DefaultAzureCredential: set AZURE_TENANT_ID, AZURE_CLIENT_ID and AZURE_CLIENT_SECRET"},
		{"HTTP 403", env, &azfake.TokenCredential{}, []string{"-arm-endpoint", forbidden.URL, "-retries", "0"},
			"listing the virtual machine sizes in eastus from Azure Resource Manager (Microsoft.Compute/skus): "},
		{"HTTP 403 code", env, &azfake.TokenCredential{}, []string{"-arm-endpoint", forbidden.URL, "-retries", "0"}, "AuthorizationFailed"},
		{"another subscription", nil, &azfake.TokenCredential{}, []string{"-arm-endpoint", ok.URL, "-subscription", "other"}, "NotFound"},
		{"an unknown region", env, &azfake.TokenCredential{}, []string{"-arm-endpoint", ok.URL, "-regions", "eastus,nowhere"},
			`no virtual machine sizes in "nowhere" (is it an Azure region name`},
		{"plain http elsewhere", env, &azfake.TokenCredential{}, []string{"-arm-endpoint", "http://management.example.com"},
			"tokens go in clear text only to a loopback address"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"-source", filepath.Join("..", "source"), "-out", filepath.Join(t.TempDir(), "azure.json"), "-live-specs", "-regions", "eastus"}, tc.args...)
			err := runIn(t.Context(), testWorld(tc.env, tc.cred), args, &bytes.Buffer{}, &bytes.Buffer{})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

// TestRecordedVersions keeps the size source's ref true to the SDK that
// go.mod pins.
func TestRecordedVersions(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("\tgithub.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v8 %s\n", armcomputeVersion)
	if !strings.Contains(string(data), want) {
		t.Errorf("go.mod does not require armcompute/v8 %s (armcomputeVersion): update the constant with the module", armcomputeVersion)
	}
}
