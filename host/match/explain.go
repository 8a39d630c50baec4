package match

import (
	"fmt"
	"path"
	"slices"
	"strconv"
	"strings"

	"github.com/kipcell/kip/pluginapi"
)

// explain says why no offering fits req. It runs only when Rank finds
// nothing, so it favours clear messages over speed: it narrows the types
// constraint by constraint (names, zone, architecture, extended resources,
// GPUs, size, burstable baseline, capacity type, availability, price) and
// reports the first constraint that leaves nothing.
func (c *Catalog) explain(req *Requirements, unavailable func(typ, zone string, ct pluginapi.CapacityType) bool, cfg Config) error {
	set := make([]int32, len(c.types))
	for i := range set {
		set[i] = int32(i)
	}
	if len(set) == 0 {
		return unsatisfiable("the cloud plugin's catalog has no instance types")
	}
	// filter narrows set in place (it writes no further than it reads) to
	// the types keep accepts by index (c.types for names and the like,
	// the compact c.hot for sizes); when it keeps nothing, set is left as
	// it was, for the message.
	filter := func(keep func(i int32) bool) []int32 {
		out := set[:0]
		for _, i := range set {
			if keep(i) {
				out = append(out, i)
			}
		}
		return out
	}

	// Names.
	var named string // set when an exact name leaves one type
	var globs []string
	for i, p := range req.InstanceTypes {
		if !p.IsGlob() {
			if _, ok := c.byName[p.Pattern]; !ok {
				return unsatisfiable(fmt.Sprintf("unknown instance type %s (%s)", p.Pattern, p.Source))
			}
			named = p.Pattern
		} else {
			globs = append(globs, p.Pattern)
		}
		next := filter(func(i int32) bool {
			t := &c.types[i]
			ok, _ := path.Match(p.Pattern, t.name)
			return ok
		})
		if len(next) == 0 {
			if i == 0 || !c.anyMatch(p.Pattern) {
				return unsatisfiable(fmt.Sprintf("no instance type matches %s (%s)", p.Pattern, p.Source))
			}
			q := req.InstanceTypes[0]
			return unsatisfiable(fmt.Sprintf("no instance type matches both %s (%s) and %s (%s)", q.Pattern, q.Source, p.Pattern, p.Source))
		}
		set = next
	}
	subject := func() string { // "instance type m5.large" or "no instance type matching c5.* in us-east-1a"
		if named != "" {
			return "instance type " + named
		}
		s := "no instance type"
		if len(globs) > 0 {
			s += " matching " + strings.Join(globs, " and ")
		}
		if len(req.Zones) > 0 {
			s += " in " + strings.Join(req.Zones, " or ")
		}
		return s
	}
	verb := func(no, yes string) string { // "no instance type … offers", "instance type x does not offer"
		if named != "" {
			return subject() + " " + yes
		}
		return subject() + " " + no
	}

	// Zones.
	if len(req.Zones) > 0 {
		set = filter(func(i int32) bool {
			t := &c.types[i]

			for _, o := range c.offers[t.lo:t.hi] {
				if c.inZones(o, req.Zones) {
					return true
				}
			}
			return false
		})
		if len(set) == 0 {
			if named != "" {
				return unsatisfiable(fmt.Sprintf("instance type %s is not offered in %s (%s)", named, strings.Join(req.Zones, " or "), req.ZoneSource))
			}
			s := "no instance type"
			if len(globs) > 0 {
				s += " matching " + strings.Join(globs, " and ")
			}
			return unsatisfiable(fmt.Sprintf("%s is offered in %s (%s)", s, strings.Join(req.Zones, " or "), req.ZoneSource))
		}
	}

	// Architecture.
	if req.Arch != "" {
		arch := int32(slices.Index(c.archs, req.Arch)) // interned: compare indexes, not strings
		set = filter(func(i int32) bool {
			h := &c.hot[i]
			return h.arch == arch
		})
		if len(set) == 0 {
			return unsatisfiable(verb("has arch ", "is not ") + fmt.Sprintf("%s (%s)", req.Arch, req.ArchSource))
		}
	}

	// Extended resources: no catalog entry offers any.
	if names := sortedKeys(req.Extended); len(names) > 0 {
		return unsatisfiable(fmt.Sprintf("no instance type offers the extended resource %s (list it in ignoredResources if cells provide it)", names[0]))
	}

	// GPUs.
	if req.GPUCount > 0 || req.GPUKind != "" {
		want := gpuPhrase(max(req.GPUCount, 1), req.GPUKind)
		set = filter(func(i int32) bool {
			t := &c.types[i]

			return t.gpuCount >= max(req.GPUCount, 1) && (req.GPUKind == "" || t.gpuKind == req.GPUKind)
		})
		if len(set) == 0 {
			if named != "" {
				t := &c.types[c.byName[named]]
				have := "no GPU"
				if t.gpuCount > 0 {
					have = gpuPhrase(t.gpuCount, t.gpuKind)
				}
				return unsatisfiable(fmt.Sprintf("instance type %s has %s; the pod needs %s", named, have, want))
			}
			return unsatisfiable(verb("offers ", "") + want)
		}
	}

	// Size.
	next := filter(func(i int32) bool {
		h := &c.hot[i]
		return h.milliCPU >= req.MilliCPU && h.mem >= req.MemoryBytes
	})
	if len(next) == 0 {
		if named != "" {
			t := &c.types[c.byName[named]]
			return unsatisfiable(fmt.Sprintf("instance type %s (%s) is too small for the pod (%s)", named, size(t.milliCPU, t.mem), podSize(req)))
		}
		// set is in catalog order (vCPU, memory, name): its last type has
		// the most CPU; name the one with the most memory too.
		big, roomy := &c.types[set[len(set)-1]], &c.types[set[0]]
		for _, i := range set {
			if t := &c.types[i]; t.mem > roomy.mem {
				roomy = t
			}
		}
		largest := fmt.Sprintf("the largest is %s (%s)", big.name, size(big.milliCPU, big.mem))
		if roomy != big {
			largest += fmt.Sprintf(", the roomiest %s (%s)", roomy.name, size(roomy.milliCPU, roomy.mem))
		}
		return unsatisfiable(fmt.Sprintf("%s is large enough for the pod (%s); %s", subject(), podSize(req), largest))
	}
	set = next

	// Burstable baseline.
	if cfg.burstable() != BurstableUnlimited {
		next := filter(func(i int32) bool {
			t := &c.types[i]
			return t.baseline == 0 || t.baseline >= req.MilliCPU
		})
		if len(next) == 0 {
			if named != "" {
				t := &c.types[c.byName[named]]
				return unsatisfiable(fmt.Sprintf("instance type %s is burstable and its baseline (%s vCPU) is below the pod's %s vCPU; the burstable policy is %q",
					named, vcpu(t.baseline), vcpu(req.MilliCPU), BurstableBaseline))
			}
			return unsatisfiable(fmt.Sprintf("every instance type large enough for the pod (%s) is burstable with a baseline below its CPU; the burstable policy is %q", podSize(req), BurstableBaseline))
		}
		set = next
	}

	// Offerings: capacity type, then availability, then price.
	cts := make([]string, 0, len(req.CapacityTypes))
	for _, ct := range req.CapacityTypes {
		cts = append(cts, string(ct))
	}
	var offered, available, unmarked, priced int
	var example string
	for _, i := range set {
		t := &c.types[i]
		for _, o := range c.offers[t.lo:t.hi] {
			if !c.inZones(o, req.Zones) || !containsCT(req.CapacityTypes, ctNames[o.ct]) {
				continue
			}
			offered++
			if !o.avail {
				if example == "" {
					example = fmt.Sprintf("%s %s in %s", t.name, ctNames[o.ct], c.zones[o.zone])
				}
				continue
			}
			available++
			if unavailable != nil && unavailable(t.name, c.zones[o.zone], ctNames[o.ct]) {
				continue
			}
			unmarked++
			if o.known() || cfg.unknownPrice() != UnknownPriceExclude {
				priced++
			}
		}
	}
	what := "every offering that fits the pod"
	switch {
	case offered == 0:
		return unsatisfiable(verb("that fits the pod is offered as ", "is not offered as ") + fmt.Sprintf("%s (%s)", strings.Join(cts, " or "), req.CapacityTypeSource))
	case available == 0:
		return unsatisfiable(fmt.Sprintf("%s is unavailable in the cloud now (%d offerings, such as %s)", what, offered, example))
	case unmarked == 0:
		return unsatisfiable(fmt.Sprintf("%s is marked unavailable after a recent launch failed for lack of capacity (%d offerings); kip retries when the marks expire", what, available))
	case priced == 0:
		return unsatisfiable(fmt.Sprintf("%s has an unknown price and the unknown-price rule is %q", what, UnknownPriceExclude))
	}
	return unsatisfiable("no offering fits the pod")
}

