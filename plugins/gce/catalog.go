package gce

import (
	"context"
	"errors"
	"slices"

	"cloud.google.com/go/compute/apiv1/computepb"
	"google.golang.org/api/iterator"
	"google.golang.org/protobuf/proto"

	"github.com/kipcell/kip/pluginapi"
	"github.com/kipcell/kip/pluginapi/kit"
)

// ListInstanceTypes returns the embedded catalog for the configured region
// and zones, without the types of another architecture than the image's.
// An offering is available when Compute Engine sells the machine type in
// the zone: machineTypes.aggregatedList, once, kept for an hour. A custom
// machine type is sold where its family's predefined types are (the API
// lists only predefined types). Without permission for that call every
// offering of the catalog is available, and the plugin says so once.
func (p *provider) ListInstanceTypes(ctx context.Context, req *pluginapi.ListInstanceTypesRequest) (*pluginapi.ListInstanceTypesResponse, error) {
	cfg, err := p.cfg.Get()
	if err != nil {
		return nil, err
	}
	return cfg.types.List(ctx, func(ctx context.Context) (kit.Sells, error) {
		sold, err := cfg.machineTypes.Get(ctx)
		if sold == nil {
			return nil, err
		}
		return sold.has, nil
	})
}

// soldTypes is which machine types Compute Engine sells in which zone.
type soldTypes struct {
	types    map[string]map[string]bool // type → zone
	families map[string]map[string]bool // family → zone, for custom types
}

// has reports whether typ is sold in zone; a custom type is where its
// family is.
func (s *soldTypes) has(typ, zone string) bool {
	if s.types[typ][zone] {
		return true
	}
	if isCustom(typ) {
		return s.families[family(typ)][zone]
	}
	return false
}

// isCustom reports whether typ is a custom machine type (custom-2-4096,
// n2-custom-2-4096).
func isCustom(typ string) bool {
	f, rest, _ := cutFamily(typ)
	return f == "custom" || len(rest) >= 7 && rest[:7] == "custom-"
}

func cutFamily(typ string) (string, string, bool) {
	for i := range len(typ) {
		if typ[i] == '-' {
			return typ[:i], typ[i+1:], true
		}
	}
	return typ, "", false
}

// fetchMachineTypes returns the machine types cache's source:
// machineTypes.aggregatedList of the cells' zones; nil when Compute Engine
// answers none (an endpoint that does not know).
func (p *provider) fetchMachineTypes(cfg *config) func(context.Context) (*soldTypes, error) {
	return func(ctx context.Context) (*soldTypes, error) {
		sold := &soldTypes{types: map[string]map[string]bool{}, families: map[string]map[string]bool{}}
		it := cfg.clients.machineTypes.AggregatedList(ctx, &computepb.AggregatedListMachineTypesRequest{
			Project: cfg.project, MaxResults: proto.Uint32(aggregatedPage),
		})
		for {
			pair, err := it.Next()
			if errors.Is(err, iterator.Done) {
				break
			}
			if err != nil && isPermission(err) {
				return nil, kit.Denied("the plugin's IAM role does not allow compute.machineTypes.list: every type of the catalog is offered as available in every zone, and launches of types a zone does not sell fail over to the next candidate", err)
			}
			if err != nil {
				return nil, mapError("machineTypes.aggregatedList", err)
			}
			if pair.Value == nil {
				continue
			}
			for _, mt := range pair.Value.GetMachineTypes() {
				zone := last(mt.GetZone())
				if zone == "." || zone == "" {
					zone = last(pair.Key)
				}
				if !slices.Contains(cfg.zones, zone) || mt.GetDeprecated().GetState() == "OBSOLETE" || mt.GetDeprecated().GetState() == "DELETED" {
					continue
				}
				add(sold.types, mt.GetName(), zone)
				add(sold.families, family(mt.GetName()), zone)
			}
		}
		if len(sold.types) == 0 {
			// Compute Engine sells something in every zone; an empty answer
			// is an endpoint that does not know, not a region that sells
			// nothing.
			p.Log.Warn("machineTypes.aggregatedList answered no machine type in the cells' zones: every type of the catalog is offered as available", "zones", cfg.zones)
			return nil, nil
		}
		return sold, nil
	}
}

func add(m map[string]map[string]bool, k, zone string) {
	if m[k] == nil {
		m[k] = map[string]bool{}
	}
	m[k][zone] = true
}
