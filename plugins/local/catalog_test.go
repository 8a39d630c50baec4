package local

import (
	"net/netip"
	"runtime"
	"slices"
	"testing"

	"github.com/kipcell/kip/pluginapi"
)

func TestGetInfo(t *testing.T) {
	info, err := New(testLogger(t)).GetInfo(t.Context(), &pluginapi.GetInfoRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if err := pluginapi.ValidateInfo(info); err != nil {
		t.Error(err)
	}
	if info.Name != "local" || info.Version != Version || info.Catalog.Source != "built-in local catalog" || info.ConfigSchema == "" {
		t.Errorf("GetInfo = %+v", info)
	}
	// Local disks, attached as loop devices, and nothing else optional.
	if !slices.Equal(info.Capabilities, []pluginapi.Capability{pluginapi.CapabilityVolumes}) ||
		!slices.Equal(info.VolumeDrivers, []string{"local.csi.kipcell.io"}) {
		t.Errorf("GetInfo capabilities %q, volume drivers %q; want volumes with local.csi.kipcell.io", info.Capabilities, info.VolumeDrivers)
	}
}

func TestBuiltInCatalog(t *testing.T) {
	catalog, err := buildCatalog(nil, "here")
	if err != nil {
		t.Fatal(err)
	}
	if err := pluginapi.ValidateInstanceTypes(catalog); err != nil {
		t.Fatal(err)
	}
	want := map[string][2]int64{
		"local.nano":   {250, 256 << 20},
		"local.small":  {500, 512 << 20},
		"local.medium": {1000, 1 << 30},
		"local.large":  {2000, 2 << 30},
		"local.xlarge": {4000, 4 << 30},
	}
	if len(catalog) != len(want) {
		t.Fatalf("%d types, want %d", len(catalog), len(want))
	}
	prev := -1.0
	for _, typ := range catalog {
		if got := [2]int64{typ.MilliCPU, typ.MemoryBytes}; got != want[typ.Name] {
			t.Errorf("%s: CPU and memory %v, want %v", typ.Name, got, want[typ.Name])
		}
		if typ.Arch != pluginapi.Arch(runtime.GOARCH) {
			t.Errorf("%s: arch %s", typ.Name, typ.Arch)
		}
		if len(typ.Offerings) != 1 {
			t.Fatalf("%s: offerings %+v, want one", typ.Name, typ.Offerings)
		}
		o := typ.Offerings[0]
		if o.Zone != "here" || o.CapacityType != pluginapi.CapacityOnDemand || !o.Available || !o.PriceKnown {
			t.Errorf("%s: offering %+v", typ.Name, o)
		}
		// Larger types cost more, so the matcher prefers the smallest fit.
		if o.HourlyPrice <= prev {
			t.Errorf("%s: price %v is not above the smaller type's %v", typ.Name, o.HourlyPrice, prev)
		}
		prev = o.HourlyPrice
	}
}

func TestCatalogOverride(t *testing.T) {
	free := 0.0
	catalog, err := buildCatalog([]InstanceTypeConfig{
		{Name: "tiny", MilliCPU: 100, MemoryMiB: 64, Price: &free},
		{Name: "big", MilliCPU: 8000, MemoryMiB: 8192},
	}, "z")
	if err != nil {
		t.Fatal(err)
	}
	if err := pluginapi.ValidateInstanceTypes(catalog); err != nil {
		t.Fatal(err)
	}
	if got := catalog[0].Offerings[0].HourlyPrice; got != 0 {
		t.Errorf("configured price = %v, want 0", got)
	}
	if got, want := catalog[1].Offerings[0].HourlyPrice, nominalPrice(8000, 8192); got != want {
		t.Errorf("derived price = %v, want %v", got, want)
	}
}

func TestInstanceIDIsDeterministic(t *testing.T) {
	a := instanceID("cluster-a", "cell-1")
	if a != instanceID("cluster-a", "cell-1") {
		t.Error("same cluster and cell give different IDs")
	}
	if a == instanceID("cluster-b", "cell-1") || a == instanceID("cluster-a", "cell-2") {
		t.Error("different clusters or cells give the same ID")
	}
	if len(a) != len("local-")+12 {
		t.Errorf("ID %q is not local- and 12 hex digits", a)
	}
	if n := len(vethName(a)); n > 15 {
		t.Errorf("veth name %q has %d characters, more than an interface name may", vethName(a), n)
	}
}

func TestParseStat(t *testing.T) {
	// The command name may hold spaces and parentheses.
	stat := "4242 (a) b (c)) S 1 4242 4242 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 987654 1000 100 184467"
	state, start, err := parseStat(stat)
	if err != nil {
		t.Fatal(err)
	}
	if state != 'S' || start != 987654 {
		t.Errorf("parseStat = %c, %d; want S, 987654", state, start)
	}
	if _, _, err := parseStat("4242 (x) S 1"); err == nil {
		t.Error("short stat parsed")
	}
}

func TestFreeAddress(t *testing.T) {
	subnet := netip.MustParsePrefix("10.1.2.0/29") // .1 to .6 usable, .7 broadcast
	gw := gateway(subnet)
	addr := netip.MustParseAddr
	tests := []struct {
		name string
		used []string
		last netip.Addr
		want []string // successive allocations until the subnet is full
	}{
		{"none handed out yet: from the start, gateway and used skipped", []string{"10.1.2.2"}, netip.Addr{},
			[]string{"10.1.2.3", "10.1.2.4", "10.1.2.5", "10.1.2.6"}},
		{"after the last one, round to the start", []string{"10.1.2.5"}, addr("10.1.2.4"),
			[]string{"10.1.2.6", "10.1.2.2", "10.1.2.3", "10.1.2.4"}},
		{"a freed address is not handed out again at once", nil, addr("10.1.2.3"),
			[]string{"10.1.2.4", "10.1.2.5", "10.1.2.6", "10.1.2.2", "10.1.2.3"}},
		{"a last outside the subnet starts at the start", nil, addr("10.9.9.9"),
			[]string{"10.1.2.2", "10.1.2.3", "10.1.2.4", "10.1.2.5", "10.1.2.6"}},
		{"full", []string{"10.1.2.2", "10.1.2.3", "10.1.2.4", "10.1.2.5", "10.1.2.6"}, netip.Addr{}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			used := map[netip.Addr]bool{}
			for _, u := range tt.used {
				used[addr(u)] = true
			}
			var got []string
			last := tt.last
			for {
				a, ok := freeAddress(subnet, used, last, gw)
				if !ok {
					break
				}
				used[a], last = true, a
				got = append(got, a.String())
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("allocated %q, want %q", got, tt.want)
			}
		})
	}
}
