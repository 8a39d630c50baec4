package gce

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"cloud.google.com/go/compute/apiv1/computepb"
	"google.golang.org/api/iterator"
	"google.golang.org/protobuf/proto"

	"github.com/kipcell/kip/pluginapi"
	"github.com/kipcell/kip/plugins/gce/catalog"
)

// ListInstanceTypes returns the embedded catalog for the configured region
// and zones, without the types of another architecture than the image's.
// An offering is available when Compute Engine sells the machine type in
// the zone: machineTypes.aggregatedList, once, kept for an hour. A custom
// machine type is sold where its family's predefined types are (the API
// lists only predefined types). Without permission for that call every
// offering of the catalog is available, and the plugin says so once.
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
	all, warnings := cat.InstanceTypes(cfg.region, cfg.zones)
	sold, err := cfg.machineTypes.get(ctx)
	if err != nil {
		return nil, fmt.Errorf("listing instance types: %w", err)
	}
	out := all[:0]
	otherArch := 0
	for _, t := range all {
		if cfg.imageArch != "" && t.Arch != cfg.imageArch {
			otherArch++
			continue
		}
		if sold != nil {
			for i := range t.Offerings {
				t.Offerings[i].Available = sold.has(t.Name, t.Offerings[i].Zone)
			}
		}
		out = append(out, t)
	}
	cfg.warnOnce.Do(func() {
		for _, w := range warnings {
			p.log.Warn(w)
		}
		if otherArch > 0 {
			p.log.Info("catalog: leaving out the types of another architecture than the image's",
				"image", cfg.imageURL, "arch", cfg.imageArch, "left_out", otherArch)
		}
	})
	return &pluginapi.ListInstanceTypesResponse{InstanceTypes: out}, nil
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

// machineTypes caches machineTypes.aggregatedList of the cells' zones.
type machineTypes struct {
	client  machineTypesAPI
	project string
	zones   []string
	ttl     time.Duration
	now     func() time.Time
	log     *slog.Logger

	sem chan struct{} // one fetch at a time; a waiter may give up with its ctx

	// Guarded by sem.
	at     time.Time
	sold   *soldTypes // nil: not permitted, or the answer was empty
	denied bool       // the last fetch was refused (logged once)
}

// get returns what is sold where, or nil when the plugin may not ask.
func (m *machineTypes) get(ctx context.Context) (*soldTypes, error) {
	select {
	case m.sem <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	defer func() { <-m.sem }()
	if !m.at.IsZero() && m.now().Sub(m.at) < m.ttl {
		return m.sold, nil
	}
	sold := &soldTypes{types: map[string]map[string]bool{}, families: map[string]map[string]bool{}}
	it := m.client.AggregatedList(ctx, &computepb.AggregatedListMachineTypesRequest{
		Project: m.project, MaxResults: proto.Uint32(aggregatedPage),
	})
	for {
		pair, err := it.Next()
		if errors.Is(err, iterator.Done) {
			break
		}
		if err != nil && isPermission(err) {
			if !m.denied {
				m.log.Warn("the plugin's IAM role does not allow compute.machineTypes.list: every type of the catalog is offered as available in every zone, and launches of types a zone does not sell fail over to the next candidate",
					"error", err)
			}
			m.denied, m.sold, m.at = true, nil, m.now()
			return nil, nil
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
			if !slices.Contains(m.zones, zone) || mt.GetDeprecated().GetState() == "OBSOLETE" || mt.GetDeprecated().GetState() == "DELETED" {
				continue
			}
			add(sold.types, mt.GetName(), zone)
			add(sold.families, family(mt.GetName()), zone)
		}
	}
	if len(sold.types) == 0 {
		// Compute Engine sells something in every zone; an empty answer is
		// an endpoint that does not know, not a region that sells nothing.
		m.log.Warn("machineTypes.aggregatedList answered no machine type in the cells' zones: every type of the catalog is offered as available", "zones", m.zones)
		sold = nil
	}
	m.denied, m.sold, m.at = false, sold, m.now()
	return sold, nil
}

func add(m map[string]map[string]bool, k, zone string) {
	if m[k] == nil {
		m[k] = map[string]bool{}
	}
	m[k][zone] = true
}
