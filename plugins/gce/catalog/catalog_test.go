package catalog

import (
	"math"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/kipcell/kip/pluginapi"
	apicatalog "github.com/kipcell/kip/pluginapi/catalog"
)

func mustLoad(t *testing.T) *apicatalog.Catalog {
	t.Helper()
	c, err := Load()
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	return c
}

func TestLoadParsesOnce(t *testing.T) {
	c := mustLoad(t)
	if again := mustLoad(t); again != c {
		t.Error("Load parsed the catalog twice")
	}
	if c.Cloud != "gce" || len(c.Sources) == 0 {
		t.Fatalf("catalog: cloud %q, %d sources", c.Cloud, len(c.Sources))
	}
	if n := len(c.Types); n < 600 || n > 1500 {
		t.Errorf("%d types, want the predefined ones and a bounded custom grid (under 1500)", n)
	}
	if want := time.Date(2026, 11, 21, 0, 0, 0, 0, time.UTC); !c.GeneratedAt.Equal(want) {
		t.Errorf("generatedAt %v, want the transcription date %v", c.GeneratedAt, want)
	}
	for _, s := range c.Sources {
		if s.Name == "" || s.Covers == "" || len(s.Covers) > 90 {
			t.Errorf("source %+v: want a name and a short covers", s)
		}
	}
}

func TestTypes(t *testing.T) {
	c := mustLoad(t)
	tests := []struct {
		name     string
		vcpu     int64
		mib      int64
		arch     string
		baseline int64
		gpu      *apicatalog.GPU
	}{
		{"n1-standard-1", 1, 3840, "amd64", 0, nil},
		{"n1-highcpu-2", 2, 1843, "amd64", 0, nil},
		{"n2-standard-2", 2, 8192, "amd64", 0, nil},
		{"n2-highmem-128", 128, 884736, "amd64", 0, nil},
		{"e2-micro", 2, 1024, "amd64", 250, nil},
		{"f1-micro", 1, 614, "amd64", 200, nil},
		{"t2a-standard-1", 1, 4096, "arm64", 0, nil},
		{"a2-highgpu-1g", 12, 87040, "amd64", 0, &apicatalog.GPU{Count: 1, Kind: "a100", MemoryMiB: 40960}},
		{"a2-ultragpu-1g", 12, 174080, "amd64", 0, &apicatalog.GPU{Count: 1, Kind: "a100", MemoryMiB: 81920}},
		{"g2-standard-4", 4, 16384, "amd64", 0, &apicatalog.GPU{Count: 1, Kind: "l4", MemoryMiB: 24576}},
		{"custom-1-1024", 1, 1024, "amd64", 0, nil},
		{"custom-4-8192", 4, 8192, "amd64", 0, nil},
		{"e2-custom-2-2048", 2, 2048, "amd64", 0, nil},
		{"n2d-custom-32-262144", 32, 262144, "amd64", 0, nil},
		{"n4-custom-2-4096", 2, 4096, "amd64", 0, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := c.Type(tt.name)
			if !ok {
				t.Fatalf("%s is missing", tt.name)
			}
			want := apicatalog.Type{Name: tt.name, VCPU: tt.vcpu, MemoryMiB: tt.mib, Arch: tt.arch, BaselineMilliCPU: tt.baseline, GPU: tt.gpu}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("got %+v (gpu %+v), want %+v (gpu %+v)", got, got.GPU, want, want.GPU)
			}
		})
	}
}

func TestCustomGrid(t *testing.T) {
	c := mustLoad(t)
	for _, name := range []string{
		"custom-1-7168",        // N1 tops out at 6.5 GiB per vCPU
		"n1-custom-4-4096",     // N1 custom types are custom-*, without the family
		"custom-34-34816",      // above the 32-vCPU bound
		"n2-custom-36-36864",   // above the 32-vCPU bound
		"n2d-custom-6-6144",    // N2D allows 2, 4, 8, 16, 32, ... vCPUs
		"n4-custom-2-2048",     // N4 needs 2 GiB per vCPU at least
		"e2-custom-1-1024",     // E2 needs 2 vCPUs at least
		"e2-custom-32-262144",  // E2 tops out at 128 GB
		"e2-custom-2-3072",     // not a whole number of GiB per vCPU
		"n2-highcpu-128",       // priced by the source, not a documented type
		"c3-standard-4-lssd",   // bundles local SSD, left out
		"e2-custom-micro-1024", // fractional vCPU, left out
	} {
		if _, ok := c.Type(name); ok {
			t.Errorf("%s is in the catalog", name)
		}
	}
	counts := map[string]int{}
	for _, ty := range c.Types {
		if prefix, _, ok := strings.Cut(ty.Name, "custom-"); ok {
			if ty.VCPU > 32 || ty.MemoryMiB%(ty.VCPU*1024) != 0 {
				t.Errorf("%s: %d vCPU, %d MiB is off the grid", ty.Name, ty.VCPU, ty.MemoryMiB)
			}
			counts[prefix]++
		}
	}
	// E2: 16 vCPU counts × 8 GiB/vCPU, less the 25 shapes above 128 GB;
	// N1: 1 and 2 vCPUs + 15 even counts, × 6; N2: 16 × 8; N2D: 5 × 8; N4: 16 × 7.
	want := map[string]int{"e2-": 103, "": 102, "n2-": 128, "n2d-": 40, "n4-": 112}
	if !reflect.DeepEqual(counts, want) {
		t.Errorf("custom types per family prefix: %v, want %v", counts, want)
	}
}

