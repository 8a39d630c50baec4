package match

import (
	"fmt"
	"strconv"
	"strings"
)

// explain says why no offering fits the request. It runs only when the
// ranker found nothing, so it favours clear messages over speed: it
// applies the ranker's own rules (rules.go) to the whole catalog one at a
// time, in the order of rule (the type rules narrow the types, the
// offering rules the offerings of the types left), and names the first
// rule that leaves nothing.
//
// The last rule, the unavailable marks, it does not ask about again: when
// every other rule leaves an offering, the ranker asked the unavailable
// function about each of them (its heap never filled, so it passed none
// over) and heard each time that it is marked. Asking again could hear
// otherwise from a mark that expired in between.
func (r *ranker) explain() error {
	// The explainer holds a copy of the ranker: it escapes (its rule
	// methods are called through a table), and the ranker Rank uses on
	// every call must stay on the stack.
	e := &explainer{r: *r, set: make([]int32, len(r.c.types)), named: -1}
	for i := range e.set {
		e.set[i] = int32(i)
	}
	for _, step := range [...]struct {
		rule rule
		why  func(*explainer) string
	}{
		{ruleCatalog, (*explainer).catalog},
		{ruleNames, (*explainer).names},
		{ruleZones, (*explainer).zones},
		{ruleArch, (*explainer).arch},
		{ruleExtended, (*explainer).extended},
		{ruleGPUs, (*explainer).gpus},
		{ruleSize, (*explainer).size},
		{ruleBaseline, (*explainer).baseline},
		{ruleCapacityType, (*explainer).capacityType},
		{ruleAvailable, (*explainer).available},
		{rulePrice, (*explainer).price},
	} {
		if why := step.why(e); why != "" {
			return &UnsatisfiableError{Reason: why, rule: step.rule}
		}
	}
	return &UnsatisfiableError{Reason: e.marks(), rule: ruleMarks}
}

// explainer is explain's state: what the rules applied so far leave, and
// what the messages name. Each of its rule methods narrows what is left by
// its rule and returns "", or, when the rule leaves nothing, the reason. A
// rule the request does not ask for (any zone, any architecture, no GPUs,
// unlimited bursting) leaves everything: its method returns at once.
type explainer struct {
	r      ranker
	set    []int32  // the types the type rules so far leave, in catalog order
	offers []offer  // the offerings the offering rules so far leave
	named  int32    // the type an exact name pattern names, or -1
	globs  []string // the glob patterns
}

// everyOffering is the subject of the offering rules' messages.
const everyOffering = "every offering that fits the pod"

// narrow narrows set to the types keep accepts and reports whether any is
// left; when none is, set stays as it was, for the message.
func (e *explainer) narrow(keep func(i int32) bool) bool {
	out := e.set[:0] // writes no further than it reads, and nothing when it keeps nothing
	for _, i := range e.set {
		if keep(i) {
			out = append(out, i)
		}
	}
	if len(out) == 0 {
		return false
	}
	e.set = out
	return true
}

// narrowOffers is narrow for offers.
func (e *explainer) narrowOffers(keep func(o *offer) bool) bool {
	out := e.offers[:0]
	for j := range e.offers {
		if keep(&e.offers[j]) {
			out = append(out, e.offers[j])
		}
	}
	if len(out) == 0 {
		return false
	}
	e.offers = out
	return true
}

// subject is "instance type m5.large", or "no instance type matching c5.*
// in us-east-1a" with the globs and zones asked for.
func (e *explainer) subject() string {
	if e.named >= 0 {
		return "instance type " + e.r.c.types[e.named].name
	}
	s := "no instance type"
	if len(e.globs) > 0 {
		s += " matching " + strings.Join(e.globs, " and ")
	}
	if len(e.r.req.Zones) > 0 {
		s += " in " + strings.Join(e.r.req.Zones, " or ")
	}
	return s
}

// verb is the subject with its verb: "no instance type … offers", but
// "instance type x does not offer".
func (e *explainer) verb(no, yes string) string {
	if e.named >= 0 {
		return e.subject() + " " + yes
	}
	return e.subject() + " " + no
}

func (e *explainer) catalog() string {
	if len(e.set) == 0 {
		return "the cloud plugin's catalog has no instance types"
	}
	return ""
}

func (e *explainer) names() string {
	r := &e.r
	for j, p := range r.req.InstanceTypes {
		if n := &r.s.names[j]; !n.exact {
			e.globs = append(e.globs, p.Pattern)
		} else if n.typ < 0 {
			return fmt.Sprintf("unknown instance type %s (%s)", p.Pattern, p.Source)
		} else {
			e.named = n.typ
		}
		if e.narrow(func(i int32) bool { return r.matchesName(j, i) }) {
			continue
		}
		if j == 0 || !r.anyMatches(j) {
			return fmt.Sprintf("no instance type matches %s (%s)", p.Pattern, p.Source)
		}
		q := r.req.InstanceTypes[0]
		return fmt.Sprintf("no instance type matches both %s (%s) and %s (%s)", q.Pattern, q.Source, p.Pattern, p.Source)
	}
	return ""
}

