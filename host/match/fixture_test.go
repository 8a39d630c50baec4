package match

import (
	"cmp"
	"errors"
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
		if seenCT[ct] || !naiveKnownCT(ct) {
			continue
		}
		seenCT[ct] = true
		var cs []Candidate
		for _, t := range naiveDedupe(types) {
			if !naiveFits(req, t, cfg) {
				continue
			}
			for _, o := range t.Offerings {
				if o.CapacityType != ct || !naiveOfferingFits(req, o, t, cfg, unavailable) {
					continue
				}
				known := naiveKnownPrice(o)
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

// naiveDedupe drops a type with the name of an earlier one, as NewCatalog
// does.
func naiveDedupe(types []pluginapi.InstanceType) []pluginapi.InstanceType {
	var out []pluginapi.InstanceType
	seen := map[string]bool{}
	for _, t := range types {
		if !seen[t.Name] {
			seen[t.Name] = true
			out = append(out, t)
		}
	}
	return out
}

func naiveKnownCT(ct pluginapi.CapacityType) bool {
	return ct == pluginapi.CapacitySpot || ct == pluginapi.CapacityOnDemand
}

func naiveKnownPrice(o pluginapi.Offering) bool {
	return o.PriceKnown && o.HourlyPrice >= 0 && !math.IsInf(o.HourlyPrice, 0) && !math.IsNaN(o.HourlyPrice)
}

func naiveInZone(req Requirements, o pluginapi.Offering) bool {
	return len(req.Zones) == 0 || slices.Contains(req.Zones, o.Zone)
}

// naiveTypeRules and naiveOfferingRules are the reference rules, written
// over the plugin's types, in explain's order.
var naiveTypeRules = []struct {
	rule rule
	ok   func(req Requirements, t pluginapi.InstanceType, cfg Config) bool
}{
	{ruleNames, func(req Requirements, t pluginapi.InstanceType, _ Config) bool {
		for _, p := range req.InstanceTypes {
			if ok, _ := path.Match(p.Pattern, t.Name); !ok {
				return false
			}
		}
		return true
	}},
	{ruleZones, func(req Requirements, t pluginapi.InstanceType, _ Config) bool {
		return len(req.Zones) == 0 || slices.ContainsFunc(t.Offerings, func(o pluginapi.Offering) bool {
			return naiveKnownCT(o.CapacityType) && naiveInZone(req, o)
		})
	}},
	{ruleArch, func(req Requirements, t pluginapi.InstanceType, _ Config) bool {
		return req.Arch == "" || t.Arch == req.Arch
	}},
	{ruleExtended, func(req Requirements, _ pluginapi.InstanceType, _ Config) bool { return len(req.Extended) == 0 }},
	{ruleGPUs, func(req Requirements, t pluginapi.InstanceType, _ Config) bool {
		return (req.GPUCount <= 0 && req.GPUKind == "") ||
			(int64(t.GPU.Count) >= max(req.GPUCount, 1) && (req.GPUKind == "" || normaliseGPUKind(t.GPU.Kind) == req.GPUKind))
	}},
	{ruleSize, func(req Requirements, t pluginapi.InstanceType, _ Config) bool {
		return t.MilliCPU >= req.MilliCPU && t.MemoryBytes >= req.MemoryBytes
	}},
	{ruleBaseline, func(req Requirements, t pluginapi.InstanceType, cfg Config) bool {
		return t.BurstableBaselineMilliCPU <= 0 || t.BurstableBaselineMilliCPU >= req.MilliCPU || cfg.burstable() == BurstableUnlimited
	}},
}

var naiveOfferingRules = []struct {
	rule rule
	ok   func(req Requirements, o pluginapi.Offering, t pluginapi.InstanceType, cfg Config, unavailable func(string, string, pluginapi.CapacityType) bool) bool
}{
	{ruleCapacityType, func(req Requirements, o pluginapi.Offering, _ pluginapi.InstanceType, _ Config, _ func(string, string, pluginapi.CapacityType) bool) bool {
		return naiveKnownCT(o.CapacityType) && slices.Contains(req.CapacityTypes, o.CapacityType) && naiveInZone(req, o)
	}},
	{ruleAvailable, func(_ Requirements, o pluginapi.Offering, _ pluginapi.InstanceType, _ Config, _ func(string, string, pluginapi.CapacityType) bool) bool {
		return o.Available
	}},
	{rulePrice, func(_ Requirements, o pluginapi.Offering, _ pluginapi.InstanceType, cfg Config, _ func(string, string, pluginapi.CapacityType) bool) bool {
		return naiveKnownPrice(o) || cfg.unknownPrice() != UnknownPriceExclude
	}},
	{ruleMarks, func(_ Requirements, o pluginapi.Offering, t pluginapi.InstanceType, _ Config, unavailable func(string, string, pluginapi.CapacityType) bool) bool {
		return unavailable == nil || !unavailable(t.Name, o.Zone, o.CapacityType)
	}},
}

func naiveFits(req Requirements, t pluginapi.InstanceType, cfg Config) bool {
	for _, r := range naiveTypeRules {
		if !r.ok(req, t, cfg) {
			return false
		}
	}
	return true
}

func naiveOfferingFits(req Requirements, o pluginapi.Offering, t pluginapi.InstanceType, cfg Config, unavailable func(string, string, pluginapi.CapacityType) bool) bool {
	for _, r := range naiveOfferingRules {
		if !r.ok(req, o, t, cfg, unavailable) {
			return false
		}
	}
	return true
}

// ruleOf is the rule an *UnsatisfiableError names; ruleNone for nil.
func ruleOf(err error) rule {
	var u *UnsatisfiableError
	if errors.As(err, &u) {
		return u.rule
	}
	return ruleNone
}

// naiveExplain is the reference explain: the first rule that leaves no
// type (the type rules) or no offering of the types left (the offering
// rules); ruleNone when an offering fits.
func naiveExplain(req Requirements, types []pluginapi.InstanceType, unavailable func(string, string, pluginapi.CapacityType) bool, cfg Config) rule {
	left := naiveDedupe(types)
	if len(left) == 0 {
		return ruleCatalog
	}
	for _, r := range naiveTypeRules {
		left = slices.DeleteFunc(left, func(t pluginapi.InstanceType) bool { return !r.ok(req, t, cfg) })
		if len(left) == 0 {
			return r.rule
		}
	}
	type offering struct {
		t pluginapi.InstanceType
		o pluginapi.Offering
	}
	var offers []offering
	for _, t := range left {
		for _, o := range t.Offerings {
			offers = append(offers, offering{t, o})
		}
	}
	for _, r := range naiveOfferingRules {
		offers = slices.DeleteFunc(offers, func(x offering) bool { return !r.ok(req, x.o, x.t, cfg, unavailable) })
		if len(offers) == 0 {
			return r.rule
		}
	}
	return ruleNone
}
