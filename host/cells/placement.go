package cells

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/kipcell/kip/host/choices"
	"github.com/kipcell/kip/host/match"
	"github.com/kipcell/kip/host/metrics"
	"github.com/kipcell/kip/pluginapi"
)

// Annotations kip sets on a pod once its cell is placed: what was
// launched, where, and at what price. They sit under their own prefix so
// that they never collide with the annotations a user sets to ask for a
// type (kipcell.io/instance-type).
const (
	AnnotationPlacedPrefix       = "cell.kipcell.io/"
	AnnotationPlacedType         = AnnotationPlacedPrefix + "instance-type"
	AnnotationPlacedZone         = AnnotationPlacedPrefix + "zone"
	AnnotationPlacedCapacityType = AnnotationPlacedPrefix + "capacity-type"
	// AnnotationPlacedPrice is the hourly price in US dollars, or
	// "unknown" when the plugin's catalog has none.
	AnnotationPlacedPrice = AnnotationPlacedPrefix + "hourly-price"
)

// Event and status reasons of placement.
const (
	// ReasonNoInstanceType: no offering fits the pod, or the pod asks for
	// something malformed; the pod stays Pending and no cell is launched.
	ReasonNoInstanceType = "NoInstanceType"
	// ReasonInsufficientCapacity: the cloud had no capacity for an
	// offering; the next candidate is tried.
	ReasonInsufficientCapacity = "InsufficientCapacity"
)

// placement ranks a pod's candidate offerings against the plugin's
// catalog, leaving out those that recently ran out of capacity and those
// an account quota recently refused.
type placement struct {
	catalog     *catalogCache
	unavailable *match.Unavailable // offerings that recently ran out of capacity
	match       match.Config
	choices     choices.Config // what a pod may choose about its instance (cells.choices)
	ttl         time.Duration  // how long a quota refusal is remembered (Config.UnavailableTTL)
	now         func() time.Time
	metrics     *metrics.Metrics // told of each decision; nil records nothing

	mu     sync.Mutex
	quotas []quotaMark // scoped quota refusals, until they expire
}

// quotaMark is a scoped quota refusal (QuotaExceededError.Scoped),
// remembered until expires.
type quotaMark struct {
	quota   pluginapi.QuotaExceededError
	expires time.Time
}

// rank turns the pod into its ranked candidates, within what
// cells.choices lets it choose (opts: its launch annotations). An
// *match.UnsatisfiableError says why nothing fits, a
// *choices.ForbiddenError which choice is not the pod's to make; any other
// error is the plugin's. zones are further zone constraints (the pod's
// disks', the node's), each narrowing the pod's own.
func (p *placement) rank(ctx context.Context, pod *corev1.Pod, opts launchOptions, zones ...zoneConstraint) ([]match.Candidate, error) {
	req, err := match.PodRequirements(pod, p.match)
	for _, z := range zones {
		if err != nil {
			break
		}
		req, err = req.ConstrainZones(z.zones, z.source)
	}
	if err != nil {
		p.metrics.MatchDecision(match.Outcome(err))
		return nil, err
	}
	chosen := podChoices(pod, req, opts)
	if err := p.choices.Check(chosen); err != nil {
		p.metrics.MatchDecision(match.OutcomeUnsatisfiable)
		return nil, err
	}
	cat, err := p.catalog.get(ctx)
	if err != nil {
		if ctx.Err() == nil {
			p.metrics.MatchDecision(match.OutcomeError)
		}
		return nil, err
	}
	cands, err := cat.Rank(req, p.isUnavailable, p.match)
	if err == nil && len(chosen.InstanceTypes) > 0 {
		cands, err = p.bound(cat, req, chosen, cands)
	}
	p.metrics.MatchDecision(match.Outcome(err))
	if match.FellBack(req, cands) {
		p.metrics.CapacityFallback(metrics.FallbackSpotToOnDemand)
	}
	return cands, err
}

// zoneConstraint is a constraint on the zone of a pod's cell from
// beyond the pod's spec: source names it in the explanations.
type zoneConstraint struct {
	zones  []string
	source string
}

