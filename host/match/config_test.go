package match

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kipcell/kip/host/setting"
	"github.com/kipcell/kip/pluginapi"
)

func TestDefaultConfig(t *testing.T) {
	want := Config{
		AgentReserveMilliCPU: 100, AgentReserveMemoryBytes: 256 << 20,
		BurstablePolicy: BurstableBaseline, SurplusCreditPricePerVCPUHour: 0.05, UnknownPrice: UnknownPriceLast,
		DefaultCapacityType: pluginapi.CapacityOnDemand, MaxCandidates: 20,
	}
	if diff := cmp.Diff(want, DefaultConfig()); diff != "" {
		t.Errorf("DefaultConfig (-want +got):\n%s", diff)
	}
	// Every default spelled out is the one the zero Config takes.
	d, zero := DefaultConfig(), Config{}
	if d.burstable() != zero.burstable() || d.surplusPrice() != zero.surplusPrice() || d.unknownPrice() != zero.unknownPrice() ||
		d.defaultCapacityType() != zero.defaultCapacityType() || d.maxCandidates() != zero.maxCandidates() {
		t.Errorf("DefaultConfig %+v differs from the zero Config's defaults", d)
	}
}

func TestConfigValidateNamesTheKey(t *testing.T) {
	tests := []struct {
		name    string
		cfg     Config
		wantKey []string
	}{
		{name: "defaults", cfg: DefaultConfig()},
		{name: "zero", cfg: Config{}},
		{name: "unlimited, exclude, spot", cfg: Config{BurstablePolicy: BurstableUnlimited, UnknownPrice: UnknownPriceExclude, DefaultCapacityType: pluginapi.CapacitySpot}},
		{name: "negative CPU reserve", cfg: Config{AgentReserveMilliCPU: -1}, wantKey: []string{"agentReserveCPU"}},
		{name: "negative memory reserve", cfg: Config{AgentReserveMemoryBytes: -1}, wantKey: []string{"agentReserveMemory"}},
		{name: "policy", cfg: Config{BurstablePolicy: "sometimes"}, wantKey: []string{"burstablePolicy"}},
		{name: "surplus price", cfg: Config{SurplusCreditPricePerVCPUHour: -0.1}, wantKey: []string{"surplusCreditPricePerVCPUHour"}},
		{name: "unknown price", cfg: Config{UnknownPrice: "guess"}, wantKey: []string{"unknownPrice"}},
		{name: "capacity type", cfg: Config{DefaultCapacityType: "reserved"}, wantKey: []string{"defaultCapacityType"}},
		{name: "every bad field", cfg: Config{BurstablePolicy: "x", UnknownPrice: "y"}, wantKey: []string{"burstablePolicy", "unknownPrice"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.wantKey, setting.Keys(tt.cfg.Validate())); diff != "" {
				t.Errorf("Validate keys (-want +got):\n%s", diff)
			}
		})
	}
}

func TestQuantityText(t *testing.T) {
	cpu := []struct {
		in   string
		want MilliCPU
		ok   bool
	}{
		{"100m", 100, true}, {"0.5", 500, true}, {"2", 2000, true}, {"0", 0, true},
		{"lots", 0, false}, {"-1", 0, false}, {"1e44444422", 0, false}, {"", 0, false},
	}
	for _, tt := range cpu {
		var got MilliCPU
		err := got.UnmarshalText([]byte(tt.in))
		if (err == nil) != tt.ok || got != tt.want {
			t.Errorf("MilliCPU.UnmarshalText(%q) = %d, %v; want %d, ok %v", tt.in, got, err, tt.want, tt.ok)
		}
	}
	mem := []struct {
		in   string
		want Bytes
		ok   bool
	}{
		{"256Mi", 256 << 20, true}, {"1G", 1e9, true}, {"1Gi", 1 << 30, true},
		{"lots", 0, false}, {"-1Mi", 0, false}, {"1e44444422", 0, false},
	}
	for _, tt := range mem {
		var got Bytes
		err := got.UnmarshalText([]byte(tt.in))
		if (err == nil) != tt.ok || got != tt.want {
			t.Errorf("Bytes.UnmarshalText(%q) = %d, %v; want %d, ok %v", tt.in, got, err, tt.want, tt.ok)
		}
	}
	// Written as text, a quantity reads back as itself.
	for _, v := range []MilliCPU{0, 100, 1500, 64000} {
		text, _ := v.MarshalText()
		var back MilliCPU
		if err := back.UnmarshalText(text); err != nil || back != v {
			t.Errorf("MilliCPU %d → %q → %d, %v", v, text, back, err)
		}
	}
	for _, v := range []Bytes{0, 256 << 20, 1 << 30, 1e9} {
		text, _ := v.MarshalText()
		var back Bytes
		if err := back.UnmarshalText(text); err != nil || back != v {
			t.Errorf("Bytes %d → %q → %d, %v", v, text, back, err)
		}
	}
}

func TestWithNodeArch(t *testing.T) {
	for _, tt := range []struct {
		in, node, want pluginapi.Arch
	}{
		{"", "arm64", "arm64"},
		{ArchAny, "arm64", ""},
		{"amd64", "arm64", "amd64"},
	} {
		if got := (Config{DefaultArch: tt.in}).WithNodeArch(tt.node).DefaultArch; got != tt.want {
			t.Errorf("DefaultArch %q on a %s node = %q, want %q", tt.in, tt.node, got, tt.want)
		}
	}
}
