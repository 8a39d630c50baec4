package toy

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/kipcell/kip/pluginapi"
	"github.com/kipcell/kip/pluginapi/kit"
)

// Name is the plugin's name: the binary is kip-plugin-toy.
const Name = "toy"

// Version is the plugin's own release version.
var Version = "0.1.0"

// zone is the toy cloud's only zone.
const zone = "toy-1a"

// catalog is what the toy cloud sells. A real plugin generates its catalog
// from sourced price and size tables (pluginapi/catalog) and embeds it.
var catalog = []pluginapi.InstanceType{
	{Name: "toy.small", MilliCPU: 1000, MemoryBytes: 1 << 30, Arch: pluginapi.ArchAMD64, Offerings: onDemand(0.01)},
	{Name: "toy.large", MilliCPU: 4000, MemoryBytes: 8 << 30, Arch: pluginapi.ArchAMD64, Offerings: onDemand(0.04)},
}

func onDemand(price float64) []pluginapi.Offering {
	return []pluginapi.Offering{{Zone: zone, CapacityType: pluginapi.CapacityOnDemand, HourlyPrice: price, PriceKnown: true, Available: true}}
}

// Checked at compile time: a method whose signature drifts from the
// contract fails the build. A plugin that offers an optional call adds
// its interface here too (pluginapi.EventWatcher for WatchEvents, …).
var (
	_ pluginapi.Provider       = (*provider)(nil)
	_ pluginapi.VolumeAttacher = (*provider)(nil)
)

// provider implements pluginapi.Provider. Its only state is the
// configuration: the instances are in the directory.
type provider struct {
	log *slog.Logger
	cfg *kit.Configured[config] // empty until Configure succeeds
}

// config is a validated configuration.
type config struct {
	clusterID string
	dir       string
	boot      time.Duration
}

// New is the plugin's pluginapi.Factory: func main() { pluginapi.Serve(toy.New) }.
func New(log *slog.Logger) pluginapi.Provider {
	return &provider{log: log, cfg: kit.NewConfigured[config](Name)}
}

// GetInfo says who the plugin is. It works before Configure.
func (p *provider) GetInfo(ctx context.Context, _ *pluginapi.GetInfoRequest) (*pluginapi.GetInfoResponse, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return info(), nil
}

// info is GetInfo's answer, which the volume calls check drivers against.
func info() *pluginapi.GetInfoResponse {
	return &pluginapi.GetInfoResponse{
		Name:         Name,
		Version:      Version,
		APIVersions:  pluginapi.SupportedAPIVersions(),
		ConfigSchema: configSchema,
		Catalog:      pluginapi.CatalogInfo{Source: "the toy cloud's two types, built in"},
		// The optional calls the toy implements (disks.go), and the
		// drivers of the PersistentVolumes it attaches.
		Capabilities:  []pluginapi.Capability{pluginapi.CapabilityVolumes},
		VolumeDrivers: []string{VolumeDriver},
	}
}

// Config is the toy's plugin.config, one struct for both its decoding
// and its JSON Schema: a field's json tag is its key, its other tags the
// schema's words for it (pluginapi.DecodeConfig, pluginapi.ConfigSchema).
type Config struct {
	Dir         string `json:"dir" required:"true" doc:"Absolute path of the toy cloud: one JSON file per instance."`
	BootSeconds int    `json:"bootSeconds,omitempty" minimum:"0" maximum:"600" doc:"Seconds from launch to running (default 0)."`
}

// configSchema is Config's JSON Schema, which GetInfo reports.
var configSchema = pluginapi.MustConfigSchema("kip-plugin-toy configuration", Config{})

// Configure checks plugin.config and the cluster ID, and creates the
// directory. Every error names the key to fix.
func (p *provider) Configure(ctx context.Context, req *pluginapi.ConfigureRequest) (*pluginapi.ConfigureResponse, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if req.ClusterID == "" {
		return nil, pluginapi.NewInvalidConfig("clusterID", "is required: every instance is tagged with it")
	}
	var c Config
	if err := pluginapi.DecodeConfig(req.Config, &c); err != nil {
		return nil, err
	}
	switch {
	case c.Dir == "":
		return nil, pluginapi.NewInvalidConfig("dir", "is required: the toy cloud's directory")
	case !filepath.IsAbs(c.Dir):
		return nil, pluginapi.NewInvalidConfig("dir", "%q is not an absolute path", c.Dir)
	case c.BootSeconds < 0 || c.BootSeconds > 600:
		return nil, pluginapi.NewInvalidConfig("bootSeconds", "%d is not between 0 and 600", c.BootSeconds)
	}
	if err := os.MkdirAll(c.Dir, 0o700); err != nil {
		return nil, pluginapi.NewInvalidConfig("dir", "%v", err)
	}
	p.cfg.Store(&config{clusterID: req.ClusterID, dir: c.Dir, boot: time.Duration(c.BootSeconds) * time.Second})
	p.log.Info("configured", "cluster", req.ClusterID, "dir", c.Dir)
	return &pluginapi.ConfigureResponse{}, nil
}

// ListInstanceTypes returns the catalog.
func (p *provider) ListInstanceTypes(ctx context.Context, _ *pluginapi.ListInstanceTypesRequest) (*pluginapi.ListInstanceTypesResponse, error) {
	if _, err := p.cfg.Ready(ctx); err != nil {
		return nil, err
	}
	return &pluginapi.ListInstanceTypesResponse{InstanceTypes: catalog}, nil
}
