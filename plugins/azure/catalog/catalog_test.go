package catalog

import (
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

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
	if c.Cloud != "azure" || len(c.Types) != 132 || len(c.Sources) == 0 {
		t.Fatalf("catalog: cloud %q, %d types, %d sources", c.Cloud, len(c.Types), len(c.Sources))
	}
	if want := time.Date(2026, 11, 21, 0, 0, 0, 0, time.UTC); !c.GeneratedAt.Equal(want) {
		t.Errorf("generatedAt %v, want the transcription date %v", c.GeneratedAt, want)
	}
	for _, s := range c.Sources {
		if s.Name == "" || s.Covers == "" || len(s.Covers) > 80 {
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
		baseline int64
		gpu      *apicatalog.GPU
	}{
		{"Standard_D2s_v3", 2, 8192, 0, nil},
		{"Standard_F72s_v2", 72, 147456, 0, nil},
		{"Standard_E64_v3", 64, 442368, 0, nil},
		{"Standard_B2s", 2, 4096, 400, nil},
		{"Standard_B20ms", 20, 81920, 3370, nil},
		{"Standard_NC6s_v3", 6, 114688, 0, &apicatalog.GPU{Count: 1, Kind: "v100", MemoryMiB: 16384}},
		{"Standard_NV48s_v3", 48, 458752, 0, &apicatalog.GPU{Count: 4, Kind: "m60", MemoryMiB: 8192}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := c.Type(tt.name)
			if !ok {
				t.Fatalf("%s is missing", tt.name)
			}
			want := apicatalog.Type{Name: tt.name, VCPU: tt.vcpu, MemoryMiB: tt.mib, Arch: "amd64", BaselineMilliCPU: tt.baseline, GPU: tt.gpu}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("got %+v (gpu %+v), want %+v (gpu %+v)", got, got.GPU, want, want.GPU)
			}
		})
	}
	for _, name := range []string{"Standard_B1ls", "Standard_E16-4s_v3", "Standard_E64i_v3"} {
		if _, ok := c.Type(name); ok {
			t.Errorf("%s, left out of specs.csv, is in the catalog", name)
		}
	}
}

// TestTypesMatchSpecs checks every type against source/specs.csv.
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
	if !reflect.DeepEqual(c.Types, specs) {
		t.Errorf("the catalog's %d types differ from specs.csv's %d", len(c.Types), len(specs))
	}
}

func TestEveryPriceUnknown(t *testing.T) {
	c := mustLoad(t)
	if len(c.Regions) != 0 {
		t.Fatalf("%d regions, but there is no price source", len(c.Regions))
	}
	types, warnings := c.InstanceTypes("eastus", []string{"1", "2", "3"})
	if len(types) != len(c.Types) {
		t.Errorf("%d types for eastus, want all %d", len(types), len(c.Types))
	}
	if len(warnings) != 1 || !strings.Contains(warnings[0], `no prices for region "eastus" (it has none)`) {
		t.Errorf("warnings %q", warnings)
	}
	for _, it := range types {
		if len(it.Offerings) != 6 {
			t.Errorf("%s: %d offerings, want on-demand and spot in 3 zones", it.Name, len(it.Offerings))
		}
		for _, o := range it.Offerings {
			if o.PriceKnown || o.HourlyPrice != 0 || !o.Available {
				t.Errorf("%s offering %+v: want an available offering with an unknown price", it.Name, o)
			}
		}
	}
}
