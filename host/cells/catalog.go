package cells

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/kipcell/kip/host/match"
	"github.com/kipcell/kip/pluginapi"
)

// catalogSource is the part of the plugin the catalog cache reads.
type catalogSource interface {
	GetInfo(ctx context.Context, req *pluginapi.GetInfoRequest) (*pluginapi.GetInfoResponse, error)
	ListInstanceTypes(ctx context.Context, req *pluginapi.ListInstanceTypesRequest) (*pluginapi.ListInstanceTypesResponse, error)
}

// catalogCache holds the plugin's catalog, indexed for the matcher, and
// the plugin's capabilities, read together and kept for ttl: placement,
// an Apply's registry credentials and the event watch cost no plugin call
// while they are fresh.
type catalogCache struct {
	plugin catalogSource
	ttl    time.Duration
	now    func() time.Time
	log    *slog.Logger

	mu      sync.Mutex // guards cat, at, caps and drivers; held while fetching
	cat     *match.Catalog
	at      time.Time
	caps    []pluginapi.Capability
	drivers []string // the CSI drivers whose volumes the plugin attaches
}

// get returns the matcher's index of the plugin's catalog, fetching it
// (and the plugin's capabilities) when it is older than ttl. A fetch error
// with a catalog at hand keeps the old one (logged); without one it is
// returned.
func (c *catalogCache) get(ctx context.Context) (*match.Catalog, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	if c.cat != nil && now.Sub(c.at) < c.ttl {
		return c.cat, nil
	}
	info, err := c.plugin.GetInfo(ctx, &pluginapi.GetInfoRequest{})
	var resp *pluginapi.ListInstanceTypesResponse
	if err == nil {
		resp, err = c.plugin.ListInstanceTypes(ctx, &pluginapi.ListInstanceTypesRequest{})
	}
	if err != nil {
		if c.cat != nil {
			c.log.Warn("refreshing the instance-type catalog failed; keeping the last one", "error", err)
			c.at = now
			return c.cat, nil
		}
		return nil, fmt.Errorf("listing instance types: %w", err)
	}
	c.cat, c.at, c.caps = match.NewCatalog(resp.InstanceTypes), now, info.Capabilities
	c.drivers = nil
	if slices.Contains(info.Capabilities, pluginapi.CapabilityVolumes) {
		c.drivers = info.VolumeDrivers
	}
	c.log.Info("instance-type catalog loaded", "types", c.cat.Len())
	return c.cat, nil
}

// refresh makes the next get fetch again, whatever the catalog's age.
func (c *catalogCache) refresh() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.at = time.Time{}
}

// hasCapability reports whether the plugin offers capability. The
// plugin's capabilities are read with its catalog and refreshed with it,
// so that an Apply costs no GetInfo call; a plugin swapped on SIGHUP is
// seen at once (refresh).
func (c *catalogCache) hasCapability(ctx context.Context, capability pluginapi.Capability) bool {
	if _, err := c.get(ctx); err != nil {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Contains(c.caps, capability)
}

// volumeDrivers returns the CSI drivers whose volumes the plugin
// attaches (none without CapabilityVolumes), read with the catalog.
func (c *catalogCache) volumeDrivers(ctx context.Context) ([]string, error) {
	if _, err := c.get(ctx); err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.drivers, nil
}

// ExtendedResources implements host/node.ResourceReporter: the GPU
// resources (match's gpuResources) when the plugin's catalog has an
// instance type with a GPU, so that the Node lists them and the scheduler
// places pods that request one here.
func (m *Manager) ExtendedResources(ctx context.Context) ([]corev1.ResourceName, error) {
	cat, err := m.catalog.get(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading the plugin's catalog: %w", err)
	}
	if !cat.HasGPUs() {
		return nil, nil
	}
	var out []corev1.ResourceName
	for _, r := range m.deps.cfg.Match.GPUResourceNames() {
		out = append(out, corev1.ResourceName(r))
	}
	return out, nil
}

// VolumeDrivers implements host/node.VolumeDriverReporter: the CSI
// drivers the plugin attaches now (none without CapabilityVolumes), read
// with the catalog, which a plugin swap refreshes (RefreshCatalog), so
// that the Node's zone labels and CSINode follow the new plugin.
func (m *Manager) VolumeDrivers(ctx context.Context) ([]string, error) {
	drivers, err := m.catalog.volumeDrivers(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading the plugin's volume drivers: %w", err)
	}
	return drivers, nil
}
