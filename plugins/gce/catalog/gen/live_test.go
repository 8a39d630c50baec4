package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kipcell/kip/pluginapi"
	"github.com/kipcell/kip/pluginapi/catalog"
)

// The fake Billing Catalog's rates (USD per vCPU-hour, per GiB-hour, per
// GPU-hour). The tests compose the expected prices from them.
const (
	n2Core, n2RAM           = 0.031611, 0.004237 // us-central1
	n2CoreEU, n2RAMEU       = 0.034806, 0.004664 // europe-west1
	n2SpotCore, n2SpotRAM   = 0.00765, 0.001025
	n1Core, n1RAM           = 0.031611, 0.004237
	n1CustomCore, n1CustRAM = 0.033174, 0.004446
	n2CustomCore, n2CustRAM = 0.033174, 0.004446
	t2aCore, t2aRAM         = 0.0308, 0.00385
	g2Core, g2RAM           = 0.024988, 0.002927
	g2SpotCore, g2SpotRAM   = 0.007496, 0.000878
	l4, l4Spot              = 1.25, 0.3 // 1.25 is units 1 + nanos 250000000
	a2Core, a2RAM           = 0.031611, 0.004237
	c4aCore, c4aRAM         = 0.03465, 0.003938
	c4aSpotCore             = 0.0139
)

// The fake's machine types in zones, per page.
func machineTypePages() []any {
	mt := func(name string, vcpu, mib int64, extra ...map[string]any) map[string]any {
		m := map[string]any{"name": name, "guestCpus": vcpu, "memoryMb": mib, "id": "123456789012345678"}
		for _, e := range extra {
			for k, v := range e {
				m[k] = v
			}
		}
		return m
	}
	gpu := func(kind string, n int) map[string]any {
		return map[string]any{"accelerators": []any{map[string]any{"guestAcceleratorType": kind, "guestAcceleratorCount": n}}}
	}
	shared := map[string]any{"isSharedCpu": true}
	zone := func(z string, types ...map[string]any) map[string]any {
		for _, t := range types {
			t["zone"] = z
		}
		return map[string]any{"machineTypes": types}
	}
	return []any{
		map[string]any{
			"kind": "compute#machineTypeAggregatedList",
			"items": map[string]any{
				"zones/us-central1-a": zone("us-central1-a",
					mt("n2-standard-2", 2, 8192), mt("e2-micro", 2, 1024, shared), mt("g2-standard-4", 4, 16384, gpu("nvidia-l4", 1)),
					mt("t2a-standard-1", 1, 4096), mt("a2-ultragpu-1g", 12, 174080, gpu("nvidia-a100-80gb", 1)), mt("n1-standard-1", 1, 3840)),
				"zones/us-central1-b": zone("us-central1-b",
					mt("n2-standard-2", 2, 8192), mt("h3-standard-88", 88, 360448), mt("c3-standard-4-lssd", 4, 16384)),
				"zones/asia-east1-a": zone("asia-east1-a", mt("c2-standard-4", 4, 16384)),
				"zones/us-east1-b":   map[string]any{"warning": map[string]any{"code": "NO_RESULTS_ON_PAGE", "message": "none"}},
			},
			"nextPageToken": "page-2",
		},
		map[string]any{
			"items": map[string]any{
				// No "zone" field: the scope key names it.
				"zones/europe-west1-b": map[string]any{"machineTypes": []any{
					mt("n2-standard-2", 2, 8192), mt("n4-standard-2", 2, 8192), mt("c4a-standard-1", 1, 4096),
					mt("e2-nano", 2, 512, shared), mt("n1-legacy-1", 1, 3840, map[string]any{"deprecated": map[string]any{"state": "OBSOLETE"}}),
				}},
			},
		},
	}
}

