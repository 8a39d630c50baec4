package match

import (
	"cmp"
	"math"
	"path"
	"slices"

	"github.com/kipcell/kip/pluginapi"
)

// TEST DATA. fixtureCatalog is a hand-written catalog of a few AWS-like
// types in two zones. The sizes are real EC2 sizes; the prices are
// realistic but invented for the tests and are not a price list.
const (
	gib = int64(1) << 30
	mib = int64(1) << 20
	zA  = "us-east-1a"
	zB  = "us-east-1b"
)

func od(zone string, price float64) pluginapi.Offering {
	return pluginapi.Offering{Zone: zone, CapacityType: pluginapi.CapacityOnDemand, HourlyPrice: price, PriceKnown: true, Available: true}
}

func spot(zone string, price float64) pluginapi.Offering {
	return pluginapi.Offering{Zone: zone, CapacityType: pluginapi.CapacitySpot, HourlyPrice: price, PriceKnown: true, Available: true}
}

func unpriced(zone string, ct pluginapi.CapacityType) pluginapi.Offering {
	return pluginapi.Offering{Zone: zone, CapacityType: ct, Available: true}
}

func both(f func(string, float64) pluginapi.Offering, price float64) []pluginapi.Offering {
	return []pluginapi.Offering{f(zA, price), f(zB, price)}
}

func it(name string, vcpu int64, mem int64, arch pluginapi.Arch, offers ...[]pluginapi.Offering) pluginapi.InstanceType {
	return pluginapi.InstanceType{Name: name, MilliCPU: vcpu * 1000, MemoryBytes: mem, Arch: arch, Offerings: slices.Concat(offers...)}
}

func burst(t pluginapi.InstanceType, baselineMilli int64) pluginapi.InstanceType {
	t.BurstableBaselineMilliCPU = baselineMilli
	return t
}

func gpu(t pluginapi.InstanceType, n int32, kind string, mem int64) pluginapi.InstanceType {
	t.GPU = pluginapi.GPU{Count: n, Kind: kind, MemoryBytes: mem}
	return t
}

const amd, arm = pluginapi.ArchAMD64, pluginapi.ArchARM64

func fixtureCatalog() []pluginapi.InstanceType {
	return []pluginapi.InstanceType{
		burst(it("t3.micro", 2, 1*gib, amd, both(od, 0.0104), both(spot, 0.0031)), 200),
		burst(it("t3.medium", 2, 4*gib, amd, both(od, 0.0416), both(spot, 0.0125)), 400),
		burst(it("t4g.medium", 2, 4*gib, arm, both(od, 0.0336)), 400),
		it("c5.large", 2, 4*gib, amd, both(od, 0.085), both(spot, 0.032)),
		it("m5.large", 2, 8*gib, amd, both(od, 0.096), []pluginapi.Offering{spot(zA, 0.030), spot(zB, 0.036)}),
		// m5a.large and m6a.large cost the same: the name decides.
		it("m6a.large", 2, 8*gib, amd, both(od, 0.0864)),
		it("m5a.large", 2, 8*gib, amd, both(od, 0.0864)),
		it("c5.xlarge", 4, 8*gib, amd, both(od, 0.17), both(spot, 0.065)),
		// m5.xlarge's spot price in us-east-1b has no source.
		it("m5.xlarge", 4, 16*gib, amd, both(od, 0.192), []pluginapi.Offering{spot(zA, 0.07), unpriced(zB, pluginapi.CapacitySpot)}),
		it("c6g.xlarge", 4, 8*gib, arm, both(od, 0.136)),
		it("m6g.xlarge", 4, 16*gib, arm, both(od, 0.154), both(spot, 0.06)),
		gpu(it("g4dn.xlarge", 4, 16*gib, amd, both(od, 0.526), both(spot, 0.2)), 1, "t4", 16*gib),
		gpu(it("g4dn.12xlarge", 48, 192*gib, amd, both(od, 3.912)), 4, "t4", 16*gib),
		gpu(it("p3.2xlarge", 8, 61*gib, amd, both(od, 3.06)), 1, "v100", 16*gib),
		// p4d.24xlarge: 8 A100s, only in us-east-1b, on-demand only.
		gpu(it("p4d.24xlarge", 96, 1152*gib, amd, []pluginapi.Offering{od(zB, 32.7726)}), 8, "a100", 40*gib),
		it("m5.24xlarge", 96, 384*gib, amd, both(od, 4.608)),
	}
}