// bound applies cells.choices to the candidates of a pod that names an
// instance type: the types its rule allows, and the price ceiling against
// the cheapest type that fits its requests without the name.
func (p *placement) bound(cat *match.Catalog, req match.Requirements, chosen choices.Pod, cands []match.Candidate) ([]match.Candidate, error) {
	var cheapest match.Candidate
	if p.choices.Ceiling(chosen) > 0 {
		base := req
		base.InstanceTypes = nil
		// Offerings out of capacity still price the pod's requests.
		baseCands, err := cat.Rank(base, func(string, string, pluginapi.CapacityType) bool { return false }, p.match)
		if err != nil {
			return nil, err
		}
		cheapest = baseCands[0]
	}
	return p.choices.Bound(chosen, cands, cheapest)
}

// podChoices is what pod chooses about its instance, for cells.choices.
func podChoices(pod *corev1.Pod, req match.Requirements, opts launchOptions) choices.Pod {
	c := choices.Pod{
		Namespace: pod.Namespace, ServiceAccount: pod.Spec.ServiceAccountName,
		InstanceTypes: req.InstanceTypes, GPUKind: req.GPUKind, GPUKindSource: req.GPUKindSource,
		InstanceProfile: opts.instanceProfile, SecurityGroups: opts.securityGroups, VolumeSizeGiB: opts.volumeSizeGiB,
	}
	if req.CapacityTypeChosen() && len(req.CapacityTypes) > 0 {
		c.CapacityType, c.CapacityTypeSource = string(req.CapacityTypes[0]), req.CapacityTypeSource
	}
	return c
}

// markUnavailable skips cand's offering for a while: the cloud had no
// capacity for it.
func (p *placement) markUnavailable(cand match.Candidate) {
	p.unavailable.Mark(cand.InstanceType, cand.Zone, cand.CapacityType)
}

// markQuota skips every offering a scoped quota covers (its instance
// types, or all; its capacity type, or all), in every zone, for the TTL:
// an account quota is not a zone's capacity, and a spot quota leaves
// on-demand to a pod that may fall back.
func (p *placement) markQuota(q *pluginapi.QuotaExceededError) {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.now()
	p.quotas = slices.DeleteFunc(p.quotas, func(m quotaMark) bool { return !now.Before(m.expires) })
	p.quotas = append(p.quotas, quotaMark{
		quota:   pluginapi.QuotaExceededError{InstanceTypes: slices.Clone(q.InstanceTypes), CapacityType: q.CapacityType},
		expires: now.Add(p.ttl),
	})
}

// isUnavailable reports whether an offering recently ran out of capacity
// or is covered by a quota refusal; its signature is Rank's unavailable.
func (p *placement) isUnavailable(typ, zone string, ct pluginapi.CapacityType) bool {
	if p.unavailable.Contains(typ, zone, ct) {
		return true
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.quotas) == 0 {
		return false
	}
	now := p.now()
	for _, m := range p.quotas {
		if now.Before(m.expires) && m.quota.Covers(typ, ct) {
			return true
		}
	}
	return false
}

// sizeOf returns the CPU and memory of an instance type from the catalog
// (zero when the plugin no longer lists it).
func (p *placement) sizeOf(ctx context.Context, instanceType string) (int64, int64) {
	cat, err := p.catalog.get(ctx)
	if err != nil {
		return 0, 0
	}
	cpu, mem, _ := cat.Size(instanceType)
	return cpu, mem
}

// priceText is a candidate's price for people.
func priceText(c match.Candidate) string {
	if !c.PriceKnown {
		return "price unknown"
	}
	return "$" + strconv.FormatFloat(c.HourlyPrice, 'f', 4, 64) + "/h"
}

// placedAnnotations are the annotations recording where a cell runs.
func placedAnnotations(c match.Candidate, zone string) map[string]string {
	price := "unknown"
	if c.PriceKnown {
		price = strconv.FormatFloat(c.HourlyPrice, 'f', -1, 64)
	}
	a := map[string]string{
		AnnotationPlacedType:         c.InstanceType,
		AnnotationPlacedCapacityType: string(c.CapacityType),
		AnnotationPlacedPrice:        price,
	}
	if zone != "" {
		a[AnnotationPlacedZone] = zone
	}
	return a
}

// withoutPlaced returns m without kip's placement annotations, for
// comparing what a user changed.
func withoutPlaced(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		if !strings.HasPrefix(k, AnnotationPlacedPrefix) {
			out[k] = v
		}
	}
	return out
}