// zones applies inZone to the types: a type is left when it has an
// offering, of any capacity type, in an acceptable zone.
func (e *explainer) zones() string {
	r := &e.r
	if r.anyZone || e.narrow(func(i int32) bool {
		t := &r.c.types[i]
		for j := t.lo; j < t.hi; j++ {
			if r.inZone(&r.c.offers[j]) {
				return true
			}
		}
		return false
	}) {
		return ""
	}
	in := strings.Join(r.req.Zones, " or ")
	if e.named >= 0 {
		return fmt.Sprintf("%s is not offered in %s (%s)", e.subject(), in, r.req.ZoneSource)
	}
	s := "no instance type"
	if len(e.globs) > 0 {
		s += " matching " + strings.Join(e.globs, " and ")
	}
	return fmt.Sprintf("%s is offered in %s (%s)", s, in, r.req.ZoneSource)
}

func (e *explainer) arch() string {
	r := &e.r
	if r.arch == anyIndex || e.narrow(func(i int32) bool { return r.hasArch(r.c.hot[i].arch) }) {
		return ""
	}
	return e.verb("has arch ", "is not ") + fmt.Sprintf("%s (%s)", r.req.Arch, r.req.ArchSource)
}

func (e *explainer) extended() string {
	if !e.r.asksExtended() {
		return ""
	}
	return fmt.Sprintf("no instance type offers the extended resource %s (list it in ignoredResources if cells provide it)", sortedKeys(e.r.req.Extended)[0])
}

func (e *explainer) gpus() string {
	r := &e.r
	if r.gpus == 0 || e.narrow(func(i int32) bool { return r.hasGPUs(&r.c.hot[i]) }) {
		return ""
	}
	want := gpuPhrase(r.gpus, r.req.GPUKind)
	if e.named >= 0 {
		t := &r.c.types[e.named]
		have := "no GPU"
		if t.gpuCount > 0 {
			have = gpuPhrase(t.gpuCount, t.gpuKind)
		}
		return fmt.Sprintf("%s has %s; the pod needs %s", e.subject(), have, want)
	}
	return e.verb("offers ", "") + want
}

func (e *explainer) size() string {
	r := &e.r
	if e.narrow(func(i int32) bool { h := &r.c.hot[i]; return r.largeEnough(h.milliCPU, h.mem) }) {
		return ""
	}
	if e.named >= 0 {
		t := &r.c.types[e.named]
		return fmt.Sprintf("instance type %s (%s) is too small for the pod (%s)", t.name, size(t.milliCPU, t.mem), podSize(&r.req))
	}
	// set is in catalog order (vCPU, memory, name): its last type has the
	// most CPU; name the one with the most memory too.
	big, roomy := &r.c.types[e.set[len(e.set)-1]], &r.c.types[e.set[0]]
	for _, i := range e.set {
		if t := &r.c.types[i]; t.mem > roomy.mem {
			roomy = t
		}
	}
	largest := fmt.Sprintf("the largest is %s (%s)", big.name, size(big.milliCPU, big.mem))
	if roomy != big {
		largest += fmt.Sprintf(", the roomiest %s (%s)", roomy.name, size(roomy.milliCPU, roomy.mem))
	}
	return fmt.Sprintf("%s is large enough for the pod (%s); %s", e.subject(), podSize(&r.req), largest)
}

func (e *explainer) baseline() string {
	r := &e.r
	if r.unlimited || e.narrow(func(i int32) bool { return r.baselineCovers(&r.c.hot[i]) }) {
		return ""
	}
	if e.named >= 0 {
		t := &r.c.types[e.named]
		return fmt.Sprintf("instance type %s is burstable and its baseline (%s vCPU) is below the pod's %s vCPU; the burstable policy is %q",
			t.name, vcpu(t.baseline), vcpu(r.req.MilliCPU), BurstableBaseline)
	}
	return fmt.Sprintf("every instance type large enough for the pod (%s) is burstable with a baseline below its CPU; the burstable policy is %q", podSize(&r.req), BurstableBaseline)
}

// capacityType starts the offering rules: the offerings of the types left
// in an acceptable capacity type and zone.
func (e *explainer) capacityType() string {
	r := &e.r
	for _, i := range e.set {
		t := &r.c.types[i]
		for j := t.lo; j < t.hi; j++ {
			if o := &r.c.offers[j]; r.wantsCT(o.ct) && r.inZone(o) {
				e.offers = append(e.offers, *o)
			}
		}
	}
	if len(e.offers) > 0 {
		return ""
	}
	cts := make([]string, 0, len(r.req.CapacityTypes))
	for _, ct := range r.req.CapacityTypes {
		cts = append(cts, string(ct))
	}
	return e.verb("that fits the pod is offered as ", "is not offered as ") + fmt.Sprintf("%s (%s)", strings.Join(cts, " or "), r.req.CapacityTypeSource)
}

func (e *explainer) available() string {
	if e.narrowOffers(func(o *offer) bool { return o.avail }) {
		return ""
	}
	o, c := e.offers[0], e.r.c // none is available: the first is an example
	return fmt.Sprintf("%s is unavailable in the cloud now (%d offerings, such as %s %s in %s)", everyOffering, len(e.offers), c.types[o.typ].name, ctNames[o.ct], c.zones[o.zone])
}

func (e *explainer) price() string {
	if e.narrowOffers(e.r.priceAllowed) {
		return ""
	}
	return fmt.Sprintf("%s has an unknown price and the unknown-price rule is %q", everyOffering, UnknownPriceExclude)
}

// marks names the last rule, which the ranker applied to every offering
// left (see explain).
func (e *explainer) marks() string {
	n := fmt.Sprintf("%d offerings", len(e.offers))
	if len(e.offers) == 1 {
		n = "1 offering"
	}
	return fmt.Sprintf("%s is marked unavailable after a recent launch failed for lack of capacity (%s); kip retries when the marks expire", everyOffering, n)
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
