package cells

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/kipcell/kip/host/match"
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

// catalog returns the matcher's index of the plugin's catalog, fetching it
// (and the plugin's capabilities) when it is older than CatalogTTL. A fetch error with a catalog at hand
// keeps the old one (logged); without one it is returned.
func (m *Manager) catalog(ctx context.Context) (*match.Catalog, error) {
	m.catMu.Lock()
	defer m.catMu.Unlock()
	now := m.cfg.Now()
	if m.cat != nil && now.Sub(m.catAt) < m.cfg.CatalogTTL {
		return m.cat, nil
	}
	info, err := m.plugin.GetInfo(ctx, &pluginapi.GetInfoRequest{})
	var resp *pluginapi.ListInstanceTypesResponse
	if err == nil {
		resp, err = m.plugin.ListInstanceTypes(ctx, &pluginapi.ListInstanceTypesRequest{})
	}
	if err != nil {
		if m.cat != nil {
			m.log.Warn("refreshing the instance-type catalog failed; keeping the last one", "error", err)
			m.catAt = now
			return m.cat, nil
		}
		return nil, fmt.Errorf("listing instance types: %w", err)
	}
	m.cat, m.catAt, m.caps = match.NewCatalog(resp.InstanceTypes), now, info.Capabilities
	m.log.Info("instance-type catalog loaded", "types", m.cat.Len())
	return m.cat, nil
}

// RefreshCatalog makes the next placement fetch the plugin's catalog and
// capabilities again, whatever their age: after a plugin swap, whose new
// version or configuration may offer other types, prices or capabilities.
func (m *Manager) RefreshCatalog() {
	m.catMu.Lock()
	defer m.catMu.Unlock()
	m.catAt = time.Time{}
}

// rank turns the pod into its ranked candidates. An *match.UnsatisfiableError
// says why nothing fits; any other error is the plugin's.
func (m *Manager) rank(ctx context.Context, pod *corev1.Pod) ([]match.Candidate, error) {
	req, err := match.PodRequirements(pod, m.cfg.Match)
	if err != nil {
		return nil, err
	}
	cat, err := m.catalog(ctx)
	if err != nil {
		return nil, err
	}
	return cat.Rank(req, m.unavailable.Contains, m.cfg.Match)
}

// sizeOf returns the CPU and memory of an instance type from the catalog
// (zero when the plugin no longer lists it).
func (m *Manager) sizeOf(ctx context.Context, instanceType string) (int64, int64) {
	cat, err := m.catalog(ctx)
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