func (c *Catalog) anyMatch(pattern string) bool {
	for i := range c.types {
		if ok, _ := path.Match(pattern, c.types[i].name); ok {
			return true
		}
	}
	return false
}

func (c *Catalog) inZones(o offer, zones []string) bool {
	if len(zones) == 0 {
		return true
	}
	for _, z := range zones {
		if c.zones[o.zone] == z {
			return true
		}
	}
	return false
}

func containsCT(cts []pluginapi.CapacityType, ct pluginapi.CapacityType) bool {
	for _, c := range cts {
		if c == ct {
			return true
		}
	}
	return false
}

func gpuPhrase(n int64, kind string) string {
	s := strconv.FormatInt(n, 10) + " GPU"
	if n != 1 {
		s += "s"
	}
	if kind != "" {
		s += " of kind " + kind
	}
	return s
}

// podSize is the pod's own size, and the agent reserve when there is one.
func podSize(req *Requirements) string {
	s := size(req.MilliCPU-req.ReserveMilliCPU, req.MemoryBytes-req.ReserveMemoryBytes)
	if req.ReserveMilliCPU > 0 || req.ReserveMemoryBytes > 0 {
		s += fmt.Sprintf(", plus %s vCPU and %s for the kip agent", vcpu(req.ReserveMilliCPU), bytesString(req.ReserveMemoryBytes))
	}
	return s
}

func size(milliCPU, mem int64) string {
	return vcpu(milliCPU) + " vCPU, " + bytesString(mem)
}

func vcpu(milli int64) string {
	return strconv.FormatFloat(float64(milli)/1000, 'f', -1, 64)
}

func bytesString(b int64) string {
	const mi, gi = 1 << 20, 1 << 30
	round := func(v float64) string { return strconv.FormatFloat(float64(int64(v*100+0.5))/100, 'f', -1, 64) }
	switch {
	case b >= gi:
		return round(float64(b)/gi) + " GiB"
	case b >= mi:
		return round(float64(b)/mi) + " MiB"
	}
	return strconv.FormatInt(b, 10) + " B"
}