// naiveRank is the reference Rank: filter everything, sort everything.
func naiveRank(req Requirements, types []pluginapi.InstanceType, unavailable func(string, string, pluginapi.CapacityType) bool, cfg Config) []Candidate {
	var out []Candidate
	seenCT := map[pluginapi.CapacityType]bool{}
	for _, ct := range req.CapacityTypes {
		if seenCT[ct] || (ct != pluginapi.CapacitySpot && ct != pluginapi.CapacityOnDemand) {
			continue
		}
		seenCT[ct] = true
		var cs []Candidate
		seen := map[string]bool{}
		for _, t := range types {
			if seen[t.Name] {
				continue
			}
			seen[t.Name] = true
			if !naiveFits(req, t, cfg) {
				continue
			}
			for _, o := range t.Offerings {
				if o.CapacityType != ct || !o.Available || (len(req.Zones) > 0 && !slices.Contains(req.Zones, o.Zone)) {
					continue
				}
				known := o.PriceKnown && o.HourlyPrice >= 0 && !math.IsInf(o.HourlyPrice, 0) && !math.IsNaN(o.HourlyPrice)
				if !known && cfg.unknownPrice() == UnknownPriceExclude {
					continue
				}
				if unavailable != nil && unavailable(t.Name, o.Zone, ct) {
					continue
				}
				c := Candidate{InstanceType: t.Name, Zone: o.Zone, CapacityType: ct, PriceKnown: known, MilliCPU: t.MilliCPU, MemoryBytes: t.MemoryBytes}
				if known {
					c.HourlyPrice = o.HourlyPrice
				}
				if t.BurstableBaselineMilliCPU > 0 && req.MilliCPU > t.BurstableBaselineMilliCPU {
					c.UnlimitedCredits = true
					if known {
						c.SurplusCreditPrice = float64(req.MilliCPU-t.BurstableBaselineMilliCPU) / 1000 * cfg.surplusPrice()
						c.HourlyPrice += c.SurplusCreditPrice
					}
				}
				cs = append(cs, c)
			}
		}
		slices.SortStableFunc(cs, func(a, b Candidate) int {
			if a.PriceKnown != b.PriceKnown {
				if a.PriceKnown {
					return -1
				}
				return 1
			}
			return cmp.Or(cmp.Compare(a.HourlyPrice, b.HourlyPrice), cmp.Compare(a.MilliCPU, b.MilliCPU),
				cmp.Compare(a.MemoryBytes, b.MemoryBytes), cmp.Compare(a.InstanceType, b.InstanceType), cmp.Compare(a.Zone, b.Zone))
		})
		if k := cfg.maxCandidates(); len(cs) > k {
			cs = cs[:k]
		}
		out = append(out, cs...)
	}
	return out
}

func naiveFits(req Requirements, t pluginapi.InstanceType, cfg Config) bool {
	for _, p := range req.InstanceTypes {
		if ok, _ := path.Match(p.Pattern, t.Name); !ok {
			return false
		}
	}
	if len(req.Extended) > 0 || t.MilliCPU < req.MilliCPU || t.MemoryBytes < req.MemoryBytes {
		return false
	}
	if req.Arch != "" && t.Arch != req.Arch {
		return false
	}
	if (req.GPUCount > 0 || req.GPUKind != "") &&
		(int64(t.GPU.Count) < max(req.GPUCount, 1) || (req.GPUKind != "" && normaliseGPUKind(t.GPU.Kind) != req.GPUKind)) {
		return false
	}
	if t.BurstableBaselineMilliCPU > 0 && t.BurstableBaselineMilliCPU < req.MilliCPU && cfg.burstable() != BurstableUnlimited {
		return false
	}
	return true
}