// fakeSKU builds a Billing Catalog SKU.
func fakeSKU(desc, usage, unit string, price float64, regions ...string) map[string]any {
	units := math.Floor(price)
	return map[string]any{
		"name":           "services/6F81-5844-456A/skus/0000-0000-0000",
		"skuId":          "0000-0000-0000",
		"description":    desc,
		"category":       map[string]any{"serviceDisplayName": "Compute Engine", "resourceFamily": "Compute", "resourceGroup": "CPU", "usageType": usage},
		"serviceRegions": regions,
		"pricingInfo": []any{map[string]any{
			"summary": "",
			"pricingExpression": map[string]any{
				"usageUnit": unit,
				"tieredRates": []any{
					// A free first tier: the rate is the last tier's.
					map[string]any{"startUsageAmount": 0, "unitPrice": map[string]any{"currencyCode": "USD", "units": "0", "nanos": 0}},
					map[string]any{"startUsageAmount": 0.1, "unitPrice": map[string]any{
						"currencyCode": "USD", "units": fmt.Sprint(int64(units)), "nanos": int64(math.Round((price - units) * 1e9)),
					}},
				},
			},
		}},
	}
}

func skuPages() []any {
	const us, eu = "us-central1", "europe-west1"
	license := fakeSKU("Licensing Fee for Debian on VM with 1 VCPU", "OnDemand", "h", 5, us)
	license["category"].(map[string]any)["resourceFamily"] = "License"
	return []any{
		map[string]any{
			"skus": []any{
				fakeSKU("N2 Instance Core running in Americas", "OnDemand", "h", n2Core, us, "us-east1"),
				fakeSKU("N2 Instance Ram running in Americas", "OnDemand", "GiBy.h", n2RAM, us),
				fakeSKU("N2 Instance Core running in Belgium", "OnDemand", "h", n2CoreEU, eu),
				fakeSKU("N2 Instance Ram running in Belgium", "OnDemand", "GiBy.h", n2RAMEU, eu),
				fakeSKU("Spot Preemptible N2 Instance Core running in Americas", "Preemptible", "h", n2SpotCore, us),
				fakeSKU("Spot Preemptible N2 Instance Ram running in Americas", "Preemptible", "GiBy.h", n2SpotRAM, us),
				fakeSKU("Commitment v1: N2 Cpu in Americas for 1 Year", "Commit1Yr", "h", 0.0199, us),
				fakeSKU("N2 Sole Tenancy Instance Core running in Americas", "OnDemand", "h", 9, us),
				fakeSKU("N1 Predefined Instance Core running in Americas", "OnDemand", "h", n1Core, us),
				fakeSKU("N1 Predefined Instance Ram running in Americas", "OnDemand", "GiBy.h", n1RAM, us),
				license,
			},
			"nextPageToken": "skus-2",
		},
		map[string]any{
			"skus": []any{
				fakeSKU("T2A Arm Instance Core running in Americas", "OnDemand", "h", t2aCore, us),
				fakeSKU("T2A Arm Instance Ram running in Americas", "OnDemand", "GiBy.h", t2aRAM, us),
				fakeSKU("G2 Instance Core running in Americas", "OnDemand", "h", g2Core, us),
				fakeSKU("G2 Instance Ram running in Americas", "OnDemand", "GiBy.h", g2RAM, us),
				fakeSKU("Spot Preemptible G2 Instance Core running in Americas", "Preemptible", "h", g2SpotCore, us),
				fakeSKU("Spot Preemptible G2 Instance Ram running in Americas", "Preemptible", "GiBy.h", g2SpotRAM, us),
				fakeSKU("Nvidia L4 GPU running in Americas", "OnDemand", "h", l4, us),
				fakeSKU("Nvidia L4 GPU attached to Spot Preemptible VMs running in Americas", "Preemptible", "h", l4Spot, us),
				fakeSKU("A2 Instance Core running in Americas", "OnDemand", "h", a2Core, us),
				fakeSKU("A2 Instance Ram running in Americas", "OnDemand", "GiBy.h", a2RAM, us),
				fakeSKU("C4A Arm Instance Core running in Belgium", "OnDemand", "h", c4aCore, eu),
				fakeSKU("C4A Arm Instance Ram running in Belgium", "OnDemand", "GiBy.h", c4aRAM, eu),
				fakeSKU("Spot Preemptible C4A Arm Instance Core running in Belgium", "Preemptible", "h", c4aSpotCore, eu),
				fakeSKU("Spot Preemptible C4A Arm Instance Ram running in Belgium", "Preemptible", "GiBy.h", 0.0015, eu),
				fakeSKU("Spot Preemptible C4A Arm Instance Ram running in Belgium", "Preemptible", "GiBy.h", 0.0016, eu),
				fakeSKU("Custom Instance Core running in Americas", "OnDemand", "h", n1CustomCore, us),
				fakeSKU("Custom Instance Ram running in Americas", "OnDemand", "GiBy.h", n1CustRAM, us),
				fakeSKU("N2 Custom Instance Core running in Americas", "OnDemand", "h", n2CustomCore, us),
				fakeSKU("N2 Custom Instance Ram running in Americas", "OnDemand", "GiBy.h", n2CustRAM, us),
				fakeSKU("E2 Instance Core running in Americas", "OnDemand", "h", 0.021811, us),
				fakeSKU("E2 Instance Ram running in Americas", "OnDemand", "h", 0.002923, us), // the wrong unit
			},
		},
	}
}

