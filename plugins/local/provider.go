package local

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"

	"github.com/kipcell/kip/pluginapi"
)

// Name is the plugin's name: the binary is kip-plugin-local.
const Name = "local"

// Version is the plugin's release version, set when building a release:
//
//	go build -ldflags "-X github.com/kipcell/kip/plugins/local.Version=0.1.0" ./cmd/kip-plugin-local
var Version = "0.1.0-dev"

// The contract and the optional interfaces of its capabilities, checked
// at compile time: a signature that drifts from pluginapi's fails the
// build instead of silently dropping the feature (the host finds an
// optional call by type assertion).
var (
	_ pluginapi.Provider       = (*provider)(nil)
	_ pluginapi.VolumeAttacher = (*provider)(nil)
)

// provider implements pluginapi.Provider for cells that are processes on
// this machine. Its only fields are the configuration, the in-process half
// of the locks, which cells this process supervises, and seams for tests:
// everything about cells is on disk.
type provider struct {
	log   *slog.Logger
	cfg   atomic.Pointer[config] // nil until Configure succeeds
	locks locker

	// cgroupRoot is where cgroup file systems are mounted; tests point it
	// elsewhere to see a machine where limits cannot be enforced.
	cgroupRoot string
	// cgroupParent is the group cells' groups are made in (kip).
	cgroupParent string
	// probeNetns reports whether network namespaces work (network auto).
	probeNetns func(context.Context, machine) error

	// namespaces are the mount namespaces entered (Config.MountNamespace),
	// by path: a thread each, kept for the plugin's life and shared by
	// every Configure that names the same one.
	namespacesMu sync.Mutex
	namespaces   map[string]*mountNamespace

	// supervised are the cells whose agent this process supervises
	// (supervise.go).
	supervisedMu sync.Mutex
	supervised   map[string]bool
}

// New returns the local plugin's provider; it is the plugin's Factory:
//
//	func main() { pluginapi.Serve(local.New) }
func New(log *slog.Logger) pluginapi.Provider {
	return &provider{log: log, cgroupRoot: defaultCgroupRoot, cgroupParent: defaultCgroupParent, probeNetns: func(ctx context.Context, m machine) error { return m.probeNetns(ctx) }, supervised: map[string]bool{}, namespaces: map[string]*mountNamespace{}}
}

// GetInfo describes the plugin. It needs no configuration.
func (p *provider) GetInfo(ctx context.Context, req *pluginapi.GetInfoRequest) (*pluginapi.GetInfoResponse, error) {
	return info(), nil
}

// info is GetInfo's answer. Of the optional capabilities, only volumes:
// no spot, no GPUs, no security groups or instance profiles, no event
// stream.
func info() *pluginapi.GetInfoResponse {
	return &pluginapi.GetInfoResponse{
		Name:          Name,
		Version:       Version,
		APIVersions:   []string{pluginapi.APIVersion},
		Capabilities:  []pluginapi.Capability{pluginapi.CapabilityVolumes},
		VolumeDrivers: []string{VolumeDriver},
		ConfigSchema:  configSchema,
		Catalog:       pluginapi.CatalogInfo{Source: "built-in local catalog"},
	}
}

// Configure validates the configuration and makes the state directory. It
// may be called again (after a restart, the host sends the same values);
// cells launched under an earlier configuration keep the network and
// limits they were launched with, since their records say what they are.
func (p *provider) Configure(ctx context.Context, req *pluginapi.ConfigureRequest) (*pluginapi.ConfigureResponse, error) {
	if req.ClusterID == "" {
		return nil, pluginapi.NewInvalidConfig("clusterID", "is required: every cell is tagged with it")
	}
	raw, err := decodeConfig(req.Config)
	if err != nil {
		return nil, err
	}
	m, err := p.machine(raw.MountNamespace)
	if err != nil {
		return nil, pluginapi.NewInvalidConfig("mountNamespace", "%v", err)
	}
	cfg, warnings, err := validate(raw, m, func() error { return p.probeNetns(ctx, m) })
	if err != nil {
		return nil, err
	}
	cfg.clusterID, cfg.nodeName = req.ClusterID, req.NodeName
	if err := os.MkdirAll(cellsDir(cfg.stateDir), 0o700); err != nil {
		return nil, pluginapi.NewInvalidConfig("stateDir", "%v", err)
	}
	if err := installAgent(cfg); err != nil {
		return nil, err
	}
	p.cfg.Store(cfg)
	for _, w := range warnings {
		p.log.Warn(w)
	}
	p.log.Info("configured", "cluster", cfg.clusterID, "state_dir", cfg.stateDir,
		"network", cfg.network, "agent", cfg.agentPath, "instance_types", len(cfg.catalog))
	p.superviseAll(cfg)
	return &pluginapi.ConfigureResponse{Warnings: warnings}, nil
}

// machine returns where the plugin's commands run: in the mount namespace
// at path, entered once, or in the plugin's own when path is empty.
func (p *provider) machine(path string) (machine, error) {
	if path == "" {
		return machine{}, nil
	}
	p.namespacesMu.Lock()
	defer p.namespacesMu.Unlock()
	if ns := p.namespaces[path]; ns != nil {
		return machine{ns: ns}, nil
	}
	ns, err := enterMountNamespace(path)
	if err != nil {
		return machine{}, err
	}
	p.namespaces[path] = ns
	return machine{ns: ns}, nil
}

// ListInstanceTypes returns the catalog: built in, or the configured one.
func (p *provider) ListInstanceTypes(ctx context.Context, req *pluginapi.ListInstanceTypesRequest) (*pluginapi.ListInstanceTypesResponse, error) {
	cfg, err := p.config()
	if err != nil {
		return nil, err
	}
	return &pluginapi.ListInstanceTypesResponse{InstanceTypes: cfg.catalog}, nil
}

// errNotConfigured answers calls that need a configuration before
// Configure, which the host never makes (and pluginapi's server refuses
// before they get here).
var errNotConfigured = pluginapi.NewNotConfigured("the local plugin is not configured: Configure must come first")

func (p *provider) config() (*config, error) {
	cfg := p.cfg.Load()
	if cfg == nil {
		return nil, errNotConfigured
	}
	return cfg, nil
}

// cellLock takes the lock of one cell, held by Launch and Terminate.
func (p *provider) cellLock(ctx context.Context, cfg *config, cellID string) (unlock, error) {
	u, err := p.locks.lock(ctx, "cell/"+cellID, cellLockPath(cfg.stateDir, cellID))
	if err != nil {
		return nil, fmt.Errorf("locking cell %s: %w", cellID, err)
	}
	return u, nil
}

// dropCellLock removes the lock file of a cell that has no record (it
// ended, or never was) once a call holding its lock found so, so that the
// cells directory keeps nothing of it; as in destroy, removing the file
// under its lock is safe (flockFile notices). The caller holds the lock.
func (p *provider) dropCellLock(cfg *config, cellID string) {
	if err := os.Remove(cellLockPath(cfg.stateDir, cellID)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		p.log.Warn("removing the lock file of an ended cell", "cell", cellID, "error", err)
	}
}

// cellLockPath is the cell's lock file, beside (not in) its directory.
func cellLockPath(stateDir, cellID string) string {
	return filepath.Join(cellsDir(stateDir), cellID+".lock")
}
