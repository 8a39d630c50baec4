package azure

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v8"

	"github.com/kipcell/kip/pluginapi"
	"github.com/kipcell/kip/plugins/azure/catalog"
)

// ListInstanceTypes returns the embedded catalog for the configured
// location and zones. The catalog has no prices (plugins/azure/catalog):
// every offering's price is unknown, and the host ranks by size alone.
// An offering is available when Azure sells the size in the zone to this
// subscription: resourceSkus list of the location (its locationInfo zones,
// less its Location and Zone restrictions, such as
// NotAvailableForSubscription), once, kept for an hour. Without
// permission for that call every offering of the catalog is available,
// and the plugin says so once.
func (p *provider) ListInstanceTypes(ctx context.Context, req *pluginapi.ListInstanceTypesRequest) (*pluginapi.ListInstanceTypesResponse, error) {
	cfg, err := p.config()
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	cat, err := catalog.Load()
	if err != nil {
		return nil, fmt.Errorf("loading the embedded catalog: %w", err)
	}
	all, warnings := cat.InstanceTypes(cfg.location, cfg.zoneNames())
	sold, err := cfg.skus.get(ctx)
	if err != nil {
		return nil, fmt.Errorf("listing instance types: %w", err)
	}
	if sold != nil {
		for _, t := range all {
			for i := range t.Offerings {
				t.Offerings[i].Available = sold.has(t.Name, t.Offerings[i].Zone)
			}
		}
	}
	cfg.warnOnce.Do(func() {
		for _, w := range warnings {
			p.log.Warn(w)
		}
	})
	return &pluginapi.ListInstanceTypesResponse{InstanceTypes: all}, nil
}

// soldSizes is which VM sizes Azure sells this subscription in which
// zone, and each size's family (for quota refusals).
type soldSizes struct {
	zones    map[string]map[string]bool // lowercase size → contract zone
	families map[string][]string        // lowercase family → sizes
}

// has reports whether size is sold in zone (the contract's zone,
// <location>-<n>).
func (s *soldSizes) has(size, zone string) bool { return s.zones[strings.ToLower(size)][zone] }

// skuCache caches resourceSkus list of the cells' location.
type skuCache struct {
	client   resourceSKUsAPI
	location string
	zones    []string // the configured zones, 1 2 3
	ttl      time.Duration
	now      func() time.Time
	log      *slog.Logger

	sem chan struct{} // one fetch at a time; a waiter may give up with its ctx

	// Guarded by sem.
	at     time.Time
	sold   *soldSizes // nil: not permitted, or the answer was empty
	denied bool       // the last fetch was refused (logged once)
}

// family returns the sizes of a resourceSkus family (lowercase, such as
// standarddsv3family) the cache knows, or none.
func (c *skuCache) family(name string) []string {
	select {
	case c.sem <- struct{}{}:
	default:
		return nil // a fetch is under way: the failed size alone
	}
	defer func() { <-c.sem }()
	if c.sold == nil {
		return nil
	}
	return slices.Clone(c.sold.families[strings.ToLower(name)])
}

// get returns what is sold where, or nil when the plugin may not ask.
func (c *skuCache) get(ctx context.Context) (*soldSizes, error) {
	select {
	case c.sem <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	defer func() { <-c.sem }()
	if !c.at.IsZero() && c.now().Sub(c.at) < c.ttl {
		return c.sold, nil
	}
	sold := &soldSizes{zones: map[string]map[string]bool{}, families: map[string][]string{}}
	pager := c.client.NewListPager(&armcompute.ResourceSKUsClientListOptions{Filter: ptr(fmt.Sprintf("location eq '%s'", c.location))})
	for pager.More() {
		page, err := pager.NextPage(ctx)
		if err != nil && isForbidden(err) {
			if !c.denied {
				c.log.Warn("the plugin's role does not allow Microsoft.Compute/skus/read: every size of the catalog is offered as available in every zone, and launches of sizes a zone does not sell fail over to the next candidate",
					"error", err)
			}
			c.denied, c.sold, c.at = true, nil, c.now()
			return nil, nil
		}
		if err != nil {
			return nil, mapError("ResourceSkus_List", err)
		}
		for _, sku := range page.Value {
			c.add(sold, sku)
		}
	}
	if len(sold.zones) == 0 {
		// Azure sells something in every location; an empty answer is an
		// endpoint that does not know, not a location that sells nothing.
		c.log.Warn("resourceSkus list answered no VM size in the cells' location: every size of the catalog is offered as available", "location", c.location)
		sold = nil
	}
	c.denied, c.sold, c.at = false, sold, c.now()
	return sold, nil
}

// add records where one SKU is sold: a virtualMachines SKU of the location,
// in the zones of its locationInfo, less its restrictions.
func (c *skuCache) add(sold *soldSizes, sku *armcompute.ResourceSKU) {
	if !strings.EqualFold(deref(sku.ResourceType), "virtualMachines") || sku.Name == nil {
		return
	}
	name := strings.ToLower(*sku.Name)
	offered := map[string]bool{}
	for _, li := range sku.LocationInfo {
		if li == nil || !strings.EqualFold(deref(li.Location), c.location) {
			continue
		}
		for _, z := range li.Zones {
			offered[deref(z)] = true
		}
	}
	for _, r := range sku.Restrictions {
		if r == nil {
			continue
		}
		switch deref(r.Type) {
		case armcompute.ResourceSKURestrictionsTypeLocation:
			if containsFold(r.Values, c.location) {
				clear(offered)
			}
		case armcompute.ResourceSKURestrictionsTypeZone:
			if r.RestrictionInfo != nil && (len(r.RestrictionInfo.Locations) == 0 || containsFold(r.RestrictionInfo.Locations, c.location)) {
				for _, z := range r.RestrictionInfo.Zones {
					delete(offered, deref(z))
				}
			}
		}
	}
	zones := map[string]bool{}
	for _, z := range c.zones {
		if offered[z] {
			zones[zoneName(c.location, z)] = true
		}
	}
	sold.zones[name] = zones
	if f := strings.ToLower(deref(sku.Family)); f != "" && !slices.Contains(sold.families[f], *sku.Name) {
		sold.families[f] = append(sold.families[f], *sku.Name)
	}
}

// containsFold reports whether list holds s, without case.
func containsFold(list []*string, s string) bool {
	return slices.ContainsFunc(list, func(v *string) bool { return strings.EqualFold(deref(v), s) })
}

// zoneName is the contract's zone of an availability zone: <location>-<n>,
// as AKS writes topology.kubernetes.io/zone (eastus-1).
func zoneName(location, zone string) string { return location + "-" + zone }

// zoneNames are the configured zones as the contract names them.
func (cfg *config) zoneNames() []string {
	out := make([]string, 0, len(cfg.zones))
	for _, z := range cfg.zones {
		out = append(out, zoneName(cfg.location, z))
	}
	return out
}

// azureZone is the availability zone of a contract zone, ok false for a
// zone of another location or one not configured.
func (cfg *config) azureZone(zone string) (string, bool) {
	z, ok := strings.CutPrefix(zone, cfg.location+"-")
	return z, ok && slices.Contains(cfg.zones, z)
}