// fakeAPI serves pages of a Google list API at path, following
// pageToken, and records the requests.
type fakeAPI struct {
	t      *testing.T
	path   string
	pages  []any
	status int    // when set, every answer is this HTTP error
	same   string // when set, every page names this next page token

	mu       sync.Mutex
	requests []*http.Request
}

func (f *fakeAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	f.requests = append(f.requests, r.Clone(r.Context()))
	f.mu.Unlock()
	if r.Method != http.MethodGet || r.URL.Path != f.path {
		http.Error(w, `{"error": {"code": 404, "message": "no such path"}}`, http.StatusNotFound)
		return
	}
	if f.status != 0 {
		w.WriteHeader(f.status)
		fmt.Fprintf(w, `{"error": {"code": %d, "message": "Required 'compute.machineTypes.list' permission for 'projects/proj'", "status": "PERMISSION_DENIED"}}`, f.status)
		return
	}
	i := 0
	if tok := r.URL.Query().Get("pageToken"); tok != "" && f.same == "" {
		i = slices.IndexFunc(f.pages, func(p any) bool { return p.(map[string]any)["nextPageToken"] == tok }) + 1
		if i == 0 || i == len(f.pages) {
			http.Error(w, `{"error": {"code": 400, "message": "bad page token"}}`, http.StatusBadRequest)
			return
		}
	}
	page := f.pages[i]
	if f.same != "" {
		page = map[string]any{"nextPageToken": f.same}
	}
	w.Header().Set("Content-Type", "application/json")
	if err := json.NewEncoder(w).Encode(page); err != nil {
		f.t.Error(err)
	}
}

func (f *fakeAPI) calls() []*http.Request {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.requests
}

