package catalog

import (
	"bufio"
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
	if c.Cloud != "aws" || len(c.Types) == 0 || len(c.Sources) == 0 {
		t.Fatalf("catalog: cloud %q, %d types, %d sources", c.Cloud, len(c.Types), len(c.Sources))
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
		{"c5.large", 2, 4096, "amd64", 0, nil},
		{"m5.xlarge", 4, 16384, "amd64", 0, nil},
		{"t3.small", 2, 2048, "amd64", 400, nil},
		{"t2.xlarge", 4, 16384, "amd64", 900, nil},
		{"t4g.micro", 2, 1024, "arm64", 200, nil},
		{"c7g.large", 2, 4096, "arm64", 0, nil},   // Graviton3
		{"mac2.metal", 8, 16384, "arm64", 0, nil}, // Apple silicon: the source says amd64, AWS documents Apple M1
		{"g4dn.xlarge", 4, 16384, "amd64", 0, &apicatalog.GPU{Count: 1, Kind: "t4", MemoryMiB: 16384}},
		{"p4d.24xlarge", 96, 1179648, "amd64", 0, &apicatalog.GPU{Count: 8, Kind: "a100", MemoryMiB: 40960}},
		{"g4ad.xlarge", 4, 16384, "amd64", 0, &apicatalog.GPU{Count: 1, Kind: "radeon-pro-v520"}},
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

// TestTypesMatchSpecs checks every type against source/specs.csv, and that
// exactly the previous-generation families are left out.
func TestTypesMatchSpecs(t *testing.T) {
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
	prev := previousGeneration(t)
	kept := 0
	for _, want := range specs {
		family, _, _ := strings.Cut(want.Name, ".")
		got, ok := c.Type(want.Name)
		switch {
		case prev[family] && ok:
			t.Errorf("%s is previous generation (family %s) but in the catalog", want.Name, family)
		case !prev[family] && !ok:
			t.Errorf("%s is in specs.csv but not in the catalog", want.Name)
		case ok && !reflect.DeepEqual(got, want):
			t.Errorf("%s: catalog %+v, specs.csv %+v", want.Name, got, want)
		}
		if ok {
			kept++
		}
	}
	if kept != len(c.Types) {
		t.Errorf("catalog has %d types, specs.csv gives %d current-generation ones", len(c.Types), kept)
	}
	for _, name := range []string{"a1.large", "m4.large", "c4.large", "t1.micro", "g3s.xlarge", "p3.2xlarge", "p3dn.24xlarge", "r4.large", "i2.xlarge"} {
		if _, ok := c.Type(name); ok {
			t.Errorf("previous-generation %s is in the catalog", name)
		}
	}
}

func previousGeneration(t *testing.T) map[string]bool {
	t.Helper()
	f, err := os.Open("source/previous_generation.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	families := map[string]bool{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if line := strings.TrimSpace(sc.Text()); line != "" && !strings.HasPrefix(line, "#") {
			families[line] = true
		}
	}
	if err := sc.Err(); err != nil || !families["g3s"] {
		t.Fatalf("reading previous_generation.txt: %v, families %v", err, families)
	}
	return families
}

func TestPrices(t *testing.T) {
	c := mustLoad(t)
	tests := []struct {
		region, typ string
		onDemand    float64
	}{
		{"us-east-1", "c5.large", 0.085},
		{"us-east-1", "t3.small", 0.0208},
		{"us-east-1", "g4dn.xlarge", 0.526},
		{"us-east-1", "p4d.24xlarge", 21.957642},
		{"us-gov-west-1", "c5.large", 0.102},
	}
	for _, tt := range tests {
		t.Run(tt.region+"/"+tt.typ, func(t *testing.T) {
			r, ok := c.Region(tt.region)
			if !ok {
				t.Fatalf("no region %s", tt.region)
			}
			p, ok := r.Prices[tt.typ]
			if !ok || p.OnDemand == nil || *p.OnDemand != tt.onDemand {
				t.Fatalf("on-demand price = %v (listed %v), want %v", p.OnDemand, ok, tt.onDemand)
			}
			if p.Spot != nil {
				t.Errorf("spot price %v, but there is no spot source", *p.Spot)
			}
		})
	}
	var names []string
	for _, r := range c.Regions {
		names = append(names, r.Name)
	}
	if want := []string{"us-east-1", "us-gov-east-1", "us-gov-west-1"}; !reflect.DeepEqual(names, want) {
		t.Errorf("regions %v, want %v (cn-north-1's source prices are CNY)", names, want)
	}
}

func TestSourcesAndDate(t *testing.T) {
	c := mustLoad(t)
	var oldest time.Time
	prices := 0
	for _, s := range c.Sources {
		if s.Name == "" || s.Covers == "" || len(s.Covers) > 80 {
			t.Errorf("source %+v: want a name and a short covers", s)
		}
		if strings.Contains(s.Name, "karpenter-provider-aws") {
			prices++
			if s.Ref != "v1.14.1" || s.License != "Apache-2.0" || s.Date.IsZero() {
				t.Errorf("price source %+v: want ref v1.14.1, Apache-2.0 and a date", s)
			}
			if oldest.IsZero() || s.Date.Before(oldest) {
				oldest = s.Date
			}
		}
	}
	if prices != 2 {
		t.Errorf("%d karpenter price sources, want 2 (aws, us-gov)", prices)
	}
	if !c.GeneratedAt.Equal(oldest) || !c.GeneratedAt.Equal(time.Date(2026, 6, 15, 15, 14, 3, 0, time.UTC)) {
		t.Errorf("generatedAt %v, want the oldest price source's date %v", c.GeneratedAt, oldest)
	}
}

func TestInstanceTypes(t *testing.T) {
	c := mustLoad(t)
	types, warnings := c.InstanceTypes("us-east-1", []string{"us-east-1a", "us-east-1b"})
	if len(warnings) != 0 {
		t.Errorf("warnings for a priced region: %v", warnings)
	}
	r, _ := c.Region("us-east-1")
	if len(types) != len(r.Prices) || len(types) < 400 {
		t.Fatalf("%d types for us-east-1, want its %d priced ones", len(types), len(r.Prices))
	}
	var c5 *pluginapi.InstanceType
	for i := range types {
		it := &types[i]
		if it.Name == "c5.large" {
			c5 = it
		}
		for _, o := range it.Offerings {
			wantKnown := o.CapacityType == pluginapi.CapacityOnDemand
			if o.PriceKnown != wantKnown {
				t.Errorf("%s %s in %s: PriceKnown %v, want %v", it.Name, o.CapacityType, o.Zone, o.PriceKnown, wantKnown)
			}
		}
	}
	if c5 == nil {
		t.Fatal("c5.large is not offered in us-east-1")
	}
	want := []pluginapi.Offering{
		{Zone: "us-east-1a", CapacityType: pluginapi.CapacityOnDemand, HourlyPrice: 0.085, PriceKnown: true, Available: true},
		{Zone: "us-east-1a", CapacityType: pluginapi.CapacitySpot, Available: true},
		{Zone: "us-east-1b", CapacityType: pluginapi.CapacityOnDemand, HourlyPrice: 0.085, PriceKnown: true, Available: true},
		{Zone: "us-east-1b", CapacityType: pluginapi.CapacitySpot, Available: true},
	}
	if c5.MilliCPU != 2000 || c5.MemoryBytes != 4<<30 || !reflect.DeepEqual(c5.Offerings, want) {
		t.Errorf("c5.large: %+v", *c5)
	}

	types, warnings = c.InstanceTypes("cn-north-1", nil)
	if len(types) != len(c.Types) || len(warnings) != 1 || !strings.Contains(warnings[0], `no prices for region "cn-north-1"`) {
		t.Errorf("cn-north-1: %d types, warnings %q", len(types), warnings)
	}
}
