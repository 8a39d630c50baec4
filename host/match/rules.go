package match

// The rules an offering must meet to be ranked, one named predicate each
// over the ranker's resolved requirements. The ranker (fits, rank,
// scanType, consider) and explain are built from these predicates and
// nothing else: a rule changed here changes both.

// rule names one of the rules, in the order explain applies them: the
// type rules narrow the catalog's types, the offering rules the fitting
// types' offerings.
type rule uint8

const (
	ruleNone         rule = iota // not a catalog rule: PodRequirements refused the pod
	ruleCatalog                  // the catalog has instance types
	ruleNames                    // the type matches every name pattern (matchesName)
	ruleZones                    // the type has an offering in an acceptable zone (inZone)
	ruleArch                     // the type has the architecture (hasArch)
	ruleExtended                 // the pod asks for no extended resource (asksExtended)
	ruleGPUs                     // the type has enough GPUs of the kind (hasGPUs)
	ruleSize                     // the type has the vCPU and memory (largeEnough)
	ruleBaseline                 // a burstable type's baseline covers the CPU (baselineCovers)
	ruleCapacityType             // the offering's capacity type and zone are acceptable (wantsCT, inZone)
	ruleAvailable                // the catalog marks the offering available (offer.avail)
	rulePrice                    // the offering's price is known or unknown prices are ranked (priceAllowed)
	ruleMarks                    // the unavailable function does not mark the offering (marked)
)

func (r rule) String() string {
	return [...]string{"none", "catalog", "names", "zones", "arch", "extended", "gpus", "size", "baseline",
		"capacity type", "available", "price", "marks"}[r]
}

// resolvedName is one of the request's name patterns resolved against the
// catalog: the bitset of the types a glob matches, or the index of the
// type a name names (-1 when the catalog has none of that name).
type resolvedName struct {
	glob  []uint64 // nil for a name
	typ   int32
	exact bool
}

// matchesName reports whether type i matches the request's name pattern j.
func (r *ranker) matchesName(j int, i int32) bool {
	n := &r.s.names[j]
	if n.exact {
		return i == n.typ
	}
	return bit(n.glob, i)
}

// matchesNames reports whether type i matches every name pattern.
func (r *ranker) matchesNames(i int32) bool {
	for j := range r.s.names {
		if !r.matchesName(j, i) {
			return false
		}
	}
	return true
}

// anyMatches reports whether any type matches the request's name pattern j.
func (r *ranker) anyMatches(j int) bool {
	n := &r.s.names[j]
	if n.exact {
		return n.typ >= 0
	}
	for _, w := range n.glob {
		if w != 0 {
			return true
		}
	}
	return false
}

// hasArch reports whether a type of the interned architecture arch has
// the one asked for.
func (r *ranker) hasArch(arch int32) bool { return r.arch == anyIndex || arch == r.arch }

// asksExtended reports whether the pod asks for an extended resource; no
// catalog offers any (Config.IgnoredResources lists those cells provide).
func (r *ranker) asksExtended() bool { return len(r.req.Extended) > 0 }

// hasGPUs reports whether type h has the GPUs asked for.
func (r *ranker) hasGPUs(h *hotType) bool {
	return r.gpus == 0 || (h.gpuCount >= r.gpus && (r.kind == anyIndex || h.kind == r.kind))
}

// largeEnough reports whether a type of milliCPU and mem has the vCPU and
// memory asked for.
func (r *ranker) largeEnough(milliCPU, mem int64) bool { return milliCPU >= r.cpu && mem >= r.mem }

// burstable reports whether the type has a CPU baseline below its vCPUs.
func (h *hotType) burstable() bool { return h.baseline > 0 }

// needsCredits reports whether burstable type h's baseline is below the
// pod's CPU, so that the pod would spend CPU credits.
func (r *ranker) needsCredits(h *hotType) bool { return h.burstable() && h.baseline < r.cpu }

// baselineCovers reports whether type h may run the pod under the
// burstable policy: any type under BurstableUnlimited, else one whose
// baseline covers the pod's CPU.
func (r *ranker) baselineCovers(h *hotType) bool { return r.unlimited || !r.needsCredits(h) }

// wantsCT reports whether the pod accepts capacity type cti.
func (r *ranker) wantsCT(cti uint8) bool {
	for _, c := range r.cts[:r.ncts] {
		if c == cti {
			return true
		}
	}
	return false
}

// inZone reports whether offering o is in an acceptable zone.
func (r *ranker) inZone(o *offer) bool { return r.anyZone || bit(r.s.zones, o.zone) }

// priceAllowed reports whether offering o may be ranked for its price: a
// known one, or an unknown one under UnknownPriceLast.
func (r *ranker) priceAllowed(o *offer) bool { return o.known() || !r.exclude }

// marked reports whether the unavailable function marks offering o.
func (r *ranker) marked(o *offer) bool {
	return r.unavailable != nil && r.unavailable(r.c.types[o.typ].name, r.c.zones[o.zone], ctNames[o.ct])
}
