package local

import (
	"runtime"
	"strconv"

	"github.com/kipcell/kip/pluginapi"
)

// defaultTypes is the built-in catalog. Sizes are what the agent's cgroup
// is limited to, not what the machine has: local cells share the host.
var defaultTypes = []InstanceTypeConfig{
	{Name: "local.nano", MilliCPU: 250, MemoryMiB: 256},
	{Name: "local.small", MilliCPU: 500, MemoryMiB: 512},
	{Name: "local.medium", MilliCPU: 1000, MemoryMiB: 1024},
	{Name: "local.large", MilliCPU: 2000, MemoryMiB: 2048},
	{Name: "local.xlarge", MilliCPU: 4000, MemoryMiB: 4096},
}

// Nominal price weights, in US dollars per hour. Local cells cost nothing,
// but the host's matcher ranks instance types by price, so every type gets
// a known price that grows with its size: the matcher then picks the
// smallest type that fits, as it would in a cloud. Override per type with
// instanceTypes[].price.
const (
	pricePerVCPU = 0.01
	pricePerGiB  = 0.005
)

// nominalPrice is the default price weight of a size.
func nominalPrice(milliCPU, memoryMiB int64) float64 {
	return pricePerVCPU*float64(milliCPU)/1000 + pricePerGiB*float64(memoryMiB)/1024
}

// Smallest limits a cgroup accepts sensibly: cpu.cfs_quota_us must be at
// least 1000 (1ms of a 100ms period, so 10 milli-CPU), and a cell agent
// does not start in less than 16 MiB.
const (
	minMilliCPU  = 10
	minMemoryMiB = 16
)

// buildCatalog validates the configured instance types (or takes the
// built-in ones) and turns them into the catalog: one available on-demand
// offering each, in the one zone, on this machine's architecture.
func buildCatalog(types []InstanceTypeConfig, zone string) ([]pluginapi.InstanceType, error) {
	if types == nil {
		types = defaultTypes
	}
	seen := map[string]bool{}
	catalog := make([]pluginapi.InstanceType, 0, len(types))
	for i, t := range types {
		key := func(field string) string { return "instanceTypes[" + strconv.Itoa(i) + "]." + field }
		switch {
		case t.Name == "":
			return nil, pluginapi.NewInvalidConfig(key("name"), "is required")
		case seen[t.Name]:
			return nil, pluginapi.NewInvalidConfig(key("name"), "%q appears twice", t.Name)
		case t.MilliCPU < minMilliCPU:
			return nil, pluginapi.NewInvalidConfig(key("milliCPU"), "must be at least %d", minMilliCPU)
		case t.MemoryMiB < minMemoryMiB:
			return nil, pluginapi.NewInvalidConfig(key("memoryMiB"), "must be at least %d", minMemoryMiB)
		case t.Price != nil && !validPrice(*t.Price):
			return nil, pluginapi.NewInvalidConfig(key("price"), "must be a finite number >= 0")
		}
		seen[t.Name] = true
		price := nominalPrice(t.MilliCPU, t.MemoryMiB)
		if t.Price != nil {
			price = *t.Price
		}
		catalog = append(catalog, pluginapi.InstanceType{
			Name:        t.Name,
			MilliCPU:    t.MilliCPU,
			MemoryBytes: t.MemoryMiB << 20,
			Arch:        pluginapi.Arch(runtime.GOARCH),
			Offerings: []pluginapi.Offering{{
				Zone:         zone,
				CapacityType: pluginapi.CapacityOnDemand,
				HourlyPrice:  price,
				PriceKnown:   true,
				Available:    true,
			}},
		})
	}
	if len(catalog) == 0 {
		return nil, pluginapi.NewInvalidConfig("instanceTypes", "is empty; omit it for the built-in catalog")
	}
	return catalog, nil
}

// findType returns the catalog's type named name.
func findType(catalog []pluginapi.InstanceType, name string) (pluginapi.InstanceType, bool) {
	for _, t := range catalog {
		if t.Name == name {
			return t, true
		}
	}
	return pluginapi.InstanceType{}, false
}