func TestPrices(t *testing.T) {
	c := mustLoad(t)
	r, ok := c.Region("us-central1")
	if !ok || len(c.Regions) != 1 {
		t.Fatalf("regions %d, want us-central1 only", len(c.Regions))
	}
	if len(r.Prices) != len(c.Types) {
		t.Errorf("us-central1 lists %d of %d types", len(r.Prices), len(c.Types))
	}
	composed := func(vcpu, gib, vcpuRate, gibRate, num, den float64) [2]float64 {
		od := vcpu*vcpuRate + gib*gibRate
		return [2]float64{od, od * num / den}
	}
	n4 := composed(2, 8, 0.030821, 0.004131, 0.007976, 0.030821)
	c3d := composed(4, 16, 0.02956, 0.003956, 0.011825, 0.02956)
	n1Custom := composed(4, 8, 0.033174, 0.004446, 0.00698, 0.033174)
	e2Custom := composed(2, 2, 0.022890, 0.003067, 0.006867, 0.022890)
	tests := []struct {
		typ            string
		onDemand, spot *float64
	}{
		{"n2-standard-2", ptr(0.0971), ptr(0.0235)},              // prices.csv
		{"e2-micro", ptr(0.00838), ptr(0.00251)},                 // prices.csv, the file's "should be" figures
		{"a2-highgpu-1g", ptr(3.673385), ptr(1.102016)},          // prices.csv, GPUs included
		{"f1-micro", ptr(0.0076), ptr(0.0035)},                   // prices.csv, no family rate
		{"n4-standard-2", ptr(n4[0]), ptr(n4[1])},                // composed from rates.csv
		{"c3d-standard-4", ptr(0.1816), ptr(c3d[1])},             // on-demand listed, spot composed
		{"custom-4-8192", ptr(n1Custom[0]), ptr(n1Custom[1])},    // custom_rates.csv
		{"e2-custom-2-2048", ptr(e2Custom[0]), ptr(e2Custom[1])}, // custom_rates.csv
		{"t2a-standard-1", nil, nil},                             // no price, rate or ratio
		{"n4-custom-2-4096", nil, nil},                           // no custom N4 rate
	}
	for _, tt := range tests {
		t.Run(tt.typ, func(t *testing.T) {
			p, ok := r.Prices[tt.typ]
			if !ok {
				t.Fatalf("%s is not listed in us-central1", tt.typ)
			}
			for _, f := range []struct {
				what      string
				got, want *float64
			}{{"on-demand", p.OnDemand, tt.onDemand}, {"spot", p.Spot, tt.spot}} {
				switch {
				case (f.got == nil) != (f.want == nil):
					t.Errorf("%s price %v, want %v", f.what, deref(f.got), deref(f.want))
				case f.got != nil && math.Abs(*f.got-*f.want) > 5e-7:
					t.Errorf("%s price %v, want %v", f.what, *f.got, *f.want)
				}
			}
		})
	}
}

func ptr(v float64) *float64 { return &v }

func deref(p *float64) any {
	if p == nil {
		return "unknown"
	}
	return *p
}

// TestPredefinedMatchSpecs checks every predefined type against
// source/specs.csv.
func TestPredefinedMatchSpecs(t *testing.T) {
	c := mustLoad(t)
	f, err := os.Open("source/specs.csv")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	specs, err := apicatalog.ReadSpecs(f, "specs.csv")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range specs {
		if got, ok := c.Type(want.Name); !ok || !reflect.DeepEqual(got, want) {
			t.Errorf("%s: catalog %+v (listed %v), specs.csv %+v", want.Name, got, ok, want)
		}
	}
}

func TestInstanceTypes(t *testing.T) {
	c := mustLoad(t)
	types, warnings := c.InstanceTypes("us-central1", []string{"us-central1-a", "us-central1-b"})
	if len(warnings) != 0 {
		t.Errorf("warnings for the priced region: %v", warnings)
	}
	if len(types) != len(c.Types) {
		t.Fatalf("%d types in us-central1, want all %d", len(types), len(c.Types))
	}
	unpriced := map[string]bool{"t2a": true, "n4-custom": true}
	for _, it := range types {
		family, _, _ := strings.Cut(it.Name, "-")
		if strings.HasPrefix(it.Name, "n4-custom-") {
			family = "n4-custom"
		}
		if len(it.Offerings) != 4 {
			t.Errorf("%s: %d offerings, want on-demand and spot in 2 zones", it.Name, len(it.Offerings))
		}
		for _, o := range it.Offerings {
			if o.PriceKnown == unpriced[family] {
				t.Errorf("%s %s in %s: PriceKnown %v", it.Name, o.CapacityType, o.Zone, o.PriceKnown)
			}
		}
		if it.Name == "n2-standard-2" {
			want := pluginapi.Offering{Zone: "us-central1-b", CapacityType: pluginapi.CapacitySpot, HourlyPrice: 0.0235, PriceKnown: true, Available: true}
			if it.Offerings[3] != want {
				t.Errorf("n2-standard-2 offering %+v, want %+v", it.Offerings[3], want)
			}
		}
	}
	_, warnings = c.InstanceTypes("europe-west1", nil)
	if len(warnings) != 1 || !strings.Contains(warnings[0], "(it has us-central1)") {
		t.Errorf("an unpriced region's warnings: %q", warnings)
	}
}
