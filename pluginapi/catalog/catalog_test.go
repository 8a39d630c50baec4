package catalog

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/kipcell/kip/pluginapi"
)

func ptr(v float64) *float64 { return &v }

func sample() *Catalog {
	return &Catalog{
		Schema: Schema, Cloud: "test", GeneratedAt: time.Date(2026, 7, 6, 14, 20, 29, 0, time.UTC),
		Sources: []Source{{Name: "hand-written", Covers: "everything"}},
		Types: []Type{
			{Name: "a.large", VCPU: 2, MemoryMiB: 4096, Arch: "amd64"},
			{Name: "b.small", VCPU: 2, MemoryMiB: 2048, Arch: "arm64", BaselineMilliCPU: 400, NoSpot: true},
			{Name: "g.xlarge", VCPU: 4, MemoryMiB: 16384, Arch: "amd64", GPU: &GPU{Count: 1, Kind: "t4", MemoryMiB: 15360}},
		},
		Regions: []Region{{Name: "r1", Prices: map[string]Price{
			"a.large":  {OnDemand: ptr(0.1), Spot: ptr(0.03), SpotByZone: map[string]float64{"r1b": 0.025}},
			"b.small":  {OnDemand: ptr(0.02)},
			"g.xlarge": {},
		}}},
	}
}

func TestMarshalParseRoundTrip(t *testing.T) {
	c := sample()
	data, err := c.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	got, err := Parse(data)
	if err != nil {
		t.Fatalf("Parse(Marshal()): %v\n%s", err, data)
	}
	got.index, c.index = nil, nil
	if !reflect.DeepEqual(got, c) {
		t.Fatalf("round trip changed the catalog:\n got %+v\nwant %+v", got, c)
	}
	again, err := got.Marshal()
	if err != nil || string(again) != string(data) {
		t.Fatalf("Marshal is not deterministic (err %v):\n%s\n---\n%s", err, data, again)
	}
	if n := strings.Count(string(data), "\n"); n < 3+3+3 {
		t.Errorf("want one type and one price per line, got %d lines:\n%s", n, data)
	}
}

func TestParseRejects(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(c *Catalog)
		want   string
	}{
		{"schema", func(c *Catalog) { c.Schema = 2 }, "schema 2"},
		{"no sources", func(c *Catalog) { c.Sources = nil }, "no sources"},
		{"unsorted types", func(c *Catalog) { c.Types[0], c.Types[1] = c.Types[1], c.Types[0] }, "not sorted"},
		{"zero vcpu", func(c *Catalog) { c.Types[0].VCPU = 0 }, `type "a.large": vcpu and memoryMiB must be positive`},
		{"bad arch", func(c *Catalog) { c.Types[0].Arch = "x86_64" }, `arch "x86_64"`},
		{"baseline above size", func(c *Catalog) { c.Types[1].BaselineMilliCPU = 2001 }, "baselineMilliCPU 2001 outside 0..2000"},
		{"unknown priced type", func(c *Catalog) { c.Regions[0].Prices["z.huge"] = Price{} }, `prices type "z.huge"`},
		{"negative price", func(c *Catalog) { c.Regions[0].Prices["a.large"] = Price{OnDemand: ptr(-1)} }, "onDemand price -1"},
		{"zone-less spot price", func(c *Catalog) { c.Regions[0].Prices["a.large"] = Price{SpotByZone: map[string]float64{"": 1}} }, `in zone ""`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := sample()
			tt.mutate(c)
			err := c.Validate()
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Validate() = %v, want an error containing %q", err, tt.want)
			}
		})
	}
	if _, err := Parse([]byte(`{"schema":1,"cloud":"x","bogus":true}`)); err == nil || !strings.Contains(err.Error(), "bogus") {
		t.Errorf("an unknown field must be named, got %v", err)
	}
}

func TestInstanceTypes(t *testing.T) {
	c := sample()
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	types, warnings := c.InstanceTypes("r1", []string{"r1a", "r1b"})
	if len(warnings) != 0 {
		t.Errorf("warnings for a priced region: %v", warnings)
	}
	if len(types) != 3 {
		t.Fatalf("got %d types, want 3", len(types))
	}
	a := types[0]
	if a.Name != "a.large" || a.MilliCPU != 2000 || a.MemoryBytes != 4<<30 || a.Arch != pluginapi.ArchAMD64 {
		t.Errorf("a.large converted wrongly: %+v", a)
	}
	wantA := []pluginapi.Offering{
		{Zone: "r1a", CapacityType: pluginapi.CapacityOnDemand, HourlyPrice: 0.1, PriceKnown: true, Available: true},
		{Zone: "r1a", CapacityType: pluginapi.CapacitySpot, HourlyPrice: 0.03, PriceKnown: true, Available: true},
		{Zone: "r1b", CapacityType: pluginapi.CapacityOnDemand, HourlyPrice: 0.1, PriceKnown: true, Available: true},
		{Zone: "r1b", CapacityType: pluginapi.CapacitySpot, HourlyPrice: 0.025, PriceKnown: true, Available: true},
	}
	if !reflect.DeepEqual(a.Offerings, wantA) {
		t.Errorf("a.large offerings:\n got %+v\nwant %+v", a.Offerings, wantA)
	}
	b := types[1]
	if b.BurstableBaselineMilliCPU != 400 || len(b.Offerings) != 2 || b.Offerings[0].CapacityType != pluginapi.CapacityOnDemand {
		t.Errorf("b.small (NoSpot, burstable) converted wrongly: %+v", b)
	}
	g := types[2]
	if g.GPU != (pluginapi.GPU{Count: 1, Kind: "t4", MemoryBytes: 15360 << 20}) {
		t.Errorf("g.xlarge GPU = %+v", g.GPU)
	}
	for _, o := range g.Offerings {
		if o.PriceKnown {
			t.Errorf("g.xlarge has no price in the catalog but offering %+v is PriceKnown", o)
		}
	}

	types, warnings = c.InstanceTypes("elsewhere", nil)
	if len(types) != 3 || len(warnings) != 1 || !strings.Contains(warnings[0], `no prices for region "elsewhere" (it has r1)`) {
		t.Fatalf("unknown region: %d types, warnings %q", len(types), warnings)
	}
	for _, it := range types {
		for _, o := range it.Offerings {
			if o.PriceKnown || o.Zone != "" {
				t.Errorf("unknown region: %s offering %+v should be zone-less with an unknown price", it.Name, o)
			}
		}
	}
}

func TestInfo(t *testing.T) {
	c := sample()
	c.Sources = append(c.Sources, Source{Name: "karpenter", Ref: "v1.14.1", Covers: "prices"})
	info := c.Info()
	if info.Source != "test catalog: hand-written (everything); karpenter@v1.14.1 (prices)" {
		t.Errorf("Info().Source = %q", info.Source)
	}
	if !info.GeneratedAt.Equal(c.GeneratedAt) {
		t.Errorf("Info().GeneratedAt = %v", info.GeneratedAt)
	}
}
