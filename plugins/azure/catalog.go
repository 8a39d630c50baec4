package azure

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v8"

	"github.com/kipcell/kip/pluginapi"
	"github.com/kipcell/kip/pluginapi/kit"
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
	cfg, err := p.cfg.Get()
	if err != nil {
		return nil, err
	}
	return cfg.types.List(ctx, func(ctx context.Context) (kit.Sells, error) {
		sold, err := cfg.skus.Get(ctx)
		if sold == nil {
			return nil, err
		}
		return sold.has, nil
	})
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

// family returns the sizes of a resourceSkus family (lowercase, such as
// standarddsv3family) the SKU cache knows, or none (also while a fetch is
// under way: the failed size alone).
func (cfg *config) family(name string) []string {
	sold, _ := cfg.skus.Peek()
	if sold == nil {
		return nil
	}
	return slices.Clone(sold.families[strings.ToLower(name)])
}

// fetchSKUs returns the SKU cache's source: resourceSkus list of the
// cells' location; nil when Azure answers no VM size there (an endpoint
// that does not know).
func (p *provider) fetchSKUs(cfg *config) func(context.Context) (*soldSizes, error) {
	return func(ctx context.Context) (*soldSizes, error) {
		sold := &soldSizes{zones: map[string]map[string]bool{}, families: map[string][]string{}}
		pager := cfg.clients.skus.NewListPager(&armcompute.ResourceSKUsClientListOptions{Filter: ptr(fmt.Sprintf("location eq '%s'", cfg.location))})
		for pager.More() {
			page, err := pager.NextPage(ctx)
			if err != nil && isForbidden(err) {
				return nil, kit.Denied("the plugin's role does not allow Microsoft.Compute/skus/read: every size of the catalog is offered as available in every zone, and launches of sizes a zone does not sell fail over to the next candidate", err)
			}
			if err != nil {
				return nil, mapError("ResourceSkus_List", err)
			}
			for _, sku := range page.Value {
				sold.add(sku, cfg.location, cfg.zones)
			}
		}
		if len(sold.zones) == 0 {
			// Azure sells something in every location; an empty answer is
			// an endpoint that does not know, not a location that sells
			// nothing.
			p.Log.Warn("resourceSkus list answered no VM size in the cells' location: every size of the catalog is offered as available", "location", cfg.location)
			return nil, nil
		}
		return sold, nil
	}
}

// add records where one SKU is sold: a virtualMachines SKU of location,
// in those of zones (1 2 3) of its locationInfo, less its restrictions.
func (sold *soldSizes) add(sku *armcompute.ResourceSKU, location string, zones []string) {
	if !strings.EqualFold(deref(sku.ResourceType), "virtualMachines") || sku.Name == nil {
		return
	}
	name := strings.ToLower(*sku.Name)
	offered := map[string]bool{}
	for _, li := range sku.LocationInfo {
		if li == nil || !strings.EqualFold(deref(li.Location), location) {
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
			if containsFold(r.Values, location) {
				clear(offered)
			}
		case armcompute.ResourceSKURestrictionsTypeZone:
			if r.RestrictionInfo != nil && (len(r.RestrictionInfo.Locations) == 0 || containsFold(r.RestrictionInfo.Locations, location)) {
				for _, z := range r.RestrictionInfo.Zones {
					delete(offered, deref(z))
				}
			}
		}
	}
	in := map[string]bool{}
	for _, z := range zones {
		if offered[z] {
			in[zoneName(location, z)] = true
		}
	}
	sold.zones[name] = in
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