// liveSource writes a small catalog/source: the shared-core baseline of
// e2-micro, the GPU memory of g2 and a2 types, and a custom grid of n1,
// n2, n4 (sold, no custom SKU) and n2d (not sold).
func liveSource(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	files := map[string]string{
		"specs.csv": strings.Join(catalog.SpecsHeader, ",") + "\n" +
			"a2-ultragpu-1g,12,174080,1,a100,81920,amd64,0\n" +
			"e2-micro,2,1024,0,,0,amd64,250\n" +
			"g2-standard-4,4,16384,1,l4,24576,amd64,0\n",
		"custom.csv": strings.Join(customHeader, ",") + "\n" +
			"n1,1,1,1,1024,2048,256,\n" +
			"n2,2,2,2,1024,2048,256,\n" +
			"n4,2,2,2,2048,2048,256,\n" +
			"n2d,2,2,2,1024,1024,256,\n",
	}
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

type liveRun struct {
	args   []string // the run's arguments
	out    string
	stdout string
}

// runLive runs the generator with -live against fakes of both APIs.
func runLive(t *testing.T, compute, billing *fakeAPI, args ...string) (*liveRun, error) {
	t.Helper()
	t.Setenv("GCE_ACCESS_TOKEN", "")
	t.Setenv("GCE_API_KEY", "")
	cs, bs := httptest.NewServer(compute), httptest.NewServer(billing)
	t.Cleanup(cs.Close)
	t.Cleanup(bs.Close)
	r := &liveRun{out: filepath.Join(t.TempDir(), "gce.json")}
	var stdout, stderr bytes.Buffer
	r.args = append([]string{"-live", "-source", liveSource(t), "-out", r.out,
		"-compute-url", cs.URL + "/compute/v1", "-billing-url", bs.URL + "/v1"}, args...)
	err := run(r.args, &stdout, &stderr)
	r.stdout = stdout.String()
	return r, err
}

func newFakes(t *testing.T) (compute, billing *fakeAPI) {
	return &fakeAPI{t: t, path: "/compute/v1/projects/proj/aggregated/machineTypes", pages: machineTypePages()},
		&fakeAPI{t: t, path: "/v1/services/6F81-5844-456A/skus", pages: skuPages()}
}

func TestLive(t *testing.T) {
	compute, billing := newFakes(t)
	r, err := runLive(t, compute, billing, "-project", "proj", "-regions", "us-central1,europe-west1",
		"-access-token", "tok", "-api-key", "key", "-date", "2026-12-01T10:00:00Z")
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(r.out)
	if err != nil {
		t.Fatal(err)
	}
	c, err := catalog.Parse(data)
	if err != nil {
		t.Fatal(err)
	}

	// Both APIs were paged through, with their credentials.
	cc, bc := compute.calls(), billing.calls()
	if len(cc) != 2 || len(bc) != 2 {
		t.Fatalf("calls: compute %d, billing %d; want 2 pages each", len(cc), len(bc))
	}
	if got := cc[1].URL.Query().Get("pageToken"); got != "page-2" {
		t.Errorf("compute page 2 token %q", got)
	}
	if got := bc[1].URL.Query().Get("pageToken"); got != "skus-2" {
		t.Errorf("billing page 2 token %q", got)
	}
	for _, req := range cc {
		if got := req.Header.Get("Authorization"); got != "Bearer tok" {
			t.Errorf("compute Authorization %q, want the -access-token", got)
		}
	}
	for _, req := range bc {
		if got, auth := req.Header.Get("X-Goog-Api-Key"), req.Header.Get("Authorization"); got != "key" || auth != "" || req.URL.Query().Has("key") {
			t.Errorf("billing X-Goog-Api-Key %q, Authorization %q, query %q: want the API key in the header only", got, auth, req.URL.RawQuery)
		}
		if got := req.URL.Query().Get("pageSize"); got != "5000" {
			t.Errorf("billing pageSize %q", got)
		}
	}

	at := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	if !c.GeneratedAt.Equal(at) {
		t.Errorf("generatedAt %v, want %v", c.GeneratedAt, at)
	}
	if s := c.Sources[0]; !strings.Contains(s.Name, "machineTypes.aggregatedList") || !strings.HasSuffix(s.Ref, "/compute/v1") || !s.Date.Equal(at) {
		t.Errorf("sources[0] = %+v", s)
	}
	if s := c.Sources[1]; !strings.Contains(s.Name, "Cloud Billing Catalog API") || !strings.HasSuffix(s.Ref, "/v1") || !s.Date.Equal(at) {
		t.Errorf("sources[1] = %+v", s)
	}

	// Types: sizes from the API, arch from the family rule, baselines and
	// GPU memory from specs.csv, GPU kinds normalised.
	wantTypes := map[string]catalog.Type{
		"a2-ultragpu-1g":   {VCPU: 12, MemoryMiB: 174080, Arch: "amd64", GPU: &catalog.GPU{Count: 1, Kind: "a100-80gb", MemoryMiB: 81920}},
		"c4a-standard-1":   {VCPU: 1, MemoryMiB: 4096, Arch: "arm64"},
		"custom-1-1024":    {VCPU: 1, MemoryMiB: 1024, Arch: "amd64"},
		"custom-1-2048":    {VCPU: 1, MemoryMiB: 2048, Arch: "amd64"},
		"e2-micro":         {VCPU: 2, MemoryMiB: 1024, Arch: "amd64", BaselineMilliCPU: 250},
		"g2-standard-4":    {VCPU: 4, MemoryMiB: 16384, Arch: "amd64", GPU: &catalog.GPU{Count: 1, Kind: "l4", MemoryMiB: 24576}},
		"n1-standard-1":    {VCPU: 1, MemoryMiB: 3840, Arch: "amd64"},
		"n2-custom-2-2048": {VCPU: 2, MemoryMiB: 2048, Arch: "amd64"},
		"n2-custom-2-4096": {VCPU: 2, MemoryMiB: 4096, Arch: "amd64"},
		"n2-standard-2":    {VCPU: 2, MemoryMiB: 8192, Arch: "amd64"},
		"n4-custom-2-4096": {VCPU: 2, MemoryMiB: 4096, Arch: "amd64"},
		"n4-standard-2":    {VCPU: 2, MemoryMiB: 8192, Arch: "amd64"},
		"t2a-standard-1":   {VCPU: 1, MemoryMiB: 4096, Arch: "arm64"},
	}
	if len(c.Types) != len(wantTypes) {
		var names []string
		for _, ty := range c.Types {
			names = append(names, ty.Name)
		}
		t.Errorf("types %v, want the %d of %v", names, len(wantTypes), wantTypes)
	}
	for name, want := range wantTypes {
		want.Name = name
		if got, ok := c.Type(name); !ok || !reflect.DeepEqual(got, want) {
			t.Errorf("type %s = %+v (GPU %+v), want %+v (GPU %+v)", name, got, got.GPU, want, want.GPU)
		}
	}

	// Prices, composed here from the fake's rates.
	rnd := func(v float64) *float64 { v = math.Round(v*1e6) / 1e6; return &v }
	type price struct{ od, spot *float64 }
	want := map[string]map[string]price{
		"us-central1": {
			"n2-standard-2":    {rnd(2*n2Core + 8*n2RAM), rnd(2*n2SpotCore + 8*n2SpotRAM)},
			"e2-micro":         {}, // shared-core: not billed per vCPU
			"g2-standard-4":    {rnd(4*g2Core + 16*g2RAM + l4), rnd(4*g2SpotCore + 16*g2SpotRAM + l4Spot)},
			"t2a-standard-1":   {rnd(t2aCore + 4*t2aRAM), nil},
			"a2-ultragpu-1g":   {}, // no A100 80GB SKU
			"n1-standard-1":    {rnd(n1Core + 3.75*n1RAM), nil},
			"custom-1-1024":    {rnd(n1CustomCore + n1CustRAM), nil},
			"custom-1-2048":    {rnd(n1CustomCore + 2*n1CustRAM), nil},
			"n2-custom-2-2048": {rnd(2*n2CustomCore + 2*n2CustRAM), nil},
			"n2-custom-2-4096": {rnd(2*n2CustomCore + 4*n2CustRAM), nil},
		},
		"europe-west1": {
			"n2-standard-2":    {rnd(2*n2CoreEU + 8*n2RAMEU), nil},
			"n4-standard-2":    {},                             // a family without SKUs
			"c4a-standard-1":   {rnd(c4aCore + 4*c4aRAM), nil}, // spot RAM is ambiguous
			"n2-custom-2-2048": {},
			"n2-custom-2-4096": {},
			"n4-custom-2-4096": {},
		},
	}
	if len(c.Regions) != 2 {
		t.Fatalf("regions %+v", c.Regions)
	}
	for region, types := range want {
		r, ok := c.Region(region)
		if !ok {
			t.Errorf("no region %s", region)
			continue
		}
		if len(r.Prices) != len(types) {
			t.Errorf("region %s sells %d types, want %d: %v", region, len(r.Prices), len(types), r.Prices)
		}
		for name, w := range types {
			p, ok := r.Prices[name]
			if !ok {
				t.Errorf("region %s does not sell %s", region, name)
				continue
			}
			if !samePrice(p.OnDemand, w.od) || !samePrice(p.Spot, w.spot) {
				t.Errorf("%s %s: on-demand %s spot %s, want %s and %s", region, name, show(p.OnDemand), show(p.Spot), show(w.od), show(w.spot))
			}
		}
	}

	for _, w := range []string{
		"live: 13 types (8 predefined, 5 custom up to 32 vCPUs), regions europe-west1, us-central1, 12 priced offerings, 20 unknown",
		"left out 1 obsolete (n1-legacy-1)",
		"left out 1 with bundled Local SSD or bare metal (c3-standard-4-lssd)",
		"left out 1 of a family without a known architecture (h3-standard-88)",
		"left out 1 shared-core without a baseline in specs.csv (e2-nano)",
		"left out 1 custom types of families not sold in the regions (n2d-custom-2-2048)",
		"1 rates left unknown, priced differently by two SKUs (europe-west1/spot/c4a/ram)",
		"skipped 1 SKUs with an unexpected unit, currency or no price (E2 Instance Ram running in Americas)",
		"; 4 types without any price (a2-ultragpu-1g, e2-micro, n4-custom-2-4096, n4-standard-2);",
	} {
		if !strings.Contains(r.stdout, w) {
			t.Errorf("summary %q lacks %q", r.stdout, w)
		}
	}
	if strings.Count(r.stdout, "\n") != 1 {
		t.Errorf("want a one-line summary, got %q", r.stdout)
	}

	// The same run with -check finds the file current.
	var stdout, stderr bytes.Buffer
	if err := run(append(r.args, "-check"), &stdout, &stderr); err != nil {
		t.Errorf("-check after writing: %v", err)
	}
}

func samePrice(a, b *float64) bool { return (a == nil) == (b == nil) && (a == nil || *a == *b) }

func show(p *float64) string {
	if p == nil {
		return "unknown"
	}
	return fmt.Sprint(*p)
}

func TestLiveCredentials(t *testing.T) {
	// No -api-key: the Billing Catalog gets the OAuth token too, here from
	// $GCE_ACCESS_TOKEN; without -date the run time is now.
	compute, billing := newFakes(t)
	before := time.Now().UTC().Truncate(time.Second)
	cs, bs := httptest.NewServer(compute), httptest.NewServer(billing)
	defer cs.Close()
	defer bs.Close()
	t.Setenv("GCE_ACCESS_TOKEN", "env-tok")
	t.Setenv("GCE_API_KEY", "")
	out := filepath.Join(t.TempDir(), "gce.json")
	var stdout, stderr bytes.Buffer
	err := run([]string{"-live", "-source", liveSource(t), "-out", out, "-project", "proj", "-regions", "us-central1",
		"-compute-url", cs.URL + "/compute/v1", "-billing-url", bs.URL + "/v1"}, &stdout, &stderr)
	if err != nil {
		t.Fatal(err)
	}
	for _, req := range append(compute.calls(), billing.calls()...) {
		if got := req.Header.Get("Authorization"); got != "Bearer env-tok" || req.Header.Get("X-Goog-Api-Key") != "" {
			t.Errorf("%s: Authorization %q, want $GCE_ACCESS_TOKEN's and no API key", req.URL.Path, got)
		}
	}
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	c, err := catalog.Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	if c.GeneratedAt.Before(before) || c.GeneratedAt.After(time.Now()) {
		t.Errorf("generatedAt %v, want the run time", c.GeneratedAt)
	}
}

func TestLiveErrors(t *testing.T) {
	tests := []struct {
		name  string
		setup func(t *testing.T, compute, billing *fakeAPI)
		args  []string
		want  []string
	}{
		{"no project", nil, []string{"-access-token", "tok"},
			[]string{"-live needs -project PROJECT"}},
		{"compute forbidden", func(_ *testing.T, c, _ *fakeAPI) { c.status = http.StatusForbidden }, nil,
			[]string{`listing the machine types of project "proj" with the Compute Engine API: HTTP 403 Forbidden: Required 'compute.machineTypes.list' permission`}},
		{"billing forbidden", func(_ *testing.T, _, b *fakeAPI) { b.status = http.StatusForbidden }, nil,
			[]string{`with the Cloud Billing Catalog API, for project "proj" with an OAuth token: HTTP 403 Forbidden: Required`, "6F81-5844-456A"}},
		{"repeated page token", func(_ *testing.T, _, b *fakeAPI) { b.same = "again" }, nil,
			[]string{`with the Cloud Billing Catalog API, for project "proj" with an OAuth token: page token "again" repeats`}},
		{"region without types", nil, []string{"-regions", "us-central1,mars-north1"},
			[]string{"region mars-north1: the Compute Engine API lists no machine type"}},
		{"bad regions", nil, []string{"-regions", "us-central1,,x"}, []string{"a region is empty"}},
		{"bad date", nil, []string{"-date", "yesterday"}, []string{`parsing -date "yesterday"`}},
		{"zones disagree", func(_ *testing.T, c, _ *fakeAPI) {
			items := c.pages[1].(map[string]any)["items"].(map[string]any)
			items["zones/europe-west1-c"] = map[string]any{"machineTypes": []any{
				map[string]any{"name": "n2-standard-2", "guestCpus": 2, "memoryMb": 4096, "zone": "europe-west1-c"},
			}}
		}, nil, []string{"machine type n2-standard-2 is 2 vCPU, 8192 MiB", "but 2 vCPU, 4096 MiB"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			compute, billing := newFakes(t)
			if tt.setup != nil {
				tt.setup(t, compute, billing)
			}
			args := tt.args
			if !strings.Contains(tt.name, "no project") {
				args = append([]string{"-project", "proj", "-access-token", "tok"}, args...)
			}
			r, err := runLive(t, compute, billing, args...)
			if err == nil {
				t.Fatalf("no error; summary %q", r.stdout)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
			if _, statErr := os.Stat(r.out); statErr == nil {
				t.Error("a failed run wrote the catalog")
			}
		})
	}

	// No token and no Application Default Credentials: say how to get some.
	compute, billing := newFakes(t)
	t.Setenv("GOOGLE_APPLICATION_CREDENTIALS", filepath.Join(t.TempDir(), "missing.json"))
	_, err := runLive(t, compute, billing, "-project", "proj")
	if err == nil || !strings.Contains(err.Error(), "finding Application Default Credentials") || !strings.Contains(err.Error(), "-access-token") {
		t.Errorf("without credentials: %v", err)
	}
	if n := len(compute.calls()) + len(billing.calls()); n != 0 {
		t.Errorf("%d calls without credentials", n)
	}
}

func TestParseSKU(t *testing.T) {
	type want struct {
		item     rateItem
		capacity pluginapi.CapacityType
	}
	od, spot := pluginapi.CapacityOnDemand, pluginapi.CapacitySpot
	tests := []struct {
		desc, usage string
		want        *want
	}{
		{"N2 Instance Core running in Americas", "OnDemand", &want{rateItem{family: "n2"}, od}},
		{"N2D AMD Instance Ram running in Frankfurt", "OnDemand", &want{rateItem{family: "n2d", res: resRAM}, od}},
		{"Spot Preemptible T2A Arm Instance Core running in Americas", "Preemptible", &want{rateItem{family: "t2a"}, spot}},
		{"N2D AMD Custom Instance Core running in Americas", "OnDemand", &want{rateItem{family: "n2d", custom: true}, od}},
		{"Spot Preemptible Custom Instance Ram running in Americas", "Preemptible", &want{rateItem{family: "n1", custom: true, res: resRAM}, spot}},
		{"N1 Predefined Instance Core running in Americas", "OnDemand", &want{rateItem{family: "n1"}, od}},
		{"Compute optimized Ram running in Americas", "OnDemand", &want{rateItem{family: "c2", res: resRAM}, od}},
		{"Memory-optimized Instance Core running in Americas", "OnDemand", &want{rateItem{family: "m1"}, od}},
		{"C3D Instance Core running in Americas", "OnDemand", &want{rateItem{family: "c3d"}, od}},
		{"Nvidia Tesla A100 GPU running in Americas", "OnDemand", &want{rateItem{family: "a100", res: resGPU}, od}},
		{"Nvidia Tesla A100 80GB GPU running in Americas", "OnDemand", &want{rateItem{family: "a100-80gb", res: resGPU}, od}},
		{"Nvidia L4 GPU attached to Spot Preemptible VMs running in Americas", "Preemptible", &want{rateItem{family: "l4", res: resGPU}, spot}},
		// Not rates of the catalog.
		{"N2 Sole Tenancy Instance Core running in Americas", "OnDemand", nil},
		{"C4 Instance Local SSD running in Americas", "OnDemand", nil},
		{"Commitment v1: N2 Cpu in Americas for 1 Year", "Commit1Yr", nil},
		{"Spot Preemptible N2 Instance Core running in Americas", "OnDemand", nil},
		{"N2 Instance Core running in Americas", "Preemptible", nil},
		{"Preemptible N1 Predefined Instance Core running in Americas", "Preemptible", nil},
		{"M4Ultramem224 Instance Core running in Americas", "OnDemand", nil},
		{"Micro Instance with burstable CPU running in Americas", "OnDemand", nil},
		{"N2 Instance Core", "OnDemand", nil},
	}
	for _, tt := range tests {
		var s sku
		s.Description, s.Category.ResourceFamily, s.Category.UsageType = tt.desc, "Compute", tt.usage
		item, capacity, ok := parseSKU(s)
		switch {
		case tt.want == nil && ok:
			t.Errorf("%q (%s) = %+v %s, want no rate", tt.desc, tt.usage, item, capacity)
		case tt.want != nil && (!ok || item != tt.want.item || capacity != tt.want.capacity):
			t.Errorf("%q (%s) = %+v %s %v, want %+v %s", tt.desc, tt.usage, item, capacity, ok, tt.want.item, tt.want.capacity)
		}
	}
}

func TestGPUKindAndZoneRegion(t *testing.T) {
	for in, want := range map[string]string{
		"nvidia-tesla-a100": "a100", "nvidia-a100-80gb": "a100-80gb", "nvidia-l4": "l4",
		"NVIDIA-TESLA-T4": "t4", "nvidia-": "nvidia-", "ct5lp": "ct5lp",
	} {
		if got := gpuKind(in); got != want {
			t.Errorf("gpuKind(%q) = %q, want %q", in, got, want)
		}
	}
	for in, want := range map[string]string{"us-central1-a": "us-central1", "europe-west4-b": "europe-west4", "x": "", "us-": "", "-a": ""} {
		if got, ok := zoneRegion(in); got != want || ok != (want != "") {
			t.Errorf("zoneRegion(%q) = %q, %v; want %q", in, got, ok, want)
		}
	}
}

// The live path's architecture rule agrees with specs.csv on every family
// the offline catalog lists.
func TestFamilyArchAgreesWithSpecs(t *testing.T) {
	types, err := catalog.ReadSpecsFile(filepath.Join("..", "source", "specs.csv"))
	if err != nil {
		t.Fatal(err)
	}
	for _, ty := range types {
		if got, ok := familyArch[family(ty.Name)]; !ok || string(got) != ty.Arch {
			t.Errorf("%s: the live rule says %q (known %v), specs.csv %q", ty.Name, got, ok, ty.Arch)
		}
	}
}

func TestErrorMessage(t *testing.T) {
	for body, want := range map[string]string{
		`{"error": {"code": 403, "message": "API key not valid."}}`: "API key not valid.",
		"<html>Forbidden</html>":                                    "<html>Forbidden</html>",
		"":                                                          "(no body)",
		strings.Repeat("x", 300):                                    strings.Repeat("x", 200) + "...",
	} {
		if got := errorMessage([]byte(body)); got != want {
			t.Errorf("errorMessage(%.20q) = %.30q, want %.30q", body, got, want)
		}
	}
}
